import errno
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import sysctl

from ansible_collections.gpufleet.tuning.tests.unit.helpers import write_tree


@pytest.mark.parametrize("key", ["vm.swappiness", "net.ipv4.tcp_rmem", "net.ipv4.conf.eth-0.rp_filter",
                                 "kernel.sched_autogroup_enabled", "net.ipv6.conf.all.disable_ipv6"])
def test_valid_keys(key):
    assert sysctl.validate_key(key) is None


@pytest.mark.parametrize("key, fragment", [
    ("", "empty"),
    ("vm/swappiness", "'/'"),
    ("vm..swappiness", "empty component"),
    (".vm.swappiness", "empty component"),
    ("vm.swappiness.", "empty component"),
    ("swappiness", "dotted"),
    ("vm.swap piness", "dotted"),
    ("vm.swappiness\n", "dotted"),
])
def test_malformed_keys(key, fragment):
    assert fragment in sysctl.validate_key(key)


@pytest.mark.parametrize("value, expected", [
    (10, "10"),
    (True, "1"),
    (False, "0"),
    ("  4096\t87380   134217728 ", "4096 87380 134217728"),
    ([4096, 87380, 134217728], "4096 87380 134217728"),
    ("cubic", "cubic"),
])
def test_normalize(value, expected):
    assert sysctl.normalize_value(value) == expected


@pytest.mark.parametrize("value, fragment", [
    ("10\n20", "newline"),
    ("a\rb", "newline"),
    (None, "no value"),
    (1.5, "float"),
    ([], "empty list"),
    ({"a": 1}, "unsupported type"),
])
def test_normalize_refuses(value, fragment):
    with pytest.raises(sysctl.SysctlError) as exc:
        sysctl.normalize_value(value)
    assert fragment in str(exc.value)


def test_read_folds_tabs(tmp_path):
    write_tree(tmp_path, {"net/ipv4/tcp_rmem": "4096\t131072\t6291456\n"})
    assert sysctl.read_value("net.ipv4.tcp_rmem", str(tmp_path)) == "4096 131072 6291456"


def test_read_unknown_key_names_path(tmp_path):
    with pytest.raises(sysctl.SysctlError) as exc:
        sysctl.read_value("vm.nope", str(tmp_path))
    assert "unknown key vm.nope" in str(exc.value)
    assert os.path.join(str(tmp_path), "vm", "nope") in str(exc.value)


def test_write_then_read(tmp_path):
    write_tree(tmp_path, {"vm/swappiness": "60\n"})
    sysctl.write_value("vm.swappiness", "10", str(tmp_path))
    assert sysctl.read_value("vm.swappiness", str(tmp_path)) == "10"


@pytest.mark.parametrize("key, namespaced", [
    ("net.core.somaxconn", True),
    ("net.ipv4.tcp_rmem", True),
    ("net.core.rmem_max", False),
    ("net.core.wmem_max", False),
    ("kernel.shmmax", True),
    ("fs.mqueue.msg_max", True),
    ("kernel.numa_balancing", False),
    ("vm.swappiness", False),
    ("fs.file-max", False),
])
def test_namespacing(key, namespaced):
    assert sysctl.is_namespaced(key) is namespaced


def test_describe_oserror_names_enotsupp():
    text = sysctl.describe_oserror(OSError(524, "Unknown error 524"))
    assert text.startswith("ENOTSUPP 524")
    assert "EINVAL 22" in sysctl.describe_oserror(OSError(errno.EINVAL, "Invalid argument"))


def test_unwritable_set_excludes_einval():
    assert errno.EINVAL not in sysctl.UNWRITABLE_ERRNOS
    assert sysctl.ENOTSUPP in sysctl.UNWRITABLE_ERRNOS
    assert errno.EROFS in sysctl.UNWRITABLE_ERRNOS


# --- values: the shape the kernel holds, folded whitespace, no empties -----------------------

