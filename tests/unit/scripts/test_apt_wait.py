"""scripts/lib/common.sh's apt_install waits for the package manager's locks and retries a
failed download, against a fake apt-get that plays a script of outcomes.

A fresh CI machine's own apt-get held the dpkg lock right after boot, and the stages that
install packages failed in one second. The real locks are fcntl record locks on files under
/var/lib (holding them needs root and blocks the machine's apt), so the outcomes apt-get prints
are played here instead: the messages are apt 2.6's own.
"""

import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COMMON = os.path.join(REPO, "scripts", "lib", "common.sh")

FAKE_APT_GET = r"""#!/bin/bash
# Plays $FAKE_APT_PLAN, one outcome per call (ok|lock|listslock|net|other), and logs its args.
n=$(cat "$FAKE_APT_STATE" 2>/dev/null || echo 0); echo $((n+1)) >"$FAKE_APT_STATE"
read -r -a plan <<<"$FAKE_APT_PLAN"; what="${plan[$n]:-ok}"
echo "$* => $what" >>"$FAKE_APT_LOG"
case "$what" in
  ok) exit 0 ;;
  lock) echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 1 (apt-get)" >&2
        echo "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?" >&2
        exit 100 ;;
  listslock) echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 1 (apt-get)" >&2
        echo "E: Unable to lock directory /var/lib/apt/lists/" >&2; exit 100 ;;
  net) echo "W: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  Temporary failure resolving 'deb.debian.org'" >&2
       echo "E: Some index files failed to download. They have been ignored, or old ones used instead." >&2
       exit 100 ;;
  other) echo "E: Unable to locate package nosuchpkg" >&2; exit 100 ;;
esac
"""


def run_apt_install(tmp_path, plan, timeout=600):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "apt-get"
    fake.write_text(FAKE_APT_GET)
    fake.chmod(0o755)
    log = tmp_path / "calls"
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]), FAKE_APT_PLAN=" ".join(plan),
               FAKE_APT_STATE=str(tmp_path / "state"), FAKE_APT_LOG=str(log),
               GPUFLEET_APT_LOCK_POLL="0.1", GPUFLEET_APT_RETRY_DELAYS="0.1 0.1",
               GPUFLEET_APT_LOCK_TIMEOUT=str(timeout))
    proc = subprocess.run(["bash", "-c", 'set -euo pipefail; . "$1"; apt_install pkg', "_", COMMON],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    calls = log.read_text().splitlines() if log.exists() else []
    return proc.returncode, calls, proc.stderr


@pytest.mark.parametrize("plan, rc, calls", [
    (["ok", "ok"], 0, 2),
    # the lists lock (apt-get update) is not covered by DPkg::Lock::Timeout: polled
    (["listslock", "listslock", "listslock", "ok", "ok"], 0, 5),
    (["ok", "lock", "lock", "ok"], 0, 4),
    (["net", "ok", "ok"], 0, 3),
    # three failed updates, then a plain one that keeps what it could fetch
    (["net", "net", "net", "ok", "ok"], 0, 5),
    (["net"] * 6, 1, 6),
    (["ok", "net", "net", "net"], 100, 4),
    (["ok", "net", "ok"], 0, 3),
    # not a lock, not a download: no retry
    (["ok", "other"], 100, 2),
])
def test_apt_install_waits_and_retries(tmp_path, plan, rc, calls):
    got_rc, got_calls, stderr = run_apt_install(tmp_path, plan)
    assert (got_rc, len(got_calls)) == (rc, calls), stderr
    assert all("-o DPkg::Lock::Timeout=" in call for call in got_calls)
    assert got_calls[0].split(" => ")[0].endswith("update -qq")


def test_a_lock_held_past_the_deadline_fails_saying_so(tmp_path):
    # A deadline of 5 s, polled every 0.1 s: at least two tries even when a loaded CI machine
    # takes over a second for the first (seen with a deadline of 1 s), never all 200.
    rc, calls, stderr = run_apt_install(tmp_path, ["listslock"] * 200, timeout=5)
    assert rc == 1 and 2 <= len(calls) < 200
    assert "lock was still held after 5s" in stderr
