"""Every shipped audit rule (roles/audit/files/rules.yml), tested both ways.

For each rule id in rules.yml, CASES holds one case where the rule FIRES (its entry lands in
``findings``, with the rule's severity and a message showing the value the case set) and one
where it HOLDS (the entry lands in ``optimal``). Each case starts from a fixture node
(tests/unit/fixtures/audit/NAME.yml: facts and the check-mode plan, as audit_cases loads them)
and changes only the facts (or plan entries, or params) that rule reads, in both directions:
neither case relies on the fixture already being right or wrong.

The rule ids come from rules.yml itself: a rule added there without both cases fails
test_every_rule_has_a_case_both_ways, naming it. The same holds for the "not applicable" cases
of the rules that have ``applies``. Further: facts that are unknown (an envelope with
``unknown``) put a rule in ``unknown`` with the reason, and the host role's settings
(``params``) move verdicts.
"""

import collections
import copy
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_planned import audit_planned
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils import audit_cases as cases

LISTS = ("findings", "optimal", "unknown", "not_applicable")

# GPU, container and pair labels of the fixture nodes.
UNTUNED_GPU0 = "GPU 0 (0000:01:00.0)"
BLACKWELL_GPU0 = "GPU 0 (0000:17:00.0)"
BLACKWELL_PAIR = "GPUs 0 and 1"
VLLM = "container 101 (vllm)"


_LOADED = {}


def _load(path, load):
    """``load()``, read again only when ``path`` changed (rules.yml is edited while tests run)."""
    stamp = os.stat(path).st_mtime_ns
    if _LOADED.get(path, (None,))[0] != stamp:
        _LOADED[path] = (stamp, load())
    return copy.deepcopy(_LOADED[path][1])


def shipped_list():
    return _load(cases.RULES_FILE, cases.rules)["rules"]


def shipped():
    """{id: rule} of rules.yml."""
    return dict((rule["id"], rule) for rule in shipped_list())


def fixture_data(name):
    return _load(os.path.join(cases.FIXTURES, name + ".yml"), lambda: cases.fixture(name))


# ------------------------------------------------------------------------------ changes

class Node:
    """A fixture node's facts, plan and extra params, to be changed by a case and evaluated."""

    def __init__(self, name):
        data = fixture_data(name)
        self.facts = data["facts"]
        self.plan = audit_planned(data["results"])
        self.params = {}

    def evaluate(self):
        return cases.evaluate(self.facts, self.plan, rule_list=shipped_list(), extra_params=self.params)


def _keys(path):
    """A dotted path ('gpus.0.pcie.mrrs_bytes'), or a tuple for keys holding dots."""
    keys = path.split(".") if isinstance(path, str) else list(path)
    return [int(key) if isinstance(key, str) and key.isdigit() else key for key in keys]


def _is_envelope(node):
    return isinstance(node, dict) and "value" in node and "source" in node and set(node) <= {"value", "source", "unknown"}


def _parent(facts, keys):
    node = facts
    for key in keys[:-1]:
        if _is_envelope(node):
            node = node["value"]
        node = node[key]
    if _is_envelope(node):
        node = node["value"]
    return node


def put(facts, path, value):
    """Set the value of the envelope at ``path`` (it becomes known, with its source). The
    fixture must have that envelope: a mistyped path fails here, not silently."""
    keys = _keys(path)
    parent = _parent(facts, keys)
    current = parent[keys[-1]]
    assert _is_envelope(current), "%s is not an envelope in the fixture: %r" % (path, current)
    parent[keys[-1]] = {"value": value, "source": current["source"]}


def forget(facts, path, reason):
    """Make the envelope at ``path`` unknown, with ``reason``, keeping its source."""
    keys = _keys(path)
    parent = _parent(facts, keys)
    parent[keys[-1]] = {"value": None, "source": parent[keys[-1]]["source"], "unknown": reason}


def fact(path, value):
    return lambda node: put(node.facts, path, value)


def sysctl(key, value):
    return fact(("memory", "sysctls", key), value)


def replace(path, raw):
    """Replace the raw node at ``path`` (a list of envelopes, a section) with ``raw``."""
    def change(node):
        keys = _keys(path)
        _parent(node.facts, keys)[keys[-1]] = copy.deepcopy(raw)
    return change


def planned(module, key, value):
    """Set ``key`` of the check-mode plan of ``module`` (plan.<module> in the rules)."""
    def change(node):
        entries = [phase[module] for phase in node.plan.values() if isinstance(phase, dict) and module in phase]
        assert entries, "the fixture's plan has no %s" % module
        entries[0][key] = value
    return change


def param(name, value):
    """A host role setting, as evaluate(..., extra_params=) passes it."""
    def change(node):
        node.params[name] = value
    return change


def profile_without(key):
    """The host role's sysctl profile less KEY."""
    def change(node):
        node.params["sysctl"] = dict((k, v) for k, v in cases.params()["sysctl"].items() if k != key)
    return change


def env(value, source="test"):
    return {"value": value, "source": source}


