# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check this collection's roles' variables against their meta/argument_specs.yml, several roles
in one task, on the controller.

Why not the validation Ansible puts at the start of a role: that task carries the role's whole
argument spec as its arguments, descriptions and all, and every host's worker templates it,
deep-copies it into the validator, and sends it back with the result for ansible-playbook to
read again; on a 2-core controller that was 45 ms of worker CPU per host for the host role and
24 ms for the audit role, against about 25 ms for both here (README "Speed of a tuning pass",
benchmarks/runtime_pass.py --profile-tasks). Here the spec is read from the role's file with PyYAML's
safe loader (cached per process while the file is unchanged), only the role's variables are
templated, and one task checks both roles a play imports. The spec file is parsed once and kept as
JSON until it changes (plugin_utils/yaml_cache.py). playbooks/tune.yml imports those
roles with rolespec_validate false and has the host role's tuning call make this check
(gpufleet.tuning.host_tuning's role_arguments option, with errors() and failure() here) before it
reads or changes anything; a playbook that imports them the usual way keeps Ansible's own
validation of the same spec.

The check is the one Ansible makes (ansible.module_utils.common.arg_spec.ArgumentSpecValidator
on the variables the spec names, templated), and a failure says the same: "Validation of
arguments failed:" and one line per error, each naming the role.
"""

from __future__ import annotations

import os

import yaml

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import yaml_cache

COLLECTION = "gpufleet.tuning"
# This file is plugins/action/ of the collection; its roles are roles/ beside plugins/.
ROLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")
# What the validator reads of an option; the rest (description, version_added) is for people.
_SPEC_KEYS = frozenset(("type", "elements", "choices", "default", "required", "no_log", "aliases",
                        "mutually_exclusive", "required_together", "required_one_of", "required_if", "required_by"))

# Parsed spec files of this process: path -> ((size, mtime_ns, inode), argument_specs).
_SPECS = {}


def _fail(message):
    raise AnsibleActionFail("role_arguments: %s" % message)


def role_dir(name):
    """The folder of this collection's role ``name`` (``host`` or ``gpufleet.tuning.host``)."""
    if not isinstance(name, str) or not name:
        _fail("each role must be a role name of %s, got %r" % (COLLECTION, name))
    short = name[len(COLLECTION) + 1:] if name.startswith(COLLECTION + ".") else name
    if "." in short or "/" in short or short in ("", "..") or not os.path.isdir(os.path.join(ROLES_DIR, short)):
        _fail("%r is not a role of %s (its roles: %s)" % (name, COLLECTION, ", ".join(sorted(
            entry for entry in os.listdir(ROLES_DIR) if os.path.isdir(os.path.join(ROLES_DIR, entry))))))
    return os.path.join(ROLES_DIR, short)


def _plain(option):
    """An option of the spec with what the validator reads, suboptions likewise."""
    out = dict((key, value) for key, value in option.items() if key in _SPEC_KEYS)
    if isinstance(option.get("options"), dict):
        out["options"] = dict((name, _plain(sub)) for name, sub in option["options"].items())
    return out


def load_spec(name, entry_point="main"):
    """The options of role ``name``'s entry point ``entry_point``, as the validator takes them."""
    folder = role_dir(name)
    for filename in ("argument_specs.yml", "argument_specs.yaml"):
        path = os.path.join(folder, "meta", filename)
        try:
            info = os.stat(path)
        except OSError:
            continue
        key = (info.st_size, info.st_mtime_ns, info.st_ino)
        cached = _SPECS.get(path)
        if cached is None or cached[0] != key:
            try:
                specs = (yaml_cache.load(path) or {}).get("argument_specs") or {}
            except (OSError, yaml.YAMLError, AttributeError) as exc:
                _fail("cannot read %s: %s" % (path, " ".join(str(exc).split())))
            cached = _SPECS[path] = (key, specs)
        entry = cached[1].get(entry_point)
        if not isinstance(entry, dict):
            _fail("role %s has no entry point %r in %s (it has: %s)" % (name, entry_point, path, ", ".join(sorted(cached[1]))))
        return dict((option, _plain(spec)) for option, spec in (entry.get("options") or {}).items())
    _fail("role %s has no meta/argument_specs.yml" % name)
    return None  # not reached


def check(spec, values):
    """The validator's error messages for ``values`` (the variables, templated) against ``spec``."""
    return ArgumentSpecValidator(spec).validate(values).error_messages


def errors(templar, task_vars, roles, entry_point="main"):
    """Every error of the variables of ``roles`` (names of this collection's roles) against their
    ``entry_point``'s spec, each naming its role: the variables each spec names, templated with
    ``templar`` from ``task_vars``. Raises AnsibleActionFail for a bad role or entry point."""
    if not isinstance(roles, list) or not roles:
        _fail("roles must be a list of role names, got %r" % (roles,))
    if not isinstance(entry_point, str) or not entry_point:
        _fail("entry_point must be a name, got %r" % (entry_point,))
    task_vars = task_vars or {}
    found = []
    for name in roles:
        spec = load_spec(name, entry_point)
        values = templar.template(dict((option, task_vars[option]) for option in spec if option in task_vars))
        found.extend("%s: %s" % (name, message) for message in check(spec, values))
    return found


def failure(found):
    """The failed result for the errors ``found``: Ansible's own wording, one line per error."""
    return dict(failed=True, argument_errors=found, msg="Validation of arguments failed:\n%s" % "\n".join(found))


class ActionModule(ActionBase):
    """gpufleet.tuning.role_arguments: documented in plugins/modules/role_arguments.py."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("roles", "entry_point"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        roles = self._task.args.get("roles")
        found = errors(self._templar, task_vars, roles, self._task.args.get("entry_point", "main"))
        if found:
            result.update(failure(found))
            return result
        result.update(changed=False, roles=list(roles), msg="The roles' variables match their argument specs")
        return result