@pytest.mark.parametrize("value, fragment", [
    ("", "empty"),
    ("   \t ", "empty"),
    ([[1, 2], 3], "single value"),
])
def test_normalize_refuses_empty_and_nested(value, fragment):
    with pytest.raises(sysctl.SysctlError) as exc:
        sysctl.normalize_value(value)
    assert fragment in str(exc.value)


def test_tabs_in_a_desired_value_are_folded_like_the_kernels():
    assert sysctl.normalize_value("4096\t131072\t6291456") == sysctl.normalize_read("4096\t131072\t6291456\n")


@pytest.mark.parametrize("current, desired, fragment", [
    # fewer fields: the kernel keeps the rest and the read-back never matches
    ("4096 131072 6291456", "4096 131072", "holds 3 integers"),
    # extra fields: the kernel ignores them
    ("4096 131072 6291456", "4096 131072 6291456 999", "holds 3 integers"),
    ("60", "60 10", "holds 1 integer "),
    # base 0 parsing: octal and hex never read back as written
    ("60", "010", "octal: it would store 8"),
    ("4096 131072 6291456", "4096 0x20000 6291456", "would store 131072"),
    ("60", "+10", "not a plain decimal"),
    ("60", "09", "octal and would refuse it"),
])
def test_value_shape_errors(current, desired, fragment):
    reason = sysctl.value_shape_error("k.k", current, desired)
    assert reason is not None and fragment in reason, reason


@pytest.mark.parametrize("current, desired", [
    ("4096 131072 6291456", "4096 87380 134217728"),
    ("60", "10"),
    ("-1", "5"),
    ("cubic", "bbr"),                    # a string key
    ("00", "ff"),                        # a hex cpumask prints a leading zero: not an int key
    ("8080", "8080,9148"),               # ip_local_reserved_ports: a list, not a vector
    ("0", "0-3"),                        # a cpu list
    ("", "1"),                           # an empty string key
    (None, "10"),                        # a key that does not exist here
])
def test_value_shape_accepts(current, desired):
    assert sysctl.value_shape_error("k.k", current, desired) is None


@pytest.mark.parametrize("current, desired, effective, kept", [
    # the replayed node: the profile's old default would have cut the initial buffer
    ("4096 131072 6291456", "4096 87380 134217728", "4096 131072 134217728", [2]),
    ("4096 131072 33554432", "4096 131072 134217728", "4096 131072 134217728", []),
    ("4194304", "212992", "4194304", [1]),
    ("4096 131072 268435456", "4096 87380 134217728", "4096 131072 268435456", [2, 3]),
    ("18446744073692774399", "68719476736", "18446744073692774399", [1]),   # shmmax, beyond 64-bit signed
    ("-1", "5", "5", []),
])
def test_raise_fields(current, desired, effective, kept):
    assert sysctl.raise_fields(current, desired) == (effective, kept)


@pytest.mark.parametrize("current, desired", [
    ("4096 131072", "4096 131072 6291456"),
    ("cubic", "bbr"),
    ("60", "010"),
    (None, "1"),
])
def test_raise_fields_needs_two_integer_vectors_of_one_shape(current, desired):
    assert sysctl.raise_fields(current, desired) is None


def test_raise_only_default_is_valid_keys():
    assert len(set(sysctl.RAISE_ONLY_DEFAULT)) == len(sysctl.RAISE_ONLY_DEFAULT)
    for key in sysctl.RAISE_ONLY_DEFAULT:
        assert sysctl.validate_key(key) is None, key
    for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.rmem_max", "net.core.wmem_max",
                "net.ipv4.tcp_mem", "net.core.somaxconn", "fs.file-max", "vm.max_map_count"):
        assert key in sysctl.RAISE_ONLY_DEFAULT
    # toggles and tuning knobs that a profile lowers on purpose are not in it
    for key in ("vm.swappiness", "kernel.numa_balancing", "net.ipv4.tcp_notsent_lowat"):
        assert key not in sysctl.RAISE_ONLY_DEFAULT