def in_container(pid1, unit=None, live=None, kind="lxc"):
    """The node runs inside a container: host.container and containers.inside as node_facts
    gives them there (containers.inside is null on a host)."""
    changes = [fact("host.container.detected", True), fact("host.container.kind", kind),
               replace("containers.inside", {"pid1_memlock": env(pid1, "/proc/1/limits"),
                                             "serving_unit": env(unit, "option:serving_unit"),
                                             "serving_unit_memlock": env(live, "/proc/4242/limits")})]

    def change(node):
        for one in changes:
            one(node)
    return change


def evaluate(fixture, changes):
    node = Node(fixture)
    for change in changes:
        change(node)
    return node.evaluate()


def landed(result, rule_id, item):
    """{list name: [entries]} of rule_id's entries for ``item`` in each of the four lists."""
    out = {}
    for key in LISTS:
        entries = [entry for entry in result[key] if entry["rule"] == rule_id and entry["item"] == item]
        if entries:
            out[key] = entries
    return out


def the_entry(result, rule_id, item, expected):
    """The one entry of (rule_id, item), asserting it is in the ``expected`` list and no other."""
    where = landed(result, rule_id, item)
    summary = dict((key, [entry.get("message") or entry.get("ok") or entry.get("reasons") or entry.get("why")
                          for entry in entries]) for key, entries in where.items())
    assert list(where) == [expected], "%s (%s) landed in %s, expected %s" % (rule_id, item, summary, expected)
    assert len(where[expected]) == 1, "%s (%s): %d entries" % (rule_id, item, len(where[expected]))
    return where[expected][0]


# ------------------------------------------------------------------------------ every rule both ways

Case = collections.namedtuple("Case", "fixture item fire hold fragment")
Case.__doc__ = """fixture: the node the case starts from; item: the label of the entry (None
for a rule without per); fire, hold: the changes making the problem exist, and not exist;
fragment: text of the fired message, showing the value ``fire`` set."""

