"""Builders for fake /proc and /sys trees, a runner for modules' main(), and one for playbooks."""

import json
import os
import re
import subprocess
import sys
import threading

import pytest

from ansible.module_utils.testing import patch_module_args


def write_tree(root, files):
    """Create ``{relative path: content}`` under ``root``; content str/bytes, None = directory."""
    for rel, content in files.items():
        path = os.path.join(str(root), rel)
        if content is None:
            os.makedirs(path, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(path, mode) as handle:
            handle.write(content)


def snapshot(root):
    """Every file under ``root`` with its bytes, every symlink as ``-> target``, every
    directory as ``<dir>``, and the permission bits of each file and directory.

    Comparing two snapshots is how the tests prove "nothing was written": check mode, refused
    input and rolled-back failures must leave every byte, link, mode and directory as it was
    (a rollback that leaves an empty directory or a 0644 helper behind is a defect).
    """
    found = {}
    for dirpath, dirs, files in os.walk(str(root)):
        for name in files + dirs:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, str(root))
            if os.path.islink(path):
                found[rel] = "-> " + os.readlink(path)
            elif os.path.isdir(path):
                found[rel] = "<dir %o>" % (os.stat(path).st_mode & 0o7777)
            elif os.path.isfile(path):
                with open(path, "rb") as handle:
                    found[rel] = handle.read()
                found[rel + " (mode)"] = "%o" % (os.stat(path).st_mode & 0o7777)
            else:
                found[rel] = "<special %o>" % os.lstat(path).st_mode
    return found


def read(path):
    with open(str(path)) as handle:
        return handle.read()


def run_module(module, args, capsys, check_mode=False, diff=False):
    """Run a module's main() with ``args``; return (failed, result dict)."""
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    capsys.readouterr()
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exc:
            module.main()
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    return bool(exc.value.code) or bool(result.get("failed")), result


def run_playbook(workdir, inventory, playbook, args=(), cfg_extra=""):
    """Run ansible-playbook on ``playbook`` (text) with ``inventory`` (a dict) in ``workdir``,
    against this checkout as the only gpufleet.tuning and with private Ansible folders, so the
    machine's own configuration never leaks in. Returns (exit status, combined output)."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    workdir = str(workdir)
    with open(os.path.join(workdir, "inventory.yml"), "w") as handle:
        handle.write(json.dumps(inventory))
    with open(os.path.join(workdir, "play.yml"), "w") as handle:
        handle.write(playbook)
    with open(os.path.join(workdir, "ansible.cfg"), "w") as handle:
        handle.write("[defaults]\ncollections_path = %s\nretry_files_enabled = false\n%s"
                     % (os.path.join(repo, ".collections"), cfg_extra))
    for sub in ("home", "tmp"):
        os.makedirs(os.path.join(workdir, sub), exist_ok=True)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(workdir, "ansible.cfg"),
               ANSIBLE_HOME=os.path.join(workdir, "home"), ANSIBLE_LOCAL_TEMP=os.path.join(workdir, "tmp"),
               ANSIBLE_REMOTE_TEMP=os.path.join(workdir, "tmp"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false", ANSIBLE_FORCE_COLOR="0")
    for name in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS", "ANSIBLE_ROLES_PATH", "ANSIBLE_INVENTORY"):
        env.pop(name, None)
    playbook_bin = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.run([playbook_bin, "-i", os.path.join(workdir, "inventory.yml"),
                           os.path.join(workdir, "play.yml")] + list(args),
                          cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    return proc.returncode, proc.stdout


def result_of(out):
    """The value a play's last task printed as ``msg: "RESULT {{ x | to_json }}"``, decoded: how
    the action tests read a registered result out of ansible-playbook's output."""
    for line in out.splitlines():
        if '"msg": "RESULT ' in line:
            return json.loads(json.loads(line.split('"msg": ', 1)[1])[len("RESULT "):])
    raise AssertionError("no result in:\n" + out)


def bounded(work, seconds=10):
    """Run ``work()`` in a thread; its result or exception, failing the test if it blocks (a
    FIFO opened for reading, where a reader must refuse it without opening)."""
    box = {}

    def target():
        try:
            box["value"] = work()
        except BaseException as exc:  # pylint: disable=broad-except
            box["error"] = exc
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "blocked for more than %d s" % seconds
    if "error" in box:
        raise box["error"]
    return box.get("value")


# A role default that reads the node's profile (roles/profile): profile_settings.NAME, else the
# base value, written as a Jinja literal or as a variable of the role's vars/main.yml.
PROFILE_DEFAULT = re.compile(r"^\{\{ profile_settings\.(\w+) \| default\((.*)\) \}\}$", re.S)
# A mapping's: its base combined with what the profile sets, key by key.
PROFILE_COMBINED = re.compile(r"^\{\{ (.*) \| combine\(profile_settings\.(\w+) \| default\(\{\}\)\) \}\}$", re.S)


def base_default(value, role_vars=None):
    """``value`` as the base profile gives it: a default that reads profile_settings is its
    default() argument evaluated, a mapping's its base before the combine (with ``role_vars``);
    anything else is returned as it is."""
    import jinja2  # the controller's; not needed by the module tests
    if isinstance(value, str):
        match = PROFILE_DEFAULT.match(value.strip())
        if match:
            return jinja2.Environment().compile_expression(match.group(2))(**(role_vars or {}))
        match = PROFILE_COMBINED.match(value.strip())
        if match:
            return jinja2.Environment().compile_expression(match.group(1))(**(role_vars or {}))
    return value


def role_base_defaults(repo, role):
    """The role's defaults (defaults/main/*.yml, or defaults/main.yml) with the profile-reading
    ones resolved to their base values."""
    import yaml
    folder = os.path.join(repo, "roles", role, "defaults")
    paths = [os.path.join(folder, "main.yml")] if os.path.isfile(os.path.join(folder, "main.yml")) else [
        os.path.join(folder, "main", n) for n in sorted(os.listdir(os.path.join(folder, "main"))) if n.endswith((".yml", ".yaml"))]
    merged = {}
    for path in paths:
        with open(path) as handle:
            merged.update(yaml.safe_load(handle) or {})
    role_vars = {}
    vars_file = os.path.join(repo, "roles", role, "vars", "main.yml")
    if os.path.isfile(vars_file):
        with open(vars_file) as handle:
            role_vars = yaml.safe_load(handle) or {}
    return dict((k, base_default(v, role_vars)) for k, v in merged.items())
