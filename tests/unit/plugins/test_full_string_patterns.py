"""Names and values are checked against the whole string: ``$`` accepts a trailing newline.

``re.match(r"^NVreg_\\w+$", "NVreg_EnableMSI\\n")`` matches, so a name with a newline slipped
past a validator and wrote a corrupt options line. Every anchored pattern in the plugins must
end in ``\\Z`` (or be used with fullmatch); this scans the sources, and the validators below are
fed a trailing newline to prove it.
"""

import glob
import os
import re

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import cpu_power
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import kernel_modules
from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_memlock
from ansible_collections.gpufleet.tuning.plugins.module_utils import memlock_info
from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_driver_options
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import sysctl
from ansible_collections.gpufleet.tuning.plugins.module_utils import sysctl_profile

PLUGINS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "plugins")
# A string literal that starts with ^ and ends with $: anchored, newline-tolerant.
_DOLLAR_ANCHORED = re.compile(r'''r?b?r?["']\^[^"'\n]*\$["']''')


def test_no_pattern_in_the_plugins_ends_in_a_bare_dollar():
    offenders = []
    for path in sorted(glob.glob(os.path.join(PLUGINS, "**", "*.py"), recursive=True)):
        with open(path) as handle:
            for number, line in enumerate(handle, 1):
                if _DOLLAR_ANCHORED.search(line):
                    offenders.append("%s:%d: %s" % (os.path.relpath(path, PLUGINS), number, line.strip()))
    assert offenders == []


@pytest.mark.parametrize("pattern, good", [
    (nvidia_driver_options.NAME_RE, "NVreg_EnableMSI"),
    (nvidia_driver_options.FILENAME_RE, "zz-gpufleet-nvidia.conf"),
    (sysctl_profile.NAME_RE, "inference"),
    (lxc_memlock.NAME_RE, "web"),
    (memlock_info.UNIT_RE, "vllm.service"),
    (kernel_modules._PARAM_NAME_RE, "peerdirect_support"),
    (kernel_modules._BARE_VALUE_RE, "1"),
    (cpu_power._WORD_RE, "performance"),
    (pci_config._BDF_RE, "0000:1b:00.0"),
    (pci_config._SYSFS_BDF_RE, "0000:1b:00.0"),
])
def test_validators_refuse_a_trailing_newline(pattern, good):
    assert pattern.match(good)
    for bad in (good + "\n", good + "\r\n", "\n" + good):
        assert not pattern.match(bad), repr(bad)


def test_sysctl_keys_refuse_a_trailing_newline():
    assert sysctl.validate_key("vm.swappiness") is None
    assert sysctl.validate_key("vm.swappiness\n") is not None