CASES = {
    # ---------------------------------------------------------------- RDMA
    "peermem_not_loaded": Case(
        "untuned", None,
        [fact("driver.rdma_devices", ["mlx5_0", "mlx5_3"]), fact("driver.peermem_loaded", False),
         fact("driver.nv_peer_mem_loaded", False), fact("driver.peer_symbol", True)],
        [fact("driver.rdma_devices", ["mlx5_0", "mlx5_3"]), fact("driver.peermem_loaded", True),
         fact("driver.nv_peer_mem_loaded", False), fact("driver.peer_symbol", True)],
        "RDMA devices mlx5_0, mlx5_3 are present and ib_core exports the peer-memory symbol, but nvidia_peermem"),
    "peermem_no_peer_symbol": Case(
        "untuned", None,
        [fact("driver.rdma_devices", ["mlx5_2"]), fact("driver.peermem_loaded", False),
         fact("driver.nv_peer_mem_loaded", False), fact("driver.peer_symbol", False), fact("driver.ib_core_loaded", False)],
        [fact("driver.rdma_devices", ["mlx5_2"]), fact("driver.peermem_loaded", False),
         fact("driver.nv_peer_mem_loaded", False), fact("driver.peer_symbol", True), fact("driver.ib_core_loaded", True)],
        "RDMA devices mlx5_2 are present, but ib_core (loaded: no) exports no ib_register_peer_memory_client"),
    # ---------------------------------------------------------------- PCIe
    "gpu_mrrs_low": Case(
        "untuned", UNTUNED_GPU0,
        [fact("gpus.0.pcie.mrrs_bytes", 256)],
        [fact("gpus.0.pcie.mrrs_bytes", 4096)],
        "MRRS is 256 bytes, below 4096"),
    "pcie_link_width_degraded": Case(
        "untuned", UNTUNED_GPU0,
        [fact("gpus.0.pcie.link_width", 8), fact("gpus.0.pcie.max_link_width", 16)],
        [fact("gpus.0.pcie.link_width", 16), fact("gpus.0.pcie.max_link_width", 16)],
        "the link trained at x8, the GPU and slot can do x16"),
    "pcie_link_speed_degraded": Case(
        "untuned", UNTUNED_GPU0,
        [fact("gpus.0.pcie.link_speed_gts", 8.0), fact("gpus.0.pcie.max_link_speed_gts", 32.0)],
        [fact("gpus.0.pcie.link_speed_gts", 32.0), fact("gpus.0.pcie.max_link_speed_gts", 32.0)],
        "the link runs at 8 GT/s, the GPU and slot can do 32 GT/s"),
    # ---------------------------------------------------------------- CPU
    "cpu_deep_idle_states": Case(
        "untuned", "C2",
        [fact("cpu.cpuidle.states.2.latency_us", 350), fact("cpu.cpuidle.states.2.enabled_cpus", "0-95")],
        # the tuned state: the deep state still exists, disabled on every CPU
        [fact("cpu.cpuidle.states.2.latency_us", 350), fact("cpu.cpuidle.states.2.enabled_cpus", "")],
        "exit latency 350 us, above 10 us, and enabled on CPUs 0-95"),
    "cpu_governor": Case(
        "untuned", "CPUs 0-191",
        [fact("cpu.cpufreq.governors", {"powersave": "0-191"})],
        [fact("cpu.cpufreq.governors", {"performance": "0-191"})],
        "governor powersave, not performance"),
    "cpu_epp": Case(
        "untuned", "CPUs 0-191",
        [fact("cpu.cpufreq.epp", {"balance_power": "0-191"})],
        [fact("cpu.cpufreq.epp", {"performance": "0-191"})],
        "EPP balance_power, not performance"),
    "amd_pstate_not_active": Case(
        "untuned", None,
        [fact("cpu.vendor", "AuthenticAMD"), fact("kernel.amd_pstate_status", "guided")],
        [fact("cpu.vendor", "AuthenticAMD"), fact("kernel.amd_pstate_status", "active")],
        "amd-pstate runs in guided mode, not active"),
    # ---------------------------------------------------------------- sysctls
    "numa_balancing_on": Case(
        # one NUMA node: the rule applies on any node count
        "tuned", None,
        [replace("cpu.numa_nodes", [{"node": env(0), "cpus": env("0-191")}]), sysctl("kernel.numa_balancing", "1")],
        [replace("cpu.numa_nodes", [{"node": env(0), "cpus": env("0-191")}]), sysctl("kernel.numa_balancing", "0")],
        "kernel.numa_balancing = 1 on a host with 1 NUMA node(s)"),
    "nmi_watchdog_on": Case(
        "tuned", None,
        [sysctl("kernel.nmi_watchdog", "1")],
        [sysctl("kernel.nmi_watchdog", "0")],
        "kernel.nmi_watchdog = 1"),
    "sched_autogroup_on": Case(
        "tuned", None,
        [sysctl("kernel.sched_autogroup_enabled", "1")],
        [sysctl("kernel.sched_autogroup_enabled", "0")],
        "kernel.sched_autogroup_enabled = 1"),
    "swappiness_high": Case(
        "tuned", None,
        [sysctl("vm.swappiness", "85")],
        [sysctl("vm.swappiness", "10")],
        "vm.swappiness = 85, above 10"),
    "net_buffers_low": Case(
        "tuned", "net.ipv4.tcp_wmem",
        [sysctl("net.ipv4.tcp_wmem", "4096 16384 8388608")],
        # above the profile's: sysctl_profile keeps it, and so does the audit
        [sysctl("net.ipv4.tcp_wmem", "4096 65536 268435456")],
        "4096 16384 8388608: the largest buffer, 8388608 bytes, is below the profile's 134217728"),
    "thp_defrag_always": Case(
        "untuned", None,
        [fact("memory.thp_enabled", "madvise"), fact("memory.thp_defrag", "always")],
        [fact("memory.thp_enabled", "madvise"), fact("memory.thp_defrag", "defer+madvise")],
        "THP is madvise and defrag is always"),
    # ---------------------------------------------------------------- LXC and containers
    "lxc_memlock_capped": Case(
        "untuned", VLLM,
        [fact("containers.lxc.0.gpu", True), fact("containers.lxc.0.memlock_limit", "16777216")],
        [fact("containers.lxc.0.gpu", True), fact("containers.lxc.0.memlock_limit", "unlimited")],
        "lxc.prlimit.memlock is 16777216, not unlimited (running: yes; the running init's limit: 8388608)"),
    "container_memlock_capped": Case(
        "untuned", None,
        [in_container("8388608", kind="lxc")],
        [in_container("unlimited", kind="lxc")],
        "PID 1 of this lxc container has memlock 8388608, not unlimited"),
    "container_serving_unit_memlock": Case(
        "untuned", None,
        [in_container("unlimited", "vllm.service", "8388608", kind="docker")],
        [in_container("unlimited", "vllm.service", "unlimited", kind="docker")],
        "vllm.service runs with memlock 8388608, below the container's ceiling unlimited"),
    "lxc_memlock_not_live": Case(
        "tuned", VLLM,
        [fact("containers.lxc.0.running", True), fact("containers.lxc.0.memlock_limit", "unlimited"),
         fact("containers.lxc.0.memlock_running", "65536")],
        [fact("containers.lxc.0.running", True), fact("containers.lxc.0.memlock_limit", "unlimited"),
         fact("containers.lxc.0.memlock_running", "unlimited")],
        "configured unlimited, but the running init still has 65536"),
    # ---------------------------------------------------------------- GPU state
    "gpu_remapped_rows_pending": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.remapped_rows_pending", True)],
        [fact("gpus.0.remapped_rows_pending", False)],
        "row remapping is pending"),
    "gpu_remap_failure": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.remapped_rows_failure", True)],
        [fact("gpus.0.remapped_rows_failure", False)],
        "a row remapping failed"),
    "gpu_retired_pages_pending": Case(
        # Hopper GPUs have no page retirement (unknown on the untuned node): a Blackwell one
        "blackwell-pcie", BLACKWELL_GPU0,
        [fact("gpus.0.retired_pages_pending", True)],
        [fact("gpus.0.retired_pages_pending", False)],
        "retired pages wait for a GPU reset"),
    "gpu_ecc_uncorrected": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.ecc_errors_uncorrected", {"volatile": 3, "aggregate": 5})],
        # errors before the driver loaded (aggregate) only: not since
        [fact("gpus.0.ecc_errors_uncorrected", {"volatile": 0, "aggregate": 5})],
        "3 uncorrectable ECC errors since the driver loaded"),
    "gpu_ecc_mode_pending": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.ecc_mode", True), fact("gpus.0.ecc_pending_mode", False)],
        [fact("gpus.0.ecc_mode", True), fact("gpus.0.ecc_pending_mode", True)],
        "ECC is yes and will be no after the next GPU reset"),
    "gpu_persistence_off": Case(
        "blackwell-pcie", BLACKWELL_GPU0,
        [fact("gpus.0.persistence_mode", "Disabled"), fact("driver.persistenced_active", False)],
        [fact("gpus.0.persistence_mode", "Enabled"), fact("driver.persistenced_active", True)],
        "persistence mode is Disabled (nvidia-persistenced running: no)"),
    "gpu_clock_events": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.clock_event_reasons", ["sw_thermal_slowdown"]), fact("gpus.0.temperature_c", 88)],
        # a clock event that is neither thermal nor power, and a hardware one (gpu_hw_slowdown's)
        [fact("gpus.0.clock_event_reasons", ["applications_clocks_setting", "hw_power_brake_slowdown"]),
         fact("gpus.0.temperature_c", 88)],
        "clocks are held down by sw_thermal_slowdown (temperature 88 C, power limit 700 W)"),
    # ---------------------------------------------------------------- health (H)
    "gpu_count_driver": Case(
        "tuned", None,
        [fact("health.gpus_driver", 3)], [fact("health.gpus_driver", 4)],
        "the driver sees 3 of the 4 NVIDIA GPUs on the PCI bus"),
    "gpu_count_expected": Case(
        "tuned", None,
        [param("health", dict(cases.health_params(), expected_gpus=8))],
        [param("health", dict(cases.health_params(), expected_gpus=4))],
        "4 NVIDIA GPUs on the PCI bus, the inventory expects 8"),
    "gpu_lost": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.nvml_status", "gpu_is_lost")], [fact("gpus.0.nvml_status", "ok")],
        "NVML answers gpu_is_lost for this GPU"),
    "gpu_recovery_action": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.recovery_action", "node_reboot")], [fact("gpus.0.recovery_action", "none")],
        "the driver asks for node_reboot (nvmlDeviceGetGpuRecoveryAction): reboot"),
    "gpu_sram_uncorrected": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.sram_uncorrected_volatile", 2), fact("gpus.0.sram_uncorrected_aggregate", 7)],
        [fact("gpus.0.sram_uncorrected_volatile", 0), fact("gpus.0.sram_uncorrected_aggregate", 7)],
        "2 uncorrectable SRAM errors since the driver loaded, 7 over the GPU's life"),
    "gpu_retired_pages_many": Case(
        "blackwell-pcie", BLACKWELL_GPU0,
        [replace("gpus.0.retired_pages", env({"multiple_single_bit_ecc": 40, "double_bit_ecc": 25},
                                             "nvml:nvmlDeviceGetRetiredPages_v2"))],
        [replace("gpus.0.retired_pages", env({"multiple_single_bit_ecc": 4, "double_bit_ecc": 1},
                                             "nvml:nvmlDeviceGetRetiredPages_v2"))],
        "65 pages retired"),
    "gpu_hw_slowdown": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.clock_event_reasons", ["hw_thermal_slowdown"]), fact("gpus.0.temperature_c", 91)],
        [fact("gpus.0.clock_event_reasons", ["sw_power_cap"]), fact("gpus.0.temperature_c", 70)],
        "the hardware holds the clocks down: hw_thermal_slowdown (temperature 91 C)"),
    "gpu_pcie_aer_fatal": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.pcie.aer_fatal", 1)], [fact("gpus.0.pcie.aer_fatal", 0)],
        "1 fatal AER errors on the GPU and 0 on the bridges above it"),
    "gpu_pcie_aer_nonfatal": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.pcie.path_aer", [{"bdf": "0000:00:01.1", "correctable": 0, "nonfatal": 2, "fatal": 0}])],
        [fact("gpus.0.pcie.path_aer", [{"bdf": "0000:00:01.1", "correctable": 9, "nonfatal": 0, "fatal": 0}])],
        "0 non-fatal uncorrectable AER errors on the GPU and 2 on the bridges above it"),
    "gpu_pcie_aer_correctable": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.pcie.aer_correctable", 250)], [fact("gpus.0.pcie.aer_correctable", 20)],
        "250 correctable AER errors on the GPU and 0 on the bridges above it since boot, above 100"),
    "gpu_pcie_replay": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.pcie.replay_count", 5000)], [fact("gpus.0.pcie.replay_count", 3)],
        "5000 PCIe replays since the driver loaded, above 100"),
    "gpu_nvlink_down": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.nvlink_active", 2)], [fact("gpus.0.nvlink_active", 3)],
        "2 of its 3 NVLinks are active, 3 expected"),
    "gpu_nvlink_errors": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.nvlink_errors", {"replay": 0, "recovery": 4, "crc": 0})],
        [fact("gpus.0.nvlink_errors", {"replay": 12, "recovery": 0, "crc": 30})],
        "NVLink counters over the GPU's links: replay: 0, recovery: 4, crc: 0"),
    "gpu_fabric_state": Case(
        "h200-nvlink", "GPU 0 (0000:00:06.0)",
        [fact("gpus.0.fabric_state", "in_progress"), fact("gpus.0.fabric_status", None)],
        [fact("gpus.0.fabric_state", "completed"), fact("gpus.0.fabric_status", "ok")],
        "fabric registration is in_progress"),
    "xid_events": Case(
        "tuned", "XID 79 on GPU 2 (0000:81:00.0)",
        [fact("health.xid", [{"bdf": "0000:81:00.0", "gpu": 2, "code": 79, "count": 1, "first_s": 4000.0,
                              "last_s": 4000.0, "last_message": "GPU has fallen off the bus."}])],
        # the hold case: an entry that counts nothing
        [fact("health.xid", [{"bdf": "0000:81:00.0", "gpu": 2, "code": 79, "count": 0, "first_s": None,
                              "last_s": None, "last_message": ""}])],
        "1 time(s), last at 4000 s after boot: The GPU is no longer reachable over PCIe"),
    "gpu_power_limit_below_max": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.power_limit_w", 450.0), fact("gpus.0.power_max_limit_w", 700.0)],
        [fact("gpus.0.power_limit_w", 700.0), fact("gpus.0.power_max_limit_w", 700.0)],
        "the power limit is 450 W; the default is 700 W and the GPU allows 700 W"),
    # ---------------------------------------------------------------- competing tuners
    "tuner_tuned_active": Case(
        "untuned", None,
        [fact("tuners.tuned.active", True), fact("tuners.tuned.profile", "throughput-performance")],
        [fact("tuners.tuned.active", False)],
        "tuned is running (profile throughput-performance): it sets the CPU governor"),
    "tuner_power_profiles_daemon_active": Case(
        "untuned", None,
        [fact("tuners.power_profiles_daemon.active", True), fact("tuners.power_profiles_daemon.profile", "power-saver")],
        [fact("tuners.power_profiles_daemon.active", False)],
        "power-profiles-daemon is running (profile power-saver): it sets the energy performance preference"),
    "tuner_cpupower_enabled": Case(
        "untuned", None,
        [fact("tuners.cpupower.enabled", True)],
        [fact("tuners.cpupower.enabled", False)],
        "cpupower.service is enabled: it sets the CPU governor (and frequency limits)"),
    "tuner_irqbalance_active": Case(
        "blackwell-pcie", None,
        [fact("tuners.irqbalance.active", True)],
        [fact("tuners.irqbalance.active", False)],
        "irqbalance is running: it moves IRQ affinity"),
    # ---------------------------------------------------------------- IOMMU and peer-to-peer
    "iommu_translated": Case(
        "tuned", UNTUNED_GPU0,
        [fact("gpus.0.iommu_group_type", "DMA"), fact("kernel.iommu_args.iommu", "nopt")],
        [fact("gpus.0.iommu_group_type", "identity"), fact("kernel.iommu_args.iommu", "pt")],
        "the GPU is in a translated IOMMU domain (DMA) and iommu= is nopt on the running command line"),
    "iommu_translated_blackwell": Case(
        "blackwell-pcie", BLACKWELL_GPU0,
        [fact("gpus.0.iommu_group_type", "DMA-FQ")],
        [fact("gpus.0.iommu_group_type", "identity")],
        "the GPU is in a translated IOMMU domain (DMA-FQ); do NOT switch it to identity"),
    "iommu_pt_on_blackwell": Case(
        "blackwell-pcie", None,
        [fact("kernel.iommu_passthrough_forced", True), fact(("kernel", "iommu_args", "iommu.passthrough"), "1")],
        [fact("kernel.iommu_passthrough_forced", False), fact(("kernel", "iommu_args", "iommu.passthrough"), None)],
        "forces identity IOMMU domains (intel_iommu=on iommu.passthrough=1)"),
    "p2p_acs_redirect": Case(
        "blackwell-pcie", BLACKWELL_PAIR,
        [fact("topology.pairs.0.bridges.0.acs.request_redirect", False),
         fact("topology.pairs.0.bridges.0.acs.completion_redirect", False),
         fact("topology.pairs.0.bridges.1.acs.request_redirect", False),
         fact("topology.pairs.0.bridges.1.acs.completion_redirect", True)],
        [fact("topology.pairs.0.bridges.%d.acs.%s_redirect" % (bridge, kind), False)
         for bridge in (0, 1) for kind in ("request", "completion")],
        "ACS request or completion redirect is set on 0000:16:01.0, between the two GPUs"),
    "p2p_across_cpus": Case(
        "blackwell-pcie", BLACKWELL_PAIR,
        [fact("topology.pairs.0.relation", "across_cpus"), fact("topology.pairs.0.numa_nodes", [0, 1])],
        [fact("topology.pairs.0.relation", "across_host_bridges"), fact("topology.pairs.0.numa_nodes", [0, 0])],
        "the GPUs sit under different CPU sockets (NUMA nodes 0, 1)"),
    "p2p_peer_access": Case(
        "blackwell-pcie", BLACKWELL_PAIR,
        [fact("topology.pairs.0.peer_access", "chipset_not_supported")],
        [fact("topology.pairs.0.peer_access", "ok")],
        "the driver refuses peer access (chipset_not_supported; same_switch, link pcie)"),
    "fabric_manager_not_running": Case(
        "h200-nvlink", None,
        [fact("driver.nvswitches", 4), fact("driver.fabricmanager_active", False)],
        [fact("driver.nvswitches", 4), fact("driver.fabricmanager_active", True)],
        "4 NVSwitches and no fabric manager running"),
    # ---------------------------------------------------------------- pending reboots (plan.<module>)
    "kernel_cmdline_reboot_pending": Case(
        "untuned", None,
        [planned("kernel_cmdline", "reboot_required", True),
         planned("kernel_cmdline", "pending", ["amd_pstate=active (running: passive)"])],
        [planned("kernel_cmdline", "reboot_required", False), planned("kernel_cmdline", "pending", [])],
        "amd_pstate=active (running: passive): after --tags reboot_required writes it, not running until the next reboot"),
    "nvidia_options_reboot_pending": Case(
        "untuned", None,
        [planned("nvidia_driver_options", "reboot_required", True),
         planned("nvidia_driver_options", "pending", ["NVreg_EnableStreamMemOPs=1 (running: 0)"]),
         planned("nvidia_driver_options", "records", [])],
        [planned("nvidia_driver_options", "reboot_required", False), planned("nvidia_driver_options", "pending", [])],
        "NVreg_EnableStreamMemOPs=1 (running: 0): already configured, not running until the driver reloads"),
}


