import errno
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl

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
