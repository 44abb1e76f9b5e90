"""rlimit values and /proc/<pid>/limits parsing."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import rlimit
from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree

# A real /proc/self/limits (kernel 6.1), memlock at LXC's default of 8 MiB.
LIMITS_8M = (
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max cpu time              unlimited            unlimited            seconds   \n"
    "Max file size             unlimited            unlimited            bytes     \n"
    "Max data size             unlimited            unlimited            bytes     \n"
    "Max stack size            8388608              unlimited            bytes     \n"
    "Max core file size        0                    unlimited            bytes     \n"
    "Max resident set          unlimited            unlimited            bytes     \n"
    "Max processes             95634                95634                processes \n"
    "Max open files            1024                 524288               files     \n"
    "Max locked memory         8388608              8388608              bytes     \n"
    "Max address space         unlimited            unlimited            bytes     \n"
    "Max file locks            unlimited            unlimited            locks     \n"
    "Max pending signals       95634                95634                signals   \n"
    "Max msgqueue size         819200               819200               bytes     \n"
    "Max nice priority         0                    0                    \n"
    "Max realtime priority     0                    0                    \n"
    "Max realtime timeout      unlimited            unlimited            us        \n"
)


def test_parse_proc_limits_memlock():
    assert rlimit.parse_proc_limits(LIMITS_8M) == (8388608, 8388608)
    unlimited = LIMITS_8M.replace("Max locked memory         8388608              8388608",
                                  "Max locked memory         65536                unlimited")
    assert rlimit.parse_proc_limits(unlimited) == (65536, rlimit.INFINITY)
    # "Max locked memory" must not be confused with "Max file locks"
    assert rlimit.parse_proc_limits(LIMITS_8M, "Max file locks") == (rlimit.INFINITY, rlimit.INFINITY)


def test_parse_proc_limits_without_row():
    with pytest.raises(rlimit.LimitError):
        rlimit.parse_proc_limits("Limit   Soft Limit  Hard Limit  Units\n")


def test_read_process_limit(tmp_path):
    write_tree(tmp_path, {"1/limits": LIMITS_8M, "1/comm": "systemd\n", "2/limits": "garbage\n"})
    assert rlimit.read_process_limit(1, str(tmp_path)) == (8388608, 8388608)
    assert rlimit.read_process_limit(99, str(tmp_path)) is None
    assert rlimit.process_name(1, str(tmp_path)) == "systemd"
    assert rlimit.process_name(99, str(tmp_path)) is None
    with pytest.raises(rlimit.LimitError, match="2/limits"):
        rlimit.read_process_limit(2, str(tmp_path))


def test_format_and_covers():
    inf = rlimit.INFINITY
    assert rlimit.format_pair((inf, inf)) == "unlimited"
    assert rlimit.format_pair((65536, 65536)) == "65536"
    assert rlimit.format_pair((65536, inf)) == "65536:unlimited"
    assert rlimit.covers(inf, 1 << 40) and rlimit.covers(5, 5) and not rlimit.covers(8388608, inf)


def test_reads_this_process(tmp_path):
    # the real kernel file parses too
    pair = rlimit.read_process_limit("self")
    assert len(pair) == 2 and pair[0] <= pair[1]


def test_read_process_limit_never_blocks_on_what_sits_there(tmp_path):
    import os
    import signal

    os.makedirs(str(tmp_path / "proc/7"))
    os.mkfifo(str(tmp_path / "proc/7/limits"))
    previous = signal.signal(signal.SIGALRM, lambda *_a: pytest.fail("blocked on a FIFO"))
    signal.alarm(10)
    try:
        with pytest.raises(OSError) as exc:
            rlimit.read_process_limit(7, str(tmp_path / "proc"))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert "proc/7/limits" in exc.value.filename
    assert rlimit.read_process_limit(8, str(tmp_path / "proc")) is None  # gone: None
    assert rlimit.process_name(8, str(tmp_path / "proc")) is None
