# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia_peermem: decide whether it can work here, then load and persist it (or remove it).

The module gpufleet.tuning.nvidia_peermem is a thin shell over ``ARGUMENT_SPEC`` and ``run()``.

Why a precheck: nvidia_peermem registers GPU memory with the RDMA stack through
``ib_register_peer_memory_client``, which only the ib_core of NVIDIA MLNX_OFED / DOCA-OFED
exports. With the distribution's own ib_core, ``modprobe nvidia_peermem`` fails with an opaque
"Invalid argument" or "Unknown symbol". Every fact needed to predict that is in /proc and /sys
(and depmod's index), so the module gathers them first and refuses with a message that says
what is missing, before modprobe runs. On a node where the module cannot work and the operator
said ``require: false`` (or where no RDMA device exists and ``only_with_rdma`` is set), the
outcome is ``needed: false`` with the reason: a valid result, not an error.

The symbol check, precisely: if a loaded module exports the symbol (/proc/kallsyms), fine; if
ib_core is loaded *without* it, the in-box stack is running even if MLNX_OFED is installed
(reloading the RDMA stack, or a reboot, is needed); if ib_core is not loaded, depmod's
modules.symbols says whether the ib_core modprobe would load exports it.

When the symbol is there and modprobe still fails with "Invalid argument" or "Unknown
symbol", ib_core is not the problem: nvidia-peermem.ko was built against another ib_core's
symbol versions (the NVIDIA driver was built or installed before MLNX_OFED/DOCA-OFED, so it
was compiled against the in-box ib_core). The message then says to rebuild the driver's
modules after OFED, not to install OFED. /proc/kallsyms is read again after the failure, as
modprobe may have loaded ib_core as a dependency.

The legacy ``nv_peer_mem`` (MLNX_OFED's nvidia-peer-memory package) does the same job and
must not be loaded together with nvidia_peermem (NVIDIA's GPUDirect RDMA documentation):
while it is loaded, modprobe is not run and the node is reported (a failure with
``require``), with the fix; a boot-time load of it (modules-load.d, or the package's
/etc/init.d/nv_peer_mem with ONBOOT=yes) is a warning.

What modprobe.d says about the module itself is a fact, not a guess (kernel_modules.
load_blockers): an ``install nvidia_peermem /bin/true`` or an ``alias`` to another module
means modprobe never loads it (a blocker); a ``blacklist`` means systemd-modules-load skips
the modules-load.d entry at boot (a warning), while the ``modprobe nvidia_peermem`` run here
still loads it. Options on the kernel command line (``nvidia_peermem.peerdirect_support=``)
win over the persisted modprobe.d line at boot (kmod appends them last) and are reported.

Files: the module writes and removes only its own two files (they carry the gpufleet.tuning
marker); a file without the marker at one of those paths is refused with a clean message.

What changed is returned as ``changes`` (records.py, area ``peermem``): a module record when
this run loads or unloads nvidia_peermem; with a load, a value record per parameter given in
``params`` (target ``nvidia_peermem.<param>``, before None as the module was not loaded, after
the value it loaded with); and a file record (managed_files, a digest, never the text) per
modules-load.d or modprobe.d file written or removed. A parameter of a module that stays
loaded does not change without a reload (``pending``, ``restart_required``), so it has no
value record; the persisted value is in the modprobe.d file's record.

Order of work: persistence files first (a Transaction restores them), then modprobe, then a
read-back of /sys/module; any failure undoes what this call did.
"""

from __future__ import annotations

import os

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import container as container_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import spec as argspec
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import diffs
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import kernel_modules as km
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import managed_files
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import nvidia_driver
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.transaction import Transaction
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure

MODULE = "nvidia_peermem"
AREA = "peermem"
DRIVER = "nvidia"
PEER_SYMBOL = "ib_register_peer_memory_client"
# Parameters nvidia_peermem takes, with the values it accepts (both read back from sysfs).
PARAMS = {
    "peerdirect_support": (0, 1),       # 1 = legacy PeerDirect, for MLNX_OFED 4.9 LTS
    "persistent_api_support": (0, 1),   # 0 = legacy non-persistent nvidia_p2p API
}
FILE_NAME = "gpufleet-nvidia-peermem.conf"
# Where NVIDIA driver installs outside the module tree keep their modules (the H200 machines).
EXTRA_MODULE_DIRS = ("usr/local/nvidia/modules",)
HEADER = ("# Managed by Ansible (gpufleet.tuning.nvidia_peermem): GPUDirect RDMA peer memory.\n"
          "# Local edits are overwritten on the next run; remove with state=absent.\n")
# MLNX_OFED's legacy peer-memory module (the nvidia-peer-memory package), and how it persists.
LEGACY = "nv_peer_mem"
LEGACY_INIT = "etc/init.d/nv_peer_mem"
LEGACY_CONFIG = "etc/infiniband/nv_peer_mem.conf"
LEGACY_FIX = ("unload it (modprobe -r nv_peer_mem, or service nv_peer_mem stop) and remove the nvidia-peer-memory "
              "package (or set ONBOOT=no in /etc/infiniband/nv_peer_mem.conf) so it does not load again at boot")
DMABUF_HINT = ("use DMA-BUF for GPUDirect RDMA instead (NVIDIA's recommended path, which needs no "
               "nvidia_peermem: Linux 5.12 or later with NVIDIA's open GPU kernel modules; "
               "NCCL_DMABUF_ENABLE=1 for NCCL)")

# The module's argument spec: the module passes it to AnsibleModule, validate() reads the
# allowed values from it, and the tests compare it with the module's DOCUMENTATION.
ARGUMENT_SPEC = dict(
    state=dict(type="str", default="present", choices=["present", "absent"]),
    persist=dict(type="bool", default=True),
    params=dict(type="dict", default={}),
    require=dict(type="bool", default=True),
    only_with_rdma=dict(type="bool", default=False),
)


def with_defaults(params):
    """``params`` with every option it leaves out at its ARGUMENT_SPEC default."""
    return argspec.with_defaults(ARGUMENT_SPEC, params)


class Paths:
    """Where the module looks; everything hangs off ``root`` so tests use a temp tree."""

    def __init__(self, root="/"):
        self.root = root
        self.proc = os.path.join(root, "proc")
        self.sys = os.path.join(root, "sys")
        self.lib_modules = os.path.join(root, "lib", "modules")
        self.modules_load_d = os.path.join(root, "etc", "modules-load.d")
        self.modprobe_d = os.path.join(root, "etc", "modprobe.d")
        self.extra_module_dirs = tuple(os.path.join(root, d) for d in EXTRA_MODULE_DIRS)


def validate(params):
    """Check every input before anything is read; return the wanted params as ints.

    A parameter spelt twice (``peerdirect_support`` and ``peerdirect-support``: the kernel
    reads ``-`` and ``_`` in a parameter name as the same character) is refused rather than
    resolved. Values are read the way the kernel reads an int parameter (0x1 and True are 1;
    floats and ``nan`` are not numbers), then must be one PARAMS accepts.
    """
    choices = ARGUMENT_SPEC["state"]["choices"]
    if params.get("state") not in choices:
        raise ModuleFailure("state %r is not valid: use one of %s; nothing was changed"
                            % (params.get("state"), ", ".join(choices)))
    wanted = {}
    given = params.get("params") or {}
    if not isinstance(given, dict):
        raise ModuleFailure("params must be a dict such as {peerdirect_support: 0}, got %s"
                            % type(given).__name__)
    errors = []
    spelt = {}
    for key in sorted(given, key=str):
        name = km.canonical(str(key))
        if name not in PARAMS:
            errors.append("unknown parameter %r (nvidia_peermem takes: %s)" % (key, ", ".join(sorted(PARAMS))))
            continue
        if name in spelt:
            errors.append("params sets %s twice, as %r and %r (the kernel reads '-' and '_' in a parameter name as "
                          "the same character): give it once" % (name, spelt[name], key))
            wanted.pop(name, None)
            continue
        spelt[name] = key
        value = given[key]
        try:
            number = km.kernel_integer(value, "int")
        except km.OptionError:
            number = None
        if number not in PARAMS[name]:
            errors.append("%s=%r is not valid: accepted %s" % (name, value, " or ".join(str(v) for v in PARAMS[name])))
            continue
        wanted[name] = number
    if errors:
        raise ModuleFailure("invalid params, nothing was changed: " + "; ".join(errors))
    return wanted


def legacy_persistence(root):
    """What loads nv_peer_mem at boot: modules-load.d entries, and the nvidia-peer-memory
    package's service (its /etc/init.d/nv_peer_mem loads the module only with ONBOOT=yes in
    /etc/infiniband/nv_peer_mem.conf; an enabled nv_peer_mem.service unit)."""
    found = ["%s lists nv_peer_mem" % path for path in km.modules_load_files(LEGACY, root)]
    init = os.path.join(root, LEGACY_INIT)
    config = os.path.join(root, LEGACY_CONFIG)
    if os.path.isfile(init):
        onboot = False
        for line in (fileops.read_quiet(config) or "").splitlines():
            key, _sep, value = line.strip().partition("=")
            if key.strip() == "ONBOOT":
                onboot = value.strip().strip("\"'") == "yes"
        if onboot:
            found.append("%s (the nvidia-peer-memory package's service) loads it at boot: ONBOOT=yes in %s"
                         % (init, config))
    systemd = os.path.join(root, "etc", "systemd", "system")
    try:
        entries = sorted(os.listdir(systemd))
    except OSError:
        entries = []
    for entry in entries:
        link = os.path.join(systemd, entry, LEGACY + ".service")
        if entry.endswith(".wants") and os.path.lexists(link):
            found.append("%s enables nv_peer_mem.service" % link)
    return found


def gather(paths):
    """Every fact the decision needs, from /proc, /sys and the module tree; changes nothing."""
    release = km.kernel_release(paths.proc)
    driver = nvidia_driver.state(paths.proc, paths.sys)
    peermem = km.module_state(MODULE, paths.proc, paths.sys)
    ib_core = km.module_state("ib_core", paths.proc, paths.sys)
    ko = km.find_module_file(MODULE, paths.lib_modules, release, paths.extra_module_dirs)
    info = km.modinfo(ko["path"]) if ko["path"] else {}
    kallsyms = km.kallsyms_lookup(PEER_SYMBOL, paths.proc, provider="ib_core", sys_root=paths.sys)
    providers = km.symbol_providers(PEER_SYMBOL, paths.lib_modules, release)
    driver_ko = None
    if not driver["loaded"]:
        driver_ko = km.find_module_file(DRIVER, paths.lib_modules, release, paths.extra_module_dirs)
    return {
        "release": release,
        "modules_supported": km.proc_modules(paths.proc) is not None,
        "driver": driver,
        "driver_ko": driver_ko,
        "peermem": peermem,
        "ib_core": ib_core,
        "ko": ko,
        "ko_info": info,
        "peer_symbol": {
            "name": PEER_SYMBOL,
            "loaded": kallsyms["found"],
            "module": kallsyms["module"],
            "kallsyms_readable": kallsyms["readable"],
            "installed_in": providers,
        },
        "rdma_devices": km.rdma_devices(paths.sys),
        "container": container_mod.detect(proc_root=paths.proc, root=paths.root),
        "legacy": km.module_state(LEGACY, paths.proc, paths.sys),
        "legacy_persistence": legacy_persistence(paths.root),
        "load_blockers": km.load_blockers(MODULE, paths.root, paths.proc),
    }


def blockers(facts, paths, modprobe):
    """Why ``modprobe nvidia_peermem`` cannot succeed here; empty when it should."""
    found = []
    release = facts["release"] or "(unknown)"
    tree = km.release_dir(paths.lib_modules, facts["release"])
    if facts["container"]["detected"]:
        found.append("this runs inside a container (%s): kernel modules belong to the host, run it there"
                     % (facts["container"]["kind"] or "unknown kind"))
    if not facts["modules_supported"]:
        found.append("this kernel (%s) has no loadable-module support (/proc/modules does not exist)" % release)
    driver = facts["driver"]
    if not driver["loaded"]:
        driver_ko = facts["driver_ko"] or {}
        if driver_ko.get("path"):
            found.append("the NVIDIA driver is installed (%s) but not loaded: load nvidia first; "
                         "nvidia_peermem needs a running driver" % driver_ko["path"])
        else:
            found.append("the NVIDIA driver is not installed: nvidia is not loaded and no nvidia.ko "
                         "exists for kernel %s (searched %s)"
                         % (release, ", ".join(driver_ko.get("searched") or [tree])))
    ko = facts["ko"]
    if not ko["path"]:
        found.append("nvidia_peermem.ko is not installed for kernel %s (searched %s); it ships with the "
                     "NVIDIA driver since R470" % (release, ", ".join(ko["searched"])))
    elif not ko["modprobe_visible"]:
        if ko["modules_dep"]:
            why = "%s/modules.dep does not list it (run depmod, or install it under %s/)" % (tree, tree)
        else:
            why = "%s/modules.dep does not exist (install it under %s/ and run depmod)" % (tree, tree)
        found.append("%s exists but modprobe cannot load it by name: %s" % (ko["path"], why))
    vermagic = (facts["ko_info"].get("vermagic") or "").split()
    if vermagic and facts["release"] and vermagic[0] != facts["release"]:
        found.append("%s was built for kernel %s, not the running %s: the kernel refuses it"
                     % (ko["path"], vermagic[0], facts["release"]))
    symbol = facts["peer_symbol"]
    if not symbol["loaded"]:
        indexed = symbol["installed_in"] is not None
        installed = symbol["installed_in"] or []
        if facts["ib_core"]["loaded"]:
            text = ("the loaded ib_core does not export %s, the peer-memory symbol only the ib_core of "
                    "NVIDIA MLNX_OFED or DOCA-OFED provides: the in-box RDMA stack is running" % PEER_SYMBOL)
            if installed:
                text += (" although %s of kernel %s exports it (modules.symbols): restart the RDMA stack "
                         "(openibd) or reboot to load the MLNX_OFED/DOCA modules" % (", ".join(installed), release))
            else:
                text += "; install MLNX_OFED or DOCA-OFED, or " + DMABUF_HINT
            found.append(text)
        elif not installed:
            where = "no loaded module exports it in /proc/kallsyms"
            if not symbol["kallsyms_readable"]:
                where = "/proc/kallsyms cannot be read"
            index = ("no module of kernel %s does in modules.symbols" % release if indexed
                     else "%s/modules.symbols does not exist" % tree)
            found.append("the peer-memory symbol %s is not available (%s, and %s): only the ib_core of "
                         "NVIDIA MLNX_OFED or DOCA-OFED provides it; install one of them, or %s"
                         % (PEER_SYMBOL, where, index, DMABUF_HINT))
    legacy = facts["legacy"]
    if legacy["loaded"] or legacy["builtin"]:
        found.append("nv_peer_mem is loaded: the legacy peer-memory module of MLNX_OFED's nvidia-peer-memory "
                     "package, which nvidia_peermem replaces; NVIDIA's GPUDirect RDMA documentation says the two must "
                     "not be loaded together (both register GPU memory with ib_core as a peer-memory client), so "
                     "modprobe is not run: " + LEGACY_FIX + ", then run again")
    for entry in facts["load_blockers"]:
        if km.blocks_loading(entry):
            found.append("modprobe would not load nvidia_peermem: " + km.describe_blocker(entry))
    if modprobe is None:
        found.append("modprobe is not installed (not found on PATH or in /sbin, /usr/sbin): install kmod")
    return found


def _peer_symbol_summary(facts):
    symbol = dict(facts["peer_symbol"])
    symbol.pop("kallsyms_readable", None)
    return symbol


def _base_result(facts):
    driver = facts["driver"]
    return {
        "changed": False,
        "changes": [],
        "loaded": facts["peermem"]["loaded"],
        "needed": False,
        "reason": "",
        "driver_version": driver["version"],
        "driver_loaded": driver["loaded"],
        "peer_symbol": _peer_symbol_summary(facts),
        "ko_path": facts["ko"]["path"],
        "ko_version": facts["ko_info"].get("version"),
        "ko_modprobe_visible": facts["ko"]["modprobe_visible"],
        "ib_core_loaded": facts["ib_core"]["loaded"] or facts["ib_core"]["builtin"],
        "rdma_devices": facts["rdma_devices"],
        "kernel_release": facts["release"],
        "persisted": False,
        "persist_files": [],
        "loaded_params": dict(facts["peermem"]["params"]),
        "nv_peer_mem": {"loaded": facts["legacy"]["loaded"] or facts["legacy"]["builtin"],
                        "persisted_by": list(facts["legacy_persistence"])},
        "load_blockers": list(facts["load_blockers"]),
        "cmdline_overrides": [],
        "restart_required": False,
        "pending": [],
        "plan": [],
        "container": facts["container"],
        "diff": [],
        "warnings": [],
    }


def _wanted_files(paths, persist, wanted_params):
    load_path = os.path.join(paths.modules_load_d, FILE_NAME)
    options_path = os.path.join(paths.modprobe_d, FILE_NAME)
    load = None
    options = None
    if persist:
        load = HEADER + MODULE + "\n"
        if wanted_params:
            options = HEADER + km.render_options_line(MODULE, wanted_params) + "\n"
    return [managed_files.Wanted(load_path, load), managed_files.Wanted(options_path, options)]


def _runtime_values(loaded, params):
    values = {MODULE: "loaded" if loaded else "not loaded"}
    for key, value in params.items():
        values["%s.%s" % (MODULE, key)] = str(value)
    return values


def _same(ours, theirs):
    return nvidia_driver.same_value(ours, "" if theirs is None else theirs)


def run(params, check_mode=False, paths=None, tools=None):
    """Apply ``state`` for nvidia_peermem; return the result dict or raise ModuleFailure.

    ``tools`` (common.commands.Commands) finds and runs modprobe."""
    paths = paths or Paths()
    params = with_defaults(params)
    wanted = validate(params)
    facts = gather(paths)
    result = _base_result(facts)
    modprobe = tools.which("modprobe") if tools is not None else None
    if params["state"] == "absent":
        return _run_absent(params, facts, paths, result, modprobe, tools, check_mode)
    return _run_present(params, wanted, facts, paths, result, modprobe, tools, check_mode)


def _persisted(paths, result):
    files = km.modules_load_files(MODULE, paths.root)
    result["persist_files"] = files
    result["persisted"] = bool(files)


def _not_owned(exc, partial):
    action = "remove" if "remove" in (exc.strerror or "") else "overwrite"
    return ModuleFailure("refusing to %s %s: it exists and was not written by gpufleet.tuning (no marker comment in "
                         "its first lines); nothing was changed: move it away or rename it (this module writes and "
                         "removes only the files it created)" % (action, exc.filename), partial)


def _plan(paths, persist, wanted, result):
    """managed_files.plan of our two files; a foreign file or an unreadable path is a clean failure."""
    try:
        return managed_files.plan(_wanted_files(paths, persist, wanted))
    except managed_files.NotOwned as exc:
        raise _not_owned(exc, dict(result))
    except (OSError, IOError) as exc:
        raise ModuleFailure("cannot read %s; nothing was changed" % fileops.describe(exc), dict(result))


def _warn_present(params, facts, paths, result, wanted):
    """Warnings of a present run: the legacy module's persistence, rules that run a command or
    keep the boot-time load from happening, command-line options that win at boot."""
    for item in facts["legacy_persistence"]:
        result["warnings"].append("nv_peer_mem, the legacy module that conflicts with nvidia_peermem, is set to load "
                                  "at boot (%s): %s" % (item, LEGACY_FIX))
    if facts["peermem"]["loaded"] and result["nv_peer_mem"]["loaded"]:
        result["warnings"].append("nv_peer_mem and nvidia_peermem are both loaded, which NVIDIA's documentation "
                                  "rules out: " + LEGACY_FIX)
    for entry in facts["load_blockers"]:
        if entry["effect"] == "runs_command":
            result["warnings"].append(km.describe_blocker(entry))
        elif params["persist"] and (entry["effect"] == "blacklist" or km.blocks_loading(entry)):
            result["warnings"].append("the modules-load.d entry will not load nvidia_peermem at boot: "
                                      + km.describe_blocker(entry))
    if not params["persist"]:
        return
    for item in km.cmdline_options(MODULE, paths.proc):
        if item["param"] not in wanted:
            continue
        if item["value"] is not None and _same(wanted[item["param"]], item["value"]):
            continue
        result["cmdline_overrides"].append({"param": item["param"], "value": item["value"],
                                            "configured": str(wanted[item["param"]]), "arg": item["arg"]})
        result["warnings"].append("the kernel command line sets %s (/proc/cmdline) and kmod applies it after "
                                  "modprobe.d: at boot nvidia_peermem loads with that value, not %s=%s; remove it "
                                  "from the boot loader's command line or configure the same value"
                                  % (item["arg"], item["param"], wanted[item["param"]]))


def _run_present(params, wanted, facts, paths, result, modprobe, tools, check_mode):
    peermem = facts["peermem"]
    if params.get("only_with_rdma") and not facts["rdma_devices"]:
        result["reason"] = ("no RDMA device under /sys/class/infiniband and only_with_rdma=true: nvidia_peermem "
                            "has nothing to serve on this node; nothing was changed")
        _persisted(paths, result)
        return result
    present = peermem["loaded"] or peermem["builtin"]
    _warn_present(params, facts, paths, result, wanted)
    if not present:
        problems = blockers(facts, paths, modprobe)
        if problems:
            message = "nvidia_peermem cannot be loaded on this node: " + "; ".join(problems)
            if params["require"]:
                raise ModuleFailure(message + "; nothing was changed (require=false reports this instead "
                                    "of failing)", dict(result, reason=message))
            result["reason"] = message + " (require=false: reported, nothing was changed)"
            _persisted(paths, result)
            return result
    result["needed"] = True
    result["reason"] = _needed_reason(facts)
    if present:
        _compare_loaded_params(result, peermem["params"], wanted)
    if params["persist"] and wanted:
        _refuse_overriding_options(paths, result, wanted)

    changes = _plan(paths, params["persist"], wanted, result)
    argv = None if present else [modprobe, MODULE] + ["%s=%s" % (k, wanted[k]) for k in sorted(wanted)]
    result["plan"] = [c.describe() for c in changes] + ([" ".join(["modprobe"] + argv[1:])] if argv else [])
    before_values = _runtime_values(present, dict((k, peermem["params"][k]) for k in wanted if k in peermem["params"]))
    after_values = _runtime_values(True, wanted) if argv else before_values
    result["diff"] = [diffs.values_diff(before_values, after_values, "nvidia_peermem")] + \
        managed_files.diff_entries(changes)
    result["changed"] = bool(changes) or bool(argv)
    result["changes"] = change_records(changes, argv is not None, True, wanted)
    result["loaded"] = True
    if check_mode:
        _predict_persisted(paths, result, params["persist"])
        return result

    tx = Transaction()
    try:
        managed_files.apply(changes, tx)
    except (OSError, IOError) as exc:
        err = tx.abort("failed to write the persistence files: %s" % fileops.describe(exc))
        raise ModuleFailure(err.full_message(), dict(result, changed=False, changes=[], loaded=present))
    if argv:
        result["loaded_params"] = _load(tx, argv, wanted, facts, paths, tools,
                                        dict(result, loaded=False, changes=[]))
        result["changes"] = change_records(changes, True, True, wanted, result["loaded_params"])
    _persisted(paths, result)
    return result


def change_records(changes, load_changes, loaded_after, wanted=None, loaded_params=None):
    """The change records of a run (records.py), in the order of the work: the persistence
    files' (managed_files ``changes``); then the module's, when ``load_changes`` (this run loads
    or unloads it); on a load, a value record per parameter given in ``params``, with what
    /sys/module shows after the load (``loaded_params``; the wanted value in check mode)."""
    out = records.from_managed(AREA, changes)
    if load_changes:
        out.append(records.module_change(AREA, MODULE, not loaded_after, loaded_after))
        if loaded_after:
            shown = loaded_params or {}
            for key in sorted(wanted or {}):
                out.append(records.value(AREA, "%s.%s" % (MODULE, key), None, shown.get(key, wanted[key])))
    return out


def _needed_reason(facts):
    peermem = facts["peermem"]
    if peermem["builtin"]:
        return "nvidia_peermem is built into this kernel"
    if peermem["loaded"]:
        return "nvidia_peermem is loaded"
    symbol = facts["peer_symbol"]
    provider = symbol["module"] or ", ".join(symbol["installed_in"] or []) or "a module"
    return ("the NVIDIA driver %s is loaded, %s exports %s and modprobe can load %s"
            % (facts["driver"]["version"] or "(version unknown)", provider, PEER_SYMBOL, facts["ko"]["path"]))


def _compare_loaded_params(result, loaded_params, wanted):
    """Parameters of a loaded module change only with a reload: report, never reload."""
    for key in sorted(wanted):
        have = loaded_params.get(key)
        if have is None:
            result["warnings"].append("the loaded nvidia_peermem does not show parameter %s (an older "
                                      "driver?): its value cannot be checked" % key)
        elif not nvidia_driver.same_value(wanted[key], have):
            result["pending"].append("nvidia_peermem %s: loaded with %s, wanted %s; reload nvidia_peermem "
                                     "(modprobe -r nvidia_peermem && modprobe nvidia_peermem) to apply"
                                     % (key, have, wanted[key]))
    result["restart_required"] = bool(result["pending"])


def _refuse_overriding_options(paths, result, wanted):
    """Fail when another modprobe.d file read after ours sets our params differently."""
    own = os.path.join(paths.modprobe_d, FILE_NAME)
    values = dict((k, str(v)) for k, v in wanted.items())
    overriding, overridden = km.option_conflicts(MODULE, own, values, paths.root, _same)
    for item in overridden:
        result["warnings"].append("%s also sets %s=%s; %s is read after it and wins"
                                  % (item["path"], item["param"], item["value"], own))
    if overriding:
        found = "; ".join("%s sets %s=%s after %s" % (i["path"], i["param"], i["value"], own) for i in overriding)
        raise ModuleFailure("nothing was changed: %s; modprobe applies the file read last, so the persisted "
                            "options would not take effect: remove them there" % found, dict(result))


def _load(tx, argv, wanted, facts, paths, tools, partial):
    """Run modprobe, then read /sys/module back; on any failure undo ``tx`` and raise."""
    outcome = tools.run(argv)
    if not outcome.ok:
        err = tx.abort(_modprobe_failure(outcome, facts, paths))
        raise ModuleFailure(err.full_message(), dict(partial, changed=False))

    def unload():
        undone = tools.run([argv[0], "-r", MODULE])
        if not undone.ok:
            raise RuntimeError(undone.describe())

    tx.record("load nvidia_peermem", unload)
    after = km.module_state(MODULE, paths.proc, paths.sys)
    problem = None
    if not after["loaded"]:
        rules = [e for e in facts["load_blockers"] if e["effect"] != "blacklist"]
        problem = "modprobe nvidia_peermem exited 0 but /sys/module/nvidia_peermem does not exist: "
        if rules:
            problem += "; ".join(km.describe_blocker(e) for e in rules)
        else:
            problem += ("no install or alias rule for nvidia_peermem in the modprobe.d directories (%s) explains it "
                        "(a blacklist does not stop 'modprobe nvidia_peermem'); see dmesg"
                        % ", ".join("/" + d for d in km.MODPROBE_D_DIRS))
    for key in sorted(wanted) if after["loaded"] else []:
        have = after["params"].get(key)
        if have is not None and not nvidia_driver.same_value(wanted[key], have):
            problem = "nvidia_peermem loaded with %s=%s, not %s" % (key, have, wanted[key])
            break
    if problem:
        err = tx.abort(problem)
        raise ModuleFailure(err.full_message(), dict(partial, changed=False))
    return after["params"]


def _predict_persisted(paths, result, persist):
    """persisted/persist_files as a real run would leave them (check mode)."""
    own = os.path.join(paths.modules_load_d, FILE_NAME)
    listed = set(p for p in km.modules_load_files(MODULE, paths.root) if p != own)
    if persist:
        listed.add(own)
    order = km.config_files(paths.root, km.MODULES_LOAD_D_DIRS, extra_names=[(FILE_NAME, own)])
    result["persist_files"] = [p for p in order if p in listed]
    result["persisted"] = bool(result["persist_files"])


def _modprobe_failure(outcome, facts, paths):
    said = outcome.output
    text = outcome.describe()
    lowered = said.lower()
    if "invalid argument" in lowered or "unknown symbol" in lowered or "disagrees about version" in lowered:
        # modprobe may have loaded ib_core as a dependency before it failed: look again.
        now = km.kallsyms_lookup(PEER_SYMBOL, paths.proc, provider="ib_core", sys_root=paths.sys)
        symbol = facts["peer_symbol"]
        if symbol["loaded"] or now["found"]:
            provider = now["module"] or symbol["module"] or "the kernel"
            text += ("; %s exports %s (/proc/kallsyms), so the peer-memory symbol is there: %s was built against "
                     "another ib_core. The NVIDIA driver was built or installed before MLNX_OFED or DOCA-OFED, so its "
                     "nvidia-peermem.ko carries the in-box ib_core's symbol versions (dmesg: 'disagrees about version "
                     "of symbol'). Rebuild the driver's peermem module against the installed OFED: reinstall the "
                     "NVIDIA driver after MLNX_OFED/DOCA-OFED, or rebuild its DKMS modules (dkms autoinstall, or dkms "
                     "install --force nvidia/<version>), then load again"
                     % (provider, PEER_SYMBOL, facts["ko"]["path"] or "nvidia-peermem.ko"))
        elif symbol["installed_in"]:
            text += ("; %s exports %s according to modules.symbols, but no loaded module does (/proc/kallsyms): "
                     "see dmesg. 'disagrees about version of symbol' means nvidia-peermem.ko was built before "
                     "MLNX_OFED or DOCA-OFED was installed and must be rebuilt against it (reinstall the NVIDIA "
                     "driver, or dkms autoinstall); 'Unknown symbol' means the ib_core that loaded is the in-box one "
                     "(restart the RDMA stack, openibd, or reboot)" % (", ".join(symbol["installed_in"]), PEER_SYMBOL))
        else:
            text += ("; no loaded module exports %s (/proc/kallsyms): the ib_core that modprobe loads is the in-box "
                     "one, which lacks the peer-memory symbol; nvidia_peermem needs the ib_core of MLNX_OFED or "
                     "DOCA-OFED (or %s); see dmesg for the missing symbol" % (PEER_SYMBOL, DMABUF_HINT))
    elif "not found in directory" in lowered:
        ko = facts["ko"]["path"]
        text += ("; modprobe looks only at modules.dep of the running kernel%s"
                 % ((", and the module is at %s" % ko) if ko else ""))
    elif "operation not permitted" in lowered:
        text += "; loading modules needs root (CAP_SYS_MODULE) outside a container"
    return text


def _run_absent(params, facts, paths, result, modprobe, tools, check_mode):
    peermem = facts["peermem"]
    result["needed"] = False
    result["reason"] = "state=absent"
    if peermem["builtin"]:
        raise ModuleFailure("nvidia_peermem is built into this kernel and cannot be unloaded", dict(result))
    unload = peermem["loaded"]
    if unload:
        busy = km.in_use(peermem)
        if busy:
            raise ModuleFailure("nvidia_peermem is in use (%s): stop what uses it (RDMA jobs holding GPU memory "
                                "registrations) before unloading; nothing was changed" % busy, dict(result))
        if facts["container"]["detected"]:
            raise ModuleFailure("nvidia_peermem cannot be unloaded from inside a container (%s): kernel modules "
                                "belong to the host; nothing was changed" % facts["container"]["kind"], dict(result))
        if modprobe is None:
            raise ModuleFailure("modprobe is not installed (not found on PATH or in /sbin, /usr/sbin), so "
                                "nvidia_peermem cannot be unloaded: install kmod; nothing was changed", dict(result))
    changes = _plan(paths, False, {}, result)
    argv = [modprobe, "-r", MODULE] if unload else None
    plan = [c.describe() for c in changes]
    if argv:
        plan.append("modprobe -r %s" % MODULE)
    result["plan"] = plan
    before_values = _runtime_values(unload, {})
    diff = [diffs.values_diff(before_values, _runtime_values(False, {}), "nvidia_peermem")]
    diff.extend(managed_files.diff_entries(changes))
    result["diff"] = diff
    result["changed"] = bool(changes) or bool(argv)
    result["changes"] = change_records(changes, argv is not None, False)
    if check_mode:
        result["loaded"] = False
        _predict_persisted(paths, result, False)
        _warn_other_persistence(result)
        return result
    tx = Transaction()
    try:
        managed_files.apply(changes, tx)
    except (OSError, IOError) as exc:
        err = tx.abort("failed to remove the persistence files: %s" % fileops.describe(exc))
        raise ModuleFailure(err.full_message(), dict(result, changed=False, changes=[]))
    if argv:
        outcome = tools.run(argv)
        if not outcome.ok:
            err = tx.abort(outcome.describe())
            raise ModuleFailure(err.full_message(), dict(result, changed=False, changes=[]))
        if km.module_state(MODULE, paths.proc, paths.sys)["loaded"]:
            err = tx.abort("modprobe -r nvidia_peermem exited 0 but the module is still loaded")
            raise ModuleFailure(err.full_message(), dict(result, changed=False, changes=[]))
    result["loaded"] = False
    _persisted(paths, result)
    _warn_other_persistence(result)
    return result


def _warn_other_persistence(result):
    for path in result["persist_files"]:
        result["warnings"].append("%s still lists nvidia_peermem: it loads again at boot unless removed there" % path)