def test_every_rule_has_a_case_both_ways():
    rules = shipped()
    ids = set(rules)
    missing = sorted(ids - set(CASES))
    stale = sorted(set(CASES) - ids)
    assert not missing, "rules in rules.yml without a fire and a hold case in CASES: %s" % ", ".join(missing)
    assert not stale, "CASES names rules that rules.yml no longer has: %s" % ", ".join(stale)
    for rule_id, case in CASES.items():
        assert case.fire and case.hold and case.fragment, rule_id
        assert case.fixture in cases.NODES, rule_id
        assert (case.item is None) == (rules[rule_id].get("per") is None), (
            "%s: the case's item must be a label exactly when the rule has per" % rule_id)


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_the_rule_fires(rule_id):
    case = CASES[rule_id]
    rule = shipped().get(rule_id)
    assert rule is not None, "%s is no longer in rules.yml" % rule_id
    entry = the_entry(evaluate(case.fixture, case.fire), rule_id, case.item, "findings")
    assert entry["severity"] == rule["severity"]
    assert case.fragment in entry["message"], entry["message"]
    assert entry["fix"]["class"] == rule["fix"]["class"]
    assert "unknown" not in entry["message"], entry["message"]


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_the_rule_holds(rule_id):
    case = CASES[rule_id]
    rule = shipped().get(rule_id)
    assert rule is not None, "%s is no longer in rules.yml" % rule_id
    entry = the_entry(evaluate(case.fixture, case.hold), rule_id, case.item, "optimal")
    assert entry["severity"] == rule["severity"]
    assert "message" not in entry
    if rule.get("ok"):
        assert entry["ok"] and "unknown" not in entry["ok"], entry["ok"]


