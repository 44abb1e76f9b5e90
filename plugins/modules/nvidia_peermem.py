#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_peermem
short_description: Load and persist nvidia_peermem (GPUDirect RDMA peer memory) where it can work
version_added: 0.1.0
description:
  - Loads the C(nvidia_peermem) kernel module with C(modprobe), persists it in
    C(/etc/modules-load.d/gpufleet-nvidia-peermem.conf) and its parameters in
    C(/etc/modprobe.d/gpufleet-nvidia-peermem.conf), or unloads it and removes those files.
  - Before acting it gathers, from C(/proc) and C(/sys) only, whether the NVIDIA driver is loaded
    and its version, whether C(nvidia_peermem) and C(ib_core) are loaded, where
    C(nvidia-peermem.ko) is (the module tree of the running kernel, compressed or not, and
    C(/usr/local/nvidia/modules)) and whether modprobe can load it by name, the RDMA devices
    under C(/sys/class/infiniband), and whether the peer-memory symbol
    C(ib_register_peer_memory_client) is exported (C(/proc/kallsyms), else depmod's
    C(modules.symbols)).
  - Only the ib_core of NVIDIA MLNX_OFED or DOCA-OFED exports that symbol; with the
    distribution's ib_core, modprobe fails with an opaque C(Invalid argument) or
    C(Unknown symbol). The module refuses before calling modprobe with a message that names
    what is missing (MLNX_OFED/DOCA, or DMA-BUF as the alternative that needs no
    nvidia_peermem). With O(require=false) such a node is reported as RV(needed=false) with the
    reason instead, and nothing is changed.
  - Parameters that differ from those of the already loaded module take effect only after a
    reload; the module does not reload it (that would break running RDMA jobs) and reports
    RV(restart_required) and RV(pending) instead.
  - After loading, the module reads C(/sys/module/nvidia_peermem) back; a failure restores the
    files this call wrote.
  - When the peer-memory symbol is exported (C(/proc/kallsyms), read again after a failure) and
    modprobe still fails with C(Invalid argument) or C(Unknown symbol), the message says that
    C(nvidia-peermem.ko) was built against another ib_core (the NVIDIA driver was installed
    before MLNX_OFED/DOCA-OFED) and must be rebuilt, not that ib_core lacks the symbol.
  - The legacy C(nv_peer_mem) module (MLNX_OFED's nvidia-peer-memory package) must not be
    loaded together with C(nvidia_peermem). While it is loaded, modprobe is not run and the task
    fails with the fix (with O(require=false), RV(needed=false) and the reason). A boot-time load of
    it (a modules-load.d entry, or the package's C(/etc/init.d/nv_peer_mem) with C(ONBOOT=yes))
    is a warning.
  - Rules about C(nvidia_peermem) in modprobe.d and on the kernel command line are reported in
    RV(load_blockers). An C(install) command that loads nothing (C(/bin/true), C(/bin/false)),
    an C(alias) to another module or C(module_blacklist=) keep modprobe from loading it (a
    blocker, like a missing symbol); a C(blacklist) makes systemd-modules-load skip the
    modules-load.d entry at boot (a warning, since the C(modprobe nvidia_peermem) run here still
    loads it).
  - The module writes and removes only its own two files (their first line names
    gpufleet.tuning); a file without that marker at one of those paths is refused with its path.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Gathers every fact and reports the plan (RV(plan)); runs no modprobe and writes nothing.
  diff_mode:
    support: full
    description: Shows the loaded state and parameters, and the persistence files, before and after.
  platform:
    support: full
    platforms: posix
    description: Linux with loadable-module support and kmod's modprobe, on the host (not in a container).
options:
  state:
    description:
      - V(present) loads the module (when it can work here) and persists it.
      - V(absent) unloads it with C(modprobe -r), refusing while it is in use, and removes the
        files this module writes. Entries in other files are reported, not edited.
    type: str
    choices: [present, absent]
    default: present
  persist:
    description:
      - Write the modules-load.d entry (and the modprobe.d options line when O(params) is set)
        so the module loads at boot.
      - V(false) removes those files when an earlier run wrote them and only loads the module now.
    type: bool
    default: true
  params:
    description:
      - Module parameters, passed to modprobe and persisted as an C(options nvidia_peermem) line.
      - C(peerdirect_support) is V(0) (default of the driver) or V(1) (legacy PeerDirect, for
        MLNX_OFED 4.9 LTS). C(persistent_api_support) is V(1) (default of the driver) or V(0)
        (the legacy non-persistent API).
      - Other keys are refused before anything is read, and so is a parameter given twice with
        C(-) and C(_) (C(peerdirect-support) and C(peerdirect_support)), which the kernel reads
        as one name. Values are read as the kernel reads an int (C(0x1), C(true) are 1); floats
        are refused.
      - Options for it on the kernel command line (C(nvidia_peermem.peerdirect_support=...)) win
        over the persisted modprobe.d line at boot; a different value there is reported in
        RV(cmdline_overrides) with a warning.
    type: dict
    default: {}
  require:
    description:
      - V(true) fails when the module cannot work on this node (no NVIDIA driver, no
        C(nvidia-peermem.ko) modprobe can load, no peer-memory symbol, no modprobe, a container,
        the legacy C(nv_peer_mem) loaded, a modprobe.d rule that keeps it from loading).
      - V(false) reports such a node as RV(needed=false) with RV(reason), changes nothing and
        does not fail.
    type: bool
    default: true
  only_with_rdma:
    description:
      - Treat the module as needed only where an RDMA device exists under
        C(/sys/class/infiniband). Without one the result is RV(needed=false) with the reason,
        and nothing is loaded, written or removed, whatever O(require) says.
      - The host role's V(auto) mode sets this.
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.tuning.state_record
notes:
  - "RV(changes) holds a file record per modules-load.d or modprobe.d file written or removed, a
    module record (target C(nvidia_peermem)) when it is loaded or unloaded, and with a load a
    value record per parameter given in O(params) (target C(nvidia_peermem.<param>), before
    null). A parameter of a module that stays loaded is not changed (RV(pending))."
  - The module never reloads C(nvidia_peermem) on its own; unload with O(state=absent) and load
    again when RV(restart_required) says so.
  - C(nvidia_peermem) has no reference from RDMA users on most drivers, so an unload can succeed
    while jobs run; O(state=absent) refuses only what the kernel reports as in use.
seealso:
  - name: NVIDIA GPUDirect RDMA documentation
    description: How nvidia_peermem and DMA-BUF register GPU memory with RDMA devices.
    link: https://docs.nvidia.com/cuda/gpudirect-rdma/
"""

EXAMPLES = r"""
- name: Load and persist nvidia_peermem; fail with the reason where it cannot work
  gpufleet.tuning.nvidia_peermem:

- name: Only on nodes with RDMA devices; elsewhere report needed=false
  gpufleet.tuning.nvidia_peermem:
    only_with_rdma: true

- name: Audit a fleet without failing the nodes that lack MLNX_OFED
  gpufleet.tuning.nvidia_peermem:
    require: false
  check_mode: true
  register: peermem

- name: Legacy PeerDirect for MLNX_OFED 4.9 LTS
  gpufleet.tuning.nvidia_peermem:
    params:
      peerdirect_support: 1

- name: Unload it and remove the persistence
  gpufleet.tuning.nvidia_peermem:
    state: absent
"""

# RETURN doc fragments are not supported by ansible-doc, so ``changes`` (and ``state_record`` of
# the tuning modules) is documented with the same text in every module of this collection; keep
# the copies equal (tests/unit/contract.py).
RETURN = r"""
changes:
  description:
    - What this run changed (in check mode, what it would change) as records for programs to
      read (the closing summary, reports, a fleet revert); C(diff) shows the same for people.
    - One record per value, file, kernel module or service; empty when nothing changed, so
      C(changed) is true exactly when this list is not empty. A module that only reads always
      returns an empty list.
    - A failed run returns no records; what it had applied was restored.
  returned: always
  type: list
  elements: dict
  contains:
    area:
      description: The part of the tuning (C(sysctl), C(pcie), C(cpu_power), C(lxc_memlock),
        C(peermem), C(nvidia_options), C(kernel_cmdline)).
      type: str
    kind:
      description: V(value), V(file), V(module) or V(service).
      type: str
    target:
      description: The key, file path, PCI address, kernel module or unit.
      type: str
    before:
      description:
        - What this run found; null when absent or unknown.
        - A value is its text. A file is C(sha256), C(size) and C(mode), never its content
          (config files can hold secrets). A kernel module is V(loaded) or V(not loaded), a
          service a state word such as V(enabled).
      type: raw
    after:
      description: What this run left (in check mode, would leave), in the form of C(before).
      type: raw
  sample:
    - {"area": "peermem", "kind": "file", "target": "/etc/modules-load.d/gpufleet-nvidia-peermem.conf",
       "before": null, "after": {"sha256": "a3b9...", "size": 150, "mode": "0644"}}
    - {"area": "peermem", "kind": "file", "target": "/etc/modprobe.d/gpufleet-nvidia-peermem.conf",
       "before": null, "after": {"sha256": "0c1f...", "size": 184, "mode": "0644"}}
    - {"area": "peermem", "kind": "module", "target": "nvidia_peermem", "before": "not loaded", "after": "loaded"}
    - {"area": "peermem", "kind": "value", "target": "nvidia_peermem.peerdirect_support", "before": null, "after": "1"}
loaded:
  description: Whether nvidia_peermem is loaded after this run (in check mode, after a real run).
  returned: always
  type: bool
needed:
  description: Whether the module is wanted and can work here; false with O(require=false) on a
    node where it cannot, with O(only_with_rdma) on a node without RDMA devices, and for
    O(state=absent).
  returned: always
  type: bool
reason:
  description: Why RV(needed) is what it is; on a node where the module cannot work, every
    missing prerequisite.
  returned: always
  type: str
  sample: "nvidia_peermem cannot be loaded on this node: the peer-memory symbol ib_register_peer_memory_client is not available: ..."
driver_version:
  description: Version of the loaded NVIDIA driver, from /sys/module/nvidia/version or
    /proc/driver/nvidia/version; null when it is not loaded.
  returned: always
  type: str
  sample: "580.159.04"
driver_loaded:
  description: Whether the NVIDIA kernel driver is loaded.
  returned: always
  type: bool
peer_symbol:
  description: Where the peer-memory symbol was found.
  returned: always
  type: dict
  contains:
    name:
      description: The symbol, C(ib_register_peer_memory_client).
      type: str
    loaded:
      description: Whether a loaded module exports it (/proc/kallsyms).
      type: bool
    module:
      description: The loaded module that exports it.
      type: str
    installed_in:
      description: Installed modules of the running kernel that export it (modules.symbols);
        null when that index does not exist.
      type: list
      elements: str
  sample: {"name": "ib_register_peer_memory_client", "loaded": false, "module": null, "installed_in": null}
ko_path:
  description: Where nvidia-peermem.ko was found; null when nowhere.
  returned: always
  type: str
  sample: /usr/local/nvidia/modules/nvidia-peermem.ko
ko_version:
  description: The version in the .ko file's modinfo; null when unreadable (.ko.zst) or not found.
  returned: always
  type: str
ko_modprobe_visible:
  description: Whether modprobe can load the .ko by name (it is in modules.dep of the running kernel).
  returned: always
  type: bool
ib_core_loaded:
  description: Whether ib_core (the RDMA core) is loaded or built in.
  returned: always
  type: bool
rdma_devices:
  description: RDMA devices under /sys/class/infiniband.
  returned: always
  type: list
  elements: str
  sample: ["mlx5_0", "mlx5_1"]
kernel_release:
  description: The running kernel's release.
  returned: always
  type: str
persisted:
  description: Whether some modules-load.d file lists nvidia_peermem after this run.
  returned: always
  type: bool
persist_files:
  description: The modules-load.d files that list it after this run.
  returned: always
  type: list
  elements: str
loaded_params:
  description: The parameters of the loaded module, from /sys/module/nvidia_peermem/parameters.
  returned: always
  type: dict
  sample: {"peerdirect_support": "0", "persistent_api_support": "1"}
nv_peer_mem:
  description: The legacy C(nv_peer_mem) module of MLNX_OFED's nvidia-peer-memory package, which
    conflicts with nvidia_peermem.
  returned: always
  type: dict
  contains:
    loaded:
      description: Whether it is loaded (then nvidia_peermem is not loaded by this module).
      type: bool
    persisted_by:
      description: What loads it at boot (modules-load.d entries, the package's service with
        C(ONBOOT=yes), an enabled C(nv_peer_mem.service)).
      type: list
      elements: str
  sample: {"loaded": false, "persisted_by": []}
load_blockers:
  description: Rules in modprobe.d (every directory kmod reads) and on the running kernel command
    line about nvidia_peermem, each with C(path), C(line) (null for the command line), C(rule),
    C(effect) (V(never_loads), V(redirected), V(runs_command), V(loads_via_command) or
    V(blacklist)) and C(meaning); see gpufleet.tuning.nvidia_driver_options for the effects.
  returned: always
  type: list
  elements: dict
  sample: [{"path": "/etc/modprobe.d/rdma.conf", "line": 2, "rule": "blacklist nvidia_peermem",
            "effect": "blacklist", "meaning": "nvidia_peermem is not loaded through its aliases ..."}]
cmdline_overrides:
  description: Parameters of O(params) that the running kernel command line sets to another value
    (they win over the persisted modprobe.d line at boot), each with C(param), C(value),
    C(configured) and C(arg); only with O(persist=true).
  returned: always
  type: list
  elements: dict
  sample: [{"param": "peerdirect_support", "value": "0", "configured": "1",
            "arg": "nvidia_peermem.peerdirect_support=0"}]
restart_required:
  description: True when O(params) differ from those the loaded module runs with; a reload of
    nvidia_peermem applies them.
  returned: always
  type: bool
pending:
  description: Human-readable changes that wait for a reload.
  returned: always
  type: list
  elements: str
plan:
  description: What this run did, or in check mode what a real run would do, step by step.
  returned: always
  type: list
  elements: str
  sample: ["write /etc/modules-load.d/gpufleet-nvidia-peermem.conf", "modprobe nvidia_peermem"]
container:
  description: Whether the module runs inside a container, and the evidence
    (see gpufleet.tuning.sysctl_profile).
  returned: always
  type: dict
state_record:
  description: What was recorded in O(state_path) around this change (in check mode, what would
    be) - C(path), C(run_id), the item keys C(recorded), C(updated) and C(dropped), and whether
    the file was C(written).
  returned: when O(state_path) is given and a change was planned
  type: dict
  sample: {"path": "/var/lib/gpufleet-tuning/state.json", "run_id": "20261206T101500Z-1a2b3c",
           "recorded": ["sysctl:vm.swappiness"], "updated": [], "dropped": [], "written": true}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.tuning.plugins.module_utils import nvidia_peermem
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import commands
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import outcome
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import recorder

# The engine's options and the record's (doc fragment gpufleet.tuning.state_record).
ARGUMENT_SPEC = recorder.spec(nvidia_peermem.ARGUMENT_SPEC)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    tools = commands.Commands(module)

    def engine(params, check_mode):
        return nvidia_peermem.run(params, check_mode, nvidia_peermem.Paths(), tools)

    outcome.finish(module, lambda: recorder.run_module(module.params, module.check_mode, engine))


if __name__ == "__main__":
    main()
