"""The artifacts folder shared with another local user: a swap between a check and a write never
redirects the write, and a FIFO planted as a record never blocks (security finding 1).

fleet_report checked index.html with lstat, read every record, then wrote the page by path
following a link; artifact_files checked its folder and files, then wrote by path the same way.
Another user who can create entries in the folder swaps index.html (or a record, or a host's
folder) for a symbolic link to the operator's ~/.ssh/authorized_keys in between, and the file is
replaced. Here a second process keeps swapping while the actions run, and hooks make the swap
land exactly between the checks and the write; the victim must keep its bytes and mode, and
every run must end in bounded time. Against the code before the fix these tests fail (the victim
is replaced; the FIFO swapped in for the page blocks the comparison for ever).

The actions run in this process through their ActionModule.run, as ansible-playbook calls it.
"""

import os
import stat
import subprocess
import sys
import types
from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.gpufleet.tuning.plugins.action import artifact_files as artifact_files_action
from ansible_collections.gpufleet.tuning.plugins.action import fleet_report
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_files
from ansible_collections.gpufleet.tuning.tests.unit import fleet_artifacts_fake as fake
from ansible_collections.gpufleet.tuning.tests.unit.helpers import bounded

KEY = b"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOperator operator@controller\n"

# Swaps TARGET between a regular file and a symbolic link to VICTIM, each time atomically (a new
# entry renamed over the name), until STOP exists: what another user with write access to the
# folder can do.
SWAPPER = r"""
import os, sys
target, victim, stop = sys.argv[1:4]
folder = os.path.dirname(target)
link, plain = os.path.join(folder, ".swap-link"), os.path.join(folder, ".swap-file")
while not os.path.exists(stop):
    try:
        os.symlink(victim, link)
        os.replace(link, target)
        with open(plain, "w") as handle:
            handle.write("x")
        os.replace(plain, target)
    except OSError:
        pass
"""


def run_action(module, args, check_mode=False, seconds=30):
    """``module``'s ActionModule.run with ``args``, in a thread: (result or None, the exception it
    raised or None); fails the test when the run does not end within ``seconds``."""
    task = mock.MagicMock(args=args, check_mode=check_mode, async_val=0, action="gpufleet.tuning.x")
    action = module.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                 shared_loader_obj=None)
    try:
        return bounded(lambda: action.run(task_vars={}), seconds), None
    except Exception as exc:  # pylint: disable=broad-except
        return None, exc


def refused(failed, path):
    """The action failed as it must when it meets a link or a swap at ``path``."""
    return isinstance(failed, AnsibleActionFail) and "refusing %s" % path in str(failed)


def victim_of(tmp_path):
    victim = tmp_path / "home" / ".ssh" / "authorized_keys"
    victim.parent.mkdir(parents=True)
    victim.write_bytes(KEY)
    victim.chmod(0o600)
    return victim


def assert_untouched(victim):
    info = os.lstat(str(victim))
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600, "the victim's mode was changed"
    assert victim.read_bytes() == KEY, "the victim's bytes were replaced"