# ------------------------------------------------------------------------------ not applicable

# rule id -> (fixture, item, changes): the rule's applies is false. Every rule with applies has one.
NOT_APPLICABLE = {
    "peermem_not_loaded": ("untuned", None, [fact("driver.rdma_devices", [])]),
    "peermem_no_peer_symbol": ("untuned", None, [fact("driver.rdma_devices", []), fact("driver.peer_symbol", False)]),
    # the role sets no C-state bound
    "cpu_deep_idle_states": ("untuned", "C2", [param("cpu_max_idle_latency_us", None)]),
    # a profile without the key: the role does not set it, so the audit does not judge it
    "numa_balancing_on": ("untuned", None, [profile_without("kernel.numa_balancing")]),
    "nmi_watchdog_on": ("untuned", None, [profile_without("kernel.nmi_watchdog")]),
    "sched_autogroup_on": ("untuned", None, [profile_without("kernel.sched_autogroup_enabled")]),
    "swappiness_high": ("untuned", None, [profile_without("vm.swappiness")]),
    "cpu_governor": ("untuned", "CPUs 0-191", [param("cpu_governor", None)]),
    "cpu_epp": ("untuned", "CPUs 0-191", [fact("cpu.cpufreq.epp", {"balance_power": "0-191"}), param("cpu_epp", None)]),
    "amd_pstate_not_active": ("untuned", None, [fact("cpu.vendor", "GenuineIntel")]),
    "thp_defrag_always": ("untuned", None, [fact("memory.thp_enabled", "never"), fact("memory.thp_defrag", "always")]),
    # container 102 (monitoring) has no GPU
    "lxc_memlock_capped": ("untuned", "container 102 (monitoring)", [fact("containers.lxc.1.memlock_limit", "65536")]),
    "container_memlock_capped": ("untuned", None, [fact("host.container.detected", False)]),
    "container_serving_unit_memlock": ("untuned", None, [in_container("unlimited", None, None)]),
    # a stopped container gets its limit when it starts
    "lxc_memlock_not_live": ("tuned", VLLM, [fact("containers.lxc.0.running", False)]),
    "iommu_translated": ("tuned", UNTUNED_GPU0, [fact("gpus.0.architecture", "blackwell"),
                                                 fact("gpus.0.iommu_group_type", "DMA")]),
    "iommu_translated_blackwell": ("blackwell-pcie", BLACKWELL_GPU0, [fact("gpus.0.architecture", "hopper")]),
    "iommu_pt_on_blackwell": ("blackwell-pcie", None, [fact("gpus.0.architecture", "hopper"),
                                                       fact("gpus.1.architecture", "hopper"),
                                                       fact("kernel.iommu_passthrough_forced", True)]),
    "p2p_acs_redirect": ("blackwell-pcie", BLACKWELL_PAIR, [fact("topology.pairs.0.link", "nvlink")]),
    "p2p_across_cpus": ("blackwell-pcie", BLACKWELL_PAIR, [fact("topology.pairs.0.link", "nvlink"),
                                                           fact("topology.pairs.0.relation", "across_cpus")]),
    "gpu_count_driver": ("tuned", None, [fact("health.gpus_pci", 0)]),
    "gpu_count_expected": ("tuned", None, []),  # the inventory expects no count
    "gpu_nvlink_down": ("blackwell-pcie", BLACKWELL_GPU0, [fact("gpus.0.nvlink_links", 0)]),
    "gpu_nvlink_errors": ("blackwell-pcie", BLACKWELL_GPU0, [fact("gpus.0.nvlink_errors", None)]),
    "gpu_fabric_state": ("tuned", UNTUNED_GPU0, [fact("gpus.0.fabric_state", "not_supported")]),
    # an XID logged before xid_after_s (set once it was acted on)
    "xid_events": ("tuned", "XID 79 on GPU 2 (0000:81:00.0)",
                   [fact("health.xid", [{"bdf": "0000:81:00.0", "gpu": 2, "code": 79, "count": 1, "first_s": 40.0,
                                         "last_s": 40.0, "last_message": "GPU has fallen off the bus."}]),
                    param("health", dict(cases.health_params(), xid_after_s=3600))]),
    "fabric_manager_not_running": ("h200-nvlink", None, [fact("driver.nvswitches", 0),
                                                         fact("driver.fabricmanager_active", False)]),
    "kernel_cmdline_reboot_pending": ("untuned", None, [planned("kernel_cmdline", "status", "skipped")]),
    "nvidia_options_reboot_pending": ("untuned", None, [planned("nvidia_driver_options", "status", "skipped"),
                                                        planned("nvidia_driver_options", "reboot_required", True)]),
}


