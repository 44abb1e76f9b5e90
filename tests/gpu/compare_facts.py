# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compare the audit's GPU facts (gpufleet.tuning.node_facts, as the audit saved them in
audit.json) with what nvidia-smi says on the same node: `nvidia-smi -q -x` for every GPU,
`nvidia-smi topo -m` for every pair, `nvidia-smi nvlink -s` and `-e` for every link, and the
health facts (ECC, remapped rows, SRAM errors, the recovery action, persistence, PCIe replays,
the fabric, the GPU count, the XIDs of the kernel log against `dmesg`).

    python3 tests/gpu/compare_facts.py AUDIT_JSON OUTDIR

Runs on a GPU node only (tests/gpu/run calls it after the audit); nvidia-smi is the reference
here, never a source of the facts. Its raw outputs are saved in OUTDIR (nvidia-smi-q.xml,
topo-m.txt, nvlink-s.txt, nvlink-e.txt, dmesg-xid.txt) beside facts-vs-nvidia-smi.md, the table of every comparison.
Exit 1 when a fact differs from nvidia-smi (temperature within 3 C: it moves between reads);
a field nvidia-smi does not show on this GPU is listed as not compared.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

GEN_GTS = {"1": 2.5, "2": 5.0, "3": 8.0, "4": 16.0, "5": 32.0, "6": 64.0}
TOPO_RELATION = {"PIX": "same_switch", "PXB": "same_switch", "PHB": "same_host_bridge",
                 "NODE": "across_host_bridges", "SYS": "across_cpus"}


def value(node):
    """A fact's value, or None when it is unknown."""
    if isinstance(node, dict) and "source" in node and "value" in node:
        return None if "unknown" in node else node["value"]
    return node


def smi(*args):
    return subprocess.run(["nvidia-smi"] + list(args), check=True, stdout=subprocess.PIPE,
                          universal_newlines=True).stdout


def bdf(text):
    """nvidia-smi's 00000000:00:06.0 as sysfs spells it: 0000:00:06.0."""
    domain, rest = text.strip().lower().split(":", 1)
    return "%04x:%s" % (int(domain, 16), rest)


def text(gpu, path):
    found = gpu.find(path)
    if found is None or found.text is None or found.text.strip() in ("N/A", "", "[N/A]"):
        return None
    return found.text.strip()


def number(raw):
    if raw is None:
        return None
    match = re.match(r"^\s*(-?[0-9.]+)", raw)
    return float(match.group(1)) if match else None


def first(gpu, *paths):
    for path in paths:
        found = text(gpu, path)
        if found is not None:
            return found
    return None


class Table:
    def __init__(self):
        self.rows = []

    def check(self, what, facts_value, smi_value, same=None):
        if smi_value is None:
            status = "not compared (nvidia-smi: N/A)"
        elif (same(facts_value, smi_value) if same else facts_value == smi_value):
            status = "ok"
        else:
            status = "DIFFERS"
        self.rows.append((what, facts_value, smi_value, status))

    @property
    def differs(self):
        return [row for row in self.rows if row[3] == "DIFFERS"]

    def markdown(self):
        lines = ["| what | node_facts | nvidia-smi | |", "|---|---|---|---|"]
        for what, fact, ref, status in self.rows:
            shown = ref if isinstance(ref, str) else json.dumps(ref)
            lines.append("| %s | %s | %s | %s |" % (what, json.dumps(fact), shown, status))
        return "\n".join(lines) + "\n"