@pytest.mark.parametrize("value, fragment", [
    (None, "null"),
    (60, "a int"),
    (["60"], "a list"),
    ("6\n0", "newline"),
    ("4096\t131072", "whitespace-folded"),
    (" 60", "whitespace-folded"),
])
def test_stored_values_are_refused_unless_one_folded_line(value, fragment):
    assert fragment in sysctl.validate_stored_value(value)


def test_stored_value_accepted():
    assert sysctl.validate_stored_value("4096 131072 6291456") is None


@pytest.mark.parametrize("key", [None, 5, ("vm", "swappiness")])
def test_non_string_keys(key):
    assert sysctl.validate_key(key) is not None


# --- reading and writing /proc/sys -------------------------------------------------------------

def test_read_non_utf8_value_is_a_sysctl_error_naming_key(tmp_path):
    write_tree(tmp_path, {"kernel/core_pattern": b"core\xff\n"})
    with pytest.raises(sysctl.SysctlError) as exc:
        sysctl.read_value("kernel.core_pattern", str(tmp_path))
    assert "kernel.core_pattern" in str(exc.value) and "EILSEQ" in str(exc.value)


def test_read_a_directory_of_keys_says_so(tmp_path):
    write_tree(tmp_path, {"net/ipv4/tcp_rmem": "4096\n"})
    with pytest.raises(sysctl.SysctlError) as exc:
        sysctl.read_value("net.ipv4", str(tmp_path))
    assert "net.ipv4 is a directory of keys" in str(exc.value)


def test_read_refuses_a_fifo_without_blocking(tmp_path):
    os.makedirs(str(tmp_path / "vm"))
    os.mkfifo(str(tmp_path / "vm/swappiness"))
    with pytest.raises(sysctl.SysctlError) as exc:
        sysctl.read_value("vm.swappiness", str(tmp_path))
    assert "vm.swappiness" in str(exc.value)


def test_write_replaces_the_whole_value(tmp_path):
    write_tree(tmp_path, {"net/ipv4/tcp_rmem": "4096\t131072\t6291456\n"})
    sysctl.write_value("net.ipv4.tcp_rmem", "1", str(tmp_path))
    assert sysctl.read_value("net.ipv4.tcp_rmem", str(tmp_path)) == "1"


def test_write_error_carries_the_errno(tmp_path):
    with pytest.raises(OSError) as exc:
        sysctl.write_value("vm.nope", "1", str(tmp_path))
    assert exc.value.errno == errno.ENOENT


@pytest.mark.parametrize("key", [
    "net.core.netdev_max_backlog", "net.core.mem_pcpu_rsv", "net.core.skb_defer_max",
    "net.ipv4.tcp_max_orphans", "net.ipv4.udp_mem", "net.nf_conntrack_max",
])
def test_init_namespace_only_keys_are_host_wide(key):
    assert sysctl.is_namespaced(key) is False


@pytest.mark.parametrize("key", ["net.core.optmem_max", "net.ipv4.udp_rmem_min", "net.ipv4.tcp_wmem",
                                 "net.core.rps_default_mask"])
def test_per_namespace_net_keys(key):
    assert sysctl.is_namespaced(key) is True


# --- the real kernel, in a throwaway network namespace ------------------------------------------