def test_every_rule_with_applies_has_a_not_applicable_case():
    with_applies = set(rule_id for rule_id, rule in shipped().items() if rule.get("applies") is not None)
    missing = sorted(with_applies - set(NOT_APPLICABLE))
    stale = sorted(set(NOT_APPLICABLE) - with_applies)
    assert not missing, "rules with applies and no case in NOT_APPLICABLE: %s" % ", ".join(missing)
    assert not stale, "NOT_APPLICABLE names rules without applies (or gone): %s" % ", ".join(stale)


@pytest.mark.parametrize("rule_id", sorted(NOT_APPLICABLE))
def test_the_rule_does_not_apply(rule_id):
    fixture, item, changes = NOT_APPLICABLE[rule_id]
    entry = the_entry(evaluate(fixture, changes), rule_id, item, "not_applicable")
    assert entry["severity"] == shipped()[rule_id]["severity"]


def test_a_per_rule_with_nothing_to_check_is_not_applicable():
    result = evaluate("untuned", [fact("cpu.cpufreq.epp", {})])
    entry = the_entry(result, "cpu_epp", None, "not_applicable")
    assert entry["why"] == "nothing to check: items(cpu.cpufreq.epp) gives no item"


# ------------------------------------------------------------------------------ unknown facts

def test_an_unknown_sysctl_is_unknown_with_its_reason():
    node = Node("untuned")
    forget(node.facts, ("memory", "sysctls", "vm.swappiness"), "Permission denied")
    entry = the_entry(node.evaluate(), "swappiness_high", None, "unknown")
    assert entry["severity"] == shipped()["swappiness_high"]["severity"]
    assert entry["reasons"] == ["/proc/sys/vm/swappiness: Permission denied"]