def release(fifo):
    """Unblock a reader stuck on ``fifo`` (the old code's), so the test process can go on."""
    try:
        os.close(os.open(str(fifo), os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


@pytest.fixture
def shared(tmp_path):
    """A fleet's artifacts folder, group-writable as a shared one is (others may create entries),
    with a FIFO where gpu-node-03's audit.json should be, and the operator's key file."""
    root = tmp_path / "artifacts"
    fake.write_fleet(str(root), 16)
    root.chmod(0o2775)
    fifo = root / "gpu-node-03" / "audit.json"
    fifo.unlink()
    os.mkfifo(str(fifo))
    yield root, victim_of(tmp_path), fifo
    release(fifo)


@pytest.fixture
def swapper(tmp_path):
    """Start the swapper on a path; stopped (and waited for) at the end of the test."""
    stop = tmp_path / "stop-swapping"
    started = []

    def start(target, victim):
        started.append(subprocess.Popen([sys.executable, "-c", SWAPPER, str(target), str(victim), str(stop)]))
    yield start
    stop.write_text("")
    for process in started:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_page_swapped_for_a_link_while_the_report_runs_never_replaces_the_victim(shared, swapper):
    root, victim, fifo = shared
    (root / "index.html").write_text("old page\n")
    swapper(root / "index.html", victim)
    unexpected = []
    for _run in range(30):
        result, failed = run_action(fleet_report, {"path": str(root)})
        if result is None and not refused(failed, root / "index.html"):
            unexpected.append(failed)
    assert_untouched(victim)
    assert not unexpected, "only a refusal of the page may stop the report: %r" % unexpected
    assert stat.S_ISFIFO(os.lstat(str(fifo)).st_mode)


def test_a_fifo_planted_as_a_record_is_named_and_never_read(shared):
    root, victim, fifo = shared
    result, failed = run_action(fleet_report, {"path": str(root)})
    assert failed is None and result["changed"] is True
    assert "gpu-node-03/audit.json: it is a FIFO (named pipe), not a regular file" in result["notes"]
    assert_untouched(victim)


def _swap_during_collect(monkeypatch, root, make):
    """Make ``make(page)`` replace index.html while the report reads the records: after the
    checks of the folder and the page, before the comparison and the write."""
    real = fleet_report.collect.collect

    def collect(*args, **kwargs):
        page = root / "index.html"
        staged = root / ".staged"
        make(staged)
        os.replace(str(staged), str(page))
        return real(*args, **kwargs)
    monkeypatch.setattr(fleet_report.collect, "collect", collect)


def test_a_link_swapped_in_between_the_checks_and_the_write_is_not_followed(tmp_path, monkeypatch):
    root = tmp_path / "artifacts"
    fake.write_fleet(str(root), 4)
    victim = victim_of(tmp_path)
    (root / "index.html").write_text("old page\n")
    _swap_during_collect(monkeypatch, root, lambda staged: os.symlink(str(victim), str(staged)))
    result, failed = run_action(fleet_report, {"path": str(root)})
    assert_untouched(victim)
    assert result is None and "refusing %s: it is a symbolic link" % (root / "index.html") in str(failed)


def test_a_fifo_swapped_in_for_the_page_does_not_block_the_comparison(tmp_path, monkeypatch):
    root = tmp_path / "artifacts"
    fake.write_fleet(str(root), 4)
    result, failed = run_action(fleet_report, {"path": str(root)})
    assert failed is None and result["changed"] is True
    _swap_during_collect(monkeypatch, root, lambda staged: os.mkfifo(str(staged)))
    try:
        result, failed = run_action(fleet_report, {"path": str(root)}, seconds=10)
    finally:
        release(root / "index.html")
    assert result is None and "refusing %s: it is a FIFO (named pipe)" % (root / "index.html") in str(failed)


def test_a_record_swapped_for_a_link_while_artifact_files_writes_never_replaces_the_victim(tmp_path, swapper):
    folder = tmp_path / "artifacts" / "node-a"
    folder.mkdir(parents=True, mode=0o2775)
    victim = victim_of(tmp_path)
    (folder / "audit.json").write_text("old\n")
    swapper(folder / "audit.json", victim)
    unexpected = []
    for number in range(300):
        files = {"audit.json": '{"run": %d}\n' % number, "system-improve.md": "# node-a\n"}
        result, failed = run_action(artifact_files_action, {"path": str(folder), "files": files}, seconds=10)
        if result is None and not refused(failed, folder / "audit.json"):
            unexpected.append(failed)
    assert_untouched(victim)
    assert not unexpected, "only a refusal of the record may stop the write: %r" % unexpected


def test_a_folder_swapped_for_a_link_between_the_checks_and_the_write_is_not_followed(tmp_path, monkeypatch):
    folder = tmp_path / "artifacts" / "node-a"
    folder.mkdir(parents=True)
    elsewhere = tmp_path / "home" / ".ssh"
    victim = victim_of(tmp_path)
    real = artifact_files.hashlib.sha256
    swapped = []

    def sha256(data):  # called once per file once the folder was checked, before any write
        if not swapped:
            os.rename(str(folder), str(folder) + ".moved")
            os.symlink(str(elsewhere), str(folder))
            swapped.append(True)
        return real(data)
    monkeypatch.setattr(artifact_files, "hashlib", types.SimpleNamespace(sha256=sha256))
    result, failed = run_action(artifact_files_action, {"path": str(folder), "files": {"authorized_keys": "pwned\n"}})
    assert swapped and failed is None, failed
    assert_untouched(victim)
    assert sorted(os.listdir(str(elsewhere))) == ["authorized_keys"]
    assert (tmp_path / "artifacts" / "node-a.moved" / "authorized_keys").read_text() == "pwned\n", \
        "written in the folder that was checked, wherever it went"
    assert result["changed"] is True


@pytest.mark.parametrize("module, args", [
    (fleet_report, {}),
    (artifact_files_action, {"files": {"audit.json": "{}\n"}}),
])
def test_a_folder_others_may_write_without_the_sticky_bit_is_refused_and_nothing_written(tmp_path, module, args):
    root = tmp_path / "artifacts"
    fake.write_fleet(str(root), 2)
    root.chmod(0o777)
    before = sorted(os.listdir(str(root)))
    result, failed = run_action(module, dict(args, path=str(root)))
    assert result is None and isinstance(failed, AnsibleActionFail)
    assert "refusing %s: it is writable by other users without the sticky bit (mode 0777)" % root in str(failed)
    assert str(failed).endswith("; nothing was written")
    assert sorted(os.listdir(str(root))) == before
    root.chmod(0o1777)  # sticky, as /tmp: others cannot rename or remove what is not theirs
    result, failed = run_action(module, dict(args, path=str(root)))
    assert failed is None and result["changed"] is True