def run_in_new_netns(code):
    """Run ``code`` with this Python in a new network namespace (its net.* keys are its own and
    vanish with it); return its stdout, or skip where that cannot be done."""
    import shutil
    import subprocess
    import sys
    if os.geteuid() != 0:
        pytest.skip("needs root to make a network namespace")
    unshare = shutil.which("unshare")
    if not unshare:
        pytest.skip("no unshare(1)")
    collections = os.path.join(os.path.dirname(__file__), *([os.pardir] * 5), ".collections")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(collections))
    proc = subprocess.run([unshare, "-n", sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    if proc.returncode != 0 and "unshare failed" in proc.stderr:
        pytest.skip("cannot make a network namespace here: %s" % proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_live_kernel_half_applies_a_rejected_vector_write():
    """The fact the profile's rollback rests on (kernel/sysctl.c __do_proc_dointvec): the
    fields before a rejected one are already live when the write fails with EINVAL, fewer
    fields leave the rest, and a leading 0 is octal.

    Every value written is one the running kernel's own bounds accept except the rejected 0:
    Linux 6.18 refuses a first tcp_rmem field below 4096 (older kernels take 1 and up), so the
    octal step writes 010000 (4096, read back as 4096, where a decimal reading would give
    10000), which both accept. Should a kernel refuse even that, the test says so and skips."""
    out = run_in_new_netns("""
import errno
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import sysctl
key = "net.ipv4.tcp_rmem"
old = sysctl.read_value(key)
a, b, c = (int(x) for x in old.split())
try:
    sysctl.write_value(key, "%d %d 0" % (a + 1, b + 1))
    print("no error")
except OSError as exc:
    print(errno.errorcode[exc.errno])
print(sysctl.read_value(key) == "%d %d %d" % (a + 1, b + 1, c))
sysctl.write_value(key, "%d %d" % (a, b))
print(sysctl.read_value(key) == "%d %d %d" % (a, b, c))
try:
    sysctl.write_value(key, "010000 %d %d" % (b, c))
    print(sysctl.read_value(key).split()[0])
except OSError as exc:
    print("refused-" + errno.errorcode[exc.errno])
""")
    found = out.split()
    if found[-1].startswith("refused-"):
        pytest.skip("this kernel refuses tcp_rmem's first field 4096 (%s): its bounds are not the ones this "
                    "test knows" % found[-1])
    assert found == ["EINVAL", "True", "True", "4096"]


def test_key_path_never_leaves_the_root(tmp_path):
    """A key read from a state file is data: it cannot name a path outside /proc/sys."""
    root = tmp_path / "proc_sys"
    (root / "vm").mkdir(parents=True)
    (tmp_path / "victim").write_text("x")
    os.symlink(str(tmp_path), str(root / "kernel"))
    assert sysctl.key_path("vm.swappiness", str(root)) == str(root / "vm" / "swappiness")
    for key in ("x./etc/victim", "../victim", "kernel.victim", "vm..x", "vm.swappiness\n"):
        with pytest.raises(sysctl.SysctlError):
            sysctl.key_path(key, str(root))


def test_exists_and_writable(tmp_path, monkeypatch):
    root = str(tmp_path)
    write_tree(tmp_path, {"vm/swappiness": "60\n", "net/ipv4": None})
    assert sysctl.exists("vm.swappiness", root) is True
    assert sysctl.exists("vm.dirty_ratio", root) is False
    assert sysctl.exists("net.ipv4", root) is False        # a directory of keys
    assert sysctl.writable("vm.swappiness", root) == (True, None)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    ok, reason = sysctl.writable("vm.swappiness", root)
    assert ok is False and reason == "%s is not writable by this user" % (tmp_path / "vm/swappiness")


def test_writable_names_a_read_only_mount(tmp_path, monkeypatch):
    """An unprivileged container mounts /proc/sys read-only: the reason says whose it is."""
    write_tree(tmp_path, {"vm/swappiness": "60\n"})

    class ReadOnly:
        f_flag = os.ST_RDONLY
    monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly())
    ok, reason = sysctl.writable("vm.swappiness", str(tmp_path))
    assert ok is False and "read-only mount (inside a container the host owns it)" in reason


@pytest.mark.parametrize("value, fields", [
    ("60", [60]), ("4096 131072 6291456", [4096, 131072, 6291456]), ("-1", [-1]),
    ("cubic", None), ("4096 x", None), ("010", None), ("+5", None),
])
def test_int_fields_takes_only_what_the_kernel_prints(value, fields):
    assert sysctl.int_fields(value) == fields


def test_errno_names_include_the_kernels_enotsupp():
    assert sysctl.errno_name(errno.EPERM) == "EPERM"
    assert sysctl.errno_name(sysctl.ENOTSUPP) == "ENOTSUPP"
    assert sysctl.errno_name(9999) == "errno 9999"