def test_an_unknown_fact_of_one_gpu_leaves_the_others_decided():
    node = Node("untuned")
    forget(node.facts, "gpus.0.pcie.mrrs_bytes", "config space needs root")
    result = node.evaluate()
    entry = the_entry(result, "gpu_mrrs_low", UNTUNED_GPU0, "unknown")
    assert entry["reasons"] == ["/sys/bus/pci/devices/0000:01:00.0/config: config space needs root"]
    assert the_entry(result, "gpu_mrrs_low", "GPU 1 (0000:41:00.0)", "findings")["message"] == "MRRS is 512 bytes, below 4096"


def test_a_serving_unit_that_does_not_run_is_unknown():
    node = Node("untuned")
    in_container("unlimited", "vllm.service", None)(node)
    forget(node.facts, "containers.inside.serving_unit_memlock", "no process of vllm.service runs (is it started?)")
    result = node.evaluate()
    entry = the_entry(result, "container_serving_unit_memlock", None, "unknown")
    assert entry["reasons"] == ["/proc/4242/limits: no process of vllm.service runs (is it started?)"]
    # the ceiling itself is known: decided
    the_entry(result, "container_memlock_capped", None, "optimal")


def test_an_unknown_fact_read_only_by_applies_still_decides_nothing():
    node = Node("untuned")
    forget(node.facts, "driver.rdma_devices", "/sys/class/infiniband: Permission denied")
    result = node.evaluate()
    for rule_id in ("peermem_not_loaded", "peermem_no_peer_symbol"):
        entry = the_entry(result, rule_id, None, "unknown")
        assert entry["reasons"] == ["/sys/class/infiniband: /sys/class/infiniband: Permission denied"]