def compare_gpu(table, gpu_fact, gpu_xml):
    label = "GPU %s %s" % (value(gpu_fact["index"]), value(gpu_fact["bdf"]))
    pcie = gpu_fact.get("pcie") or {}
    table.check(label + " name", value(gpu_fact["name"]), text(gpu_xml, "product_name"))
    persistence = text(gpu_xml, "persistence_mode")
    table.check(label + " persistence mode", value(gpu_fact["persistence_mode"]),
                None if persistence is None else persistence == "Enabled")
    ecc = text(gpu_xml, "ecc_mode/current_ecc")
    table.check(label + " ECC mode", value(gpu_fact["ecc_mode"]), None if ecc is None else ecc == "Enabled")
    pending = text(gpu_xml, "ecc_mode/pending_ecc")
    table.check(label + " ECC pending mode", value(gpu_fact["ecc_pending_mode"]),
                None if pending is None else pending == "Enabled")
    for fact_key, word in (("ecc_errors_uncorrected", "uncorrectable"), ("ecc_errors_corrected", "correctable")):
        counts = value(gpu_fact.get(fact_key)) or {}
        for period in ("volatile", "aggregate"):
            section = gpu_xml.find("ecc_errors/" + period)
            total = None
            if section is not None:
                numbers = [number(leaf.text) for leaf in section.iter() if len(leaf) == 0
                           and leaf.tag.endswith(word) and (word != "correctable" or "uncorrectable" not in leaf.tag)]
                numbers = [n for n in numbers if n is not None]
                total = int(sum(numbers)) if numbers else None
            table.check("%s ECC %s errors (%s)" % (label, word, period), value(counts.get(period)), total)
    gen = text(gpu_xml, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")
    table.check(label + " PCIe link speed GT/s", value(pcie.get("link_speed_gts")), GEN_GTS.get(gen) if gen else None)
    # sysfs max_link_speed is the GPU's own capability (Link Capabilities): nvidia-smi's
    # "Device Max" where it shows one, else its "Max".
    gen_max = first(gpu_xml, "pci/pci_gpu_link_info/pcie_gen/max_device_link_gen",
                    "pci/pci_gpu_link_info/pcie_gen/max_link_gen")
    table.check(label + " PCIe max link speed GT/s", value(pcie.get("max_link_speed_gts")),
                GEN_GTS.get(gen_max) if gen_max else None)
    width = text(gpu_xml, "pci/pci_gpu_link_info/link_widths/current_link_width")
    table.check(label + " PCIe link width", value(pcie.get("link_width")), int(number(width)) if width else None)
    width_max = text(gpu_xml, "pci/pci_gpu_link_info/link_widths/max_link_width")
    table.check(label + " PCIe max link width", value(pcie.get("max_link_width")),
                int(number(width_max)) if width_max else None)
    bar1 = text(gpu_xml, "bar1_memory_usage/total")
    table.check(label + " BAR1 MiB", value(gpu_fact.get("bar1_mib")), int(number(bar1)) if bar1 else None)
    mem_clock = text(gpu_xml, "max_clocks/mem_clock")
    table.check(label + " max memory clock MHz", value(gpu_fact.get("memory_max_clock_mhz")),
                int(number(mem_clock)) if mem_clock else None)
    for fact_key, tag in (("power_limit_w", "current_power_limit"), ("power_default_limit_w", "default_power_limit"),
                          ("power_min_limit_w", "min_power_limit"), ("power_max_limit_w", "max_power_limit")):
        raw = first(gpu_xml, "gpu_power_readings/" + tag, "power_readings/" + tag)
        table.check("%s %s" % (label, fact_key), value(gpu_fact.get(fact_key)), number(raw),
                    same=lambda a, b: a is not None and abs(float(a) - b) < 0.5)
    temp = text(gpu_xml, "temperature/gpu_temp")
    table.check(label + " temperature C (within 3)", value(gpu_fact.get("temperature_c")), number(temp),
                same=lambda a, b: a is not None and abs(a - b) <= 3)
    remap_pending = first(gpu_xml, "remapped_rows/remapped_row_pending", "remapped_rows/remapping_pending")
    table.check(label + " row remapping pending", value(gpu_fact.get("remapped_rows_pending")),
                None if remap_pending is None else remap_pending == "Yes")
    remap_failure = first(gpu_xml, "remapped_rows/remapped_row_failure", "remapped_rows/remapping_failure_occurred")
    table.check(label + " row remapping failure", value(gpu_fact.get("remapped_rows_failure")),
                None if remap_failure is None else remap_failure == "Yes")
    retired = text(gpu_xml, "retired_pages/pending_retirement")
    table.check(label + " retired pages pending", value(gpu_fact.get("retired_pages_pending")),
                None if retired is None else retired == "Yes")
    compare_health(table, label, gpu_fact, gpu_xml)
    reasons = gpu_xml.find("clocks_event_reasons")
    if reasons is None:
        reasons = gpu_xml.find("clocks_throttle_reasons")
    active = None
    if reasons is not None:
        active = sorted(re.sub(r"^clocks_(event|throttle)_reason_", "", leaf.tag).replace("display_clocks", "display_clock")
                        for leaf in reasons if (leaf.text or "").strip() == "Active")
        table.check(label + " GPU idle clock event", value(gpu_fact.get("clock_event_idle")), "gpu_idle" in active)
        active = [name for name in active if name != "gpu_idle"]
    table.check(label + " clock event reasons (not idle)", sorted(value(gpu_fact.get("clock_event_reasons")) or []),
                active)


RECOVERY = {"none": "none", "gpu reset": "gpu_reset", "reset": "gpu_reset", "node reboot": "node_reboot",
            "reboot": "node_reboot", "drain p2p": "drain_p2p", "drain and reset": "drain_and_reset"}


def _sram(gpu_xml, period):
    """Uncorrectable SRAM errors of one period (parity + SEC-DED), where nvidia-smi shows them."""
    found = [number(text(gpu_xml, "ecc_errors/%s/%s" % (period, tag)))
             for tag in ("sram_uncorrectable_parity", "sram_uncorrectable_secded")]
    found = [n for n in found if n is not None]
    if found:
        return int(sum(found))
    single = number(text(gpu_xml, "ecc_errors/%s/sram_uncorrectable" % period))
    return None if single is None else int(single)


def compare_health(table, label, gpu_fact, gpu_xml):
    """The health facts of one GPU against nvidia-smi -q -x."""
    pcie = gpu_fact.get("pcie") or {}
    for key, paths in (("remapped_rows_correctable", ("remapped_rows/remapped_row_corr", "remapped_rows/correctable_rows")),
                       ("remapped_rows_uncorrectable", ("remapped_rows/remapped_row_unc", "remapped_rows/uncorrectable_rows"))):
        raw = first(gpu_xml, *paths)
        table.check("%s %s" % (label, key), value(gpu_fact.get(key)), None if raw is None else int(number(raw)))
    replay = text(gpu_xml, "pci/replay_counter")
    table.check(label + " PCIe replay count", value(pcie.get("replay_count")), None if replay is None else int(number(replay)))
    for period in ("volatile", "aggregate"):
        table.check("%s SRAM uncorrectable errors (%s)" % (label, period),
                    value(gpu_fact.get("sram_uncorrected_" + period)), _sram(gpu_xml, period))
    exceeded = first(gpu_xml, "ecc_errors/aggregate/sram_threshold_exceeded", "ecc_errors/sram_threshold_exceeded")
    table.check(label + " SRAM threshold exceeded", value(gpu_fact.get("sram_threshold_exceeded")),
                None if exceeded is None else exceeded.lower() in ("yes", "true"))
    recovery = first(gpu_xml, "gpu_recovery_action", "recovery_action")
    table.check(label + " recovery action", value(gpu_fact.get("recovery_action")),
                None if recovery is None else RECOVERY.get(recovery.lower(), recovery.lower()))
    state = text(gpu_xml, "fabric/state")
    if state is None and gpu_xml.find("fabric/state") is not None:
        state = "not_supported"  # nvidia-smi prints N/A where the GPU has no fabric (PCIe, NVLink bridges)
    table.check(label + " fabric state", value(gpu_fact.get("fabric_state")),
                None if state is None else state.lower().replace(" ", "_"))


def nvlink_errors(output):
    """{gpu index: {link: {"replay", "recovery", "crc"}}} from `nvidia-smi nvlink -e`."""
    found, current = {}, None
    for line in output.splitlines():
        match = re.match(r"^GPU (\d+):", line)
        if match:
            current = int(match.group(1))
            found[current] = {}
            continue
        match = re.match(r"^\s+Link (\d+): (Replay|Recovery|CRC) Errors: (\d+)", line)
        if match and current is not None:
            found[current].setdefault(int(match.group(1)), {})[match.group(2).lower()] = int(match.group(3))
    return found


def nvlink_states(output):
    """{gpu index: {link: active}} from `nvidia-smi nvlink -s`."""
    states, current = {}, None
    for line in output.splitlines():
        match = re.match(r"^GPU (\d+):", line)
        if match:
            current = int(match.group(1))
            states[current] = {}
            continue
        match = re.match(r"^\s+Link (\d+): (.*)$", line)
        if match and current is not None:
            states[current][int(match.group(1))] = "inactive" not in match.group(2).lower()
    return states


def topo_matrix(output):
    """{(a, b): cell} from `nvidia-smi topo -m`, GPU rows and columns only."""
    output = re.sub(r"\x1b\[[0-9;]*m", "", output)  # the header is underlined on a terminal and off one
    lines = [line for line in output.splitlines() if line.strip()]
    header = lines[0].split()
    columns = [int(name[3:]) for name in header if re.match(r"^GPU\d+$", name)]
    cells = {}
    for line in lines[1:]:
        parts = line.split()
        if not parts or not re.match(r"^GPU\d+$", parts[0]):
            continue
        row = int(parts[0][3:])
        for column, cell in zip(columns, parts[1:1 + len(columns)]):
            cells[(row, column)] = cell
    return cells


def main():
    audit_path, out = sys.argv[1], sys.argv[2]
    with open(audit_path) as handle:
        facts = json.load(handle)["facts"]
    xml_text, topo, nvlink = smi("-q", "-x"), smi("topo", "-m"), smi("nvlink", "-s")
    nvlink_e = smi("nvlink", "-e")
    dmesg = subprocess.run(["dmesg"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                           check=False).stdout
    xid_lines = "".join(line + "\n" for line in dmesg.splitlines() if "NVRM: Xid" in line)
    for name, data in (("nvidia-smi-q.xml", xml_text), ("topo-m.txt", topo), ("nvlink-s.txt", nvlink),
                       ("nvlink-e.txt", nvlink_e), ("dmesg-xid.txt", xid_lines)):
        with open(os.path.join(out, name), "w") as handle:
            handle.write(data)
    root = ET.fromstring(xml_text)
    table = Table()
    table.check("driver version", value(facts["driver"]["version"]), text(root, "driver_version"))
    table.check("CUDA driver version", value(facts["driver"]["cuda_driver_version"]), text(root, "cuda_version"))
    xml_gpus = root.findall("gpu")
    by_bdf = dict((bdf(gpu.get("id")), (index, gpu)) for index, gpu in enumerate(xml_gpus))
    gpus = facts["gpus"] if isinstance(facts["gpus"], list) else []
    table.check("GPU count", len(gpus), len(xml_gpus))
    smi_index = {}
    for gpu in gpus:
        found = by_bdf.get(value(gpu["bdf"]))
        table.check("GPU %s BDF %s in nvidia-smi" % (value(gpu["index"]), value(gpu["bdf"])), True, found is not None)
        if found is None:
            continue
        smi_index[value(gpu["index"])] = found[0]
        table.check("GPU %s index" % value(gpu["bdf"]), value(gpu["index"]), found[0])
        compare_gpu(table, gpu, found[1])
    health = facts.get("health") or {}
    table.check("GPUs the driver counts", value(health.get("gpus_driver")), len(xml_gpus))
    table.check("GPUs on the PCI bus", value(health.get("gpus_pci")), len(xml_gpus))
    table.check("kernel log read (source)", value(health.get("kernel_log")) is not None, True)
    table.check("XIDs since boot (dmesg)", value(health.get("xid_total")), xid_lines.count("\n"))
    errors = nvlink_errors(nvlink_e)
    for gpu in gpus:
        counters = ("replay", "recovery", "crc")
        mine = dict((value(link["link"]), dict((name, value(link.get(name + "_errors"))) for name in counters))
                    for link in value(gpu.get("nvlink")) or [] if value(link["active"]))
        theirs = errors.get(smi_index.get(value(gpu["index"])), {})
        table.check("GPU %s NVLink error counters (nvlink -e)" % value(gpu["index"]), mine or None,
                    dict((link, counts) for link, counts in theirs.items() if link in mine) or None)
    links = nvlink_states(nvlink)
    for gpu in gpus:
        mine = dict((value(link["link"]), value(link["active"])) for link in value(gpu.get("nvlink")) or [])
        table.check("GPU %s NVLink links active" % value(gpu["index"]),
                    sorted(link for link, up in mine.items() if up),
                    sorted(link for link, up in links.get(smi_index.get(value(gpu["index"])), {}).items() if up))
    cells = topo_matrix(topo)
    for pair in value(facts["topology"].get("pairs")) or []:
        a, b = value(pair["a"]), value(pair["b"])
        cell = cells.get((smi_index.get(a), smi_index.get(b)))
        label = "GPUs %s-%s" % (a, b)
        if cell and cell.startswith("NV"):
            table.check(label + " link (topo %s)" % cell, value(pair["link"]), "nvlink")
            table.check(label + " NVLink count", value(pair["nvlink_count"]), int(cell[2:]))
        else:
            table.check(label + " link (topo %s)" % cell, value(pair["link"]), None if cell is None else "pcie")
            table.check(label + " relation", value(pair["relation"]), TOPO_RELATION.get(cell))
    report = ["# node_facts against nvidia-smi", "",
              "%d comparisons, %d differ; raw outputs: nvidia-smi-q.xml, topo-m.txt, nvlink-s.txt, nvlink-e.txt, "
              "dmesg-xid.txt."
              % (len(table.rows), len(table.differs)), "", table.markdown()]
    with open(os.path.join(out, "facts-vs-nvidia-smi.md"), "w") as handle:
        handle.write("\n".join(report))
    print("\n".join(report))
    return 1 if table.differs else 0


if __name__ == "__main__":
    sys.exit(main())