# ------------------------------------------------------------------------------ params move verdicts

# (rule id, fixture, item, params, list with the host role's defaults, list with the params, fragment)
PARAMS = [
    ("gpu_mrrs_low", "untuned", UNTUNED_GPU0, {"pcie_size": 512}, "findings", "optimal", "MRRS is 512 bytes, below 4096"),
    ("gpu_mrrs_low", "tuned", UNTUNED_GPU0, {"pcie_size": 8192}, "optimal", "findings", "MRRS is 4096 bytes, below 8192"),
    ("cpu_deep_idle_states", "untuned", "C2", {"cpu_max_idle_latency_us": 500}, "findings", "optimal",
     "exit latency 400 us, above 10 us"),
    ("cpu_deep_idle_states", "untuned", "C1", {"cpu_max_idle_latency_us": 0}, "optimal", "findings",
     "exit latency 1 us, above 0 us, and enabled on CPUs 0-191"),
    ("cpu_governor", "untuned", "CPUs 0-191", {"cpu_governor": "schedutil"}, "findings", "optimal",
     "governor schedutil, not performance"),
    ("lxc_memlock_capped", "tuned", VLLM, {"lxc_memlock_limit": "68719476736"}, "optimal", "findings",
     "lxc.prlimit.memlock is unlimited, not 68719476736"),
    ("lxc_memlock_not_live", "tuned", VLLM, {"lxc_memlock_limit": "68719476736"}, "optimal", "not_applicable", None),
]


@pytest.mark.parametrize("rule_id, fixture, item, extra, default_list, moved_list, fragment", PARAMS,
                         ids=["%s-%s" % (p[0], "-".join(sorted(p[3]))) for p in PARAMS])
def test_a_param_moves_the_verdict(rule_id, fixture, item, extra, default_list, moved_list, fragment):
    before = the_entry(evaluate(fixture, []), rule_id, item, default_list)
    after = the_entry(evaluate(fixture, [param(name, value) for name, value in extra.items()]), rule_id, item, moved_list)
    finding = before if default_list == "findings" else after if moved_list == "findings" else None
    if finding is not None:
        assert fragment in finding["message"], finding["message"]
        assert finding["severity"] == shipped()[rule_id]["severity"]


def test_the_sysctl_profile_param_moves_net_buffers_low():
    """net_buffers_low checks the keys params.sysctl sets, against its values."""
    sysctl_param = dict(cases.params()["sysctl"])
    before = evaluate("h200-nvlink", [])
    the_entry(before, "net_buffers_low", "net.ipv4.tcp_rmem", "findings")
    # the profile asks for what the kernel has: optimal
    sysctl_param["net.ipv4.tcp_rmem"] = "4096 131072 33554432"
    after = evaluate("h200-nvlink", [param("sysctl", dict(sysctl_param))])
    assert the_entry(after, "net_buffers_low", "net.ipv4.tcp_rmem", "optimal")["ok"] == (
        "net.ipv4.tcp_rmem = 4096 131072 33554432")
    # a key the profile does not set is not checked at all
    del sysctl_param["net.core.wmem_max"]
    after = evaluate("h200-nvlink", [param("sysctl", sysctl_param)])
    assert landed(after, "net_buffers_low", "net.core.wmem_max") == {}
    the_entry(after, "net_buffers_low", "net.core.rmem_max", "findings")
