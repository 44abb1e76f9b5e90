# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""On a real GPU node, after playbooks/audit.yml: the profile the facts chose, held against what
nvidia-smi says the node is, and the node's real figures against the profile's expectations.

    python3 tests/gpu/profile_check.py ARTIFACTS/HOST [--expect-platform hgx-hopper]
    .venv-test/bin/python tests/gpu/profile_check.py --from-audit docs/examples/h200-x2/audit.json \
        --expect-platform hgx-hopper      # the choice replayed from a recorded audit's facts

Reads HOST/profile.json and HOST/audit.json (read-only), runs ``nvidia-smi -q -x`` for the GPUs'
names and PCI device ids, and prints one line per comparison. With --from-audit, the profile is
chosen here, from the facts a recorded audit.json keeps (the shipped profiles, the throughput
intent), and nvidia-smi is not run. Exit 1 when the platform differs
from --expect-platform, a GPU's device id or name differs from nvidia-smi's, a GPU is not a model
of the chosen platform, or a facts-only expectation (GPU count, NVLinks, memory bandwidth) is
outside. Changes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET  # nosec B405: nvidia-smi's own output


def smi_gpus():
    """[(bus id, device id 10de:xxxx, name)] from nvidia-smi -q -x, or [] without nvidia-smi."""
    try:
        text = subprocess.run(["nvidia-smi", "-q", "-x"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              check=True, universal_newlines=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    root = ET.fromstring(text)  # nosec B314: nvidia-smi's own output
    out = []
    for gpu in root.findall("gpu"):
        pci = gpu.find("pci")
        device = ((pci.findtext("pci_device_id") or "") if pci is not None else "").strip().lower()
        device = device[2:] if device.startswith("0x") else device
        # 233010DE (0x233010DE in some drivers): device id in the high half, vendor in the low half
        device_id = "10de:%s" % device[:4] if len(device) == 8 and device.endswith("10de") else None
        out.append((gpu.get("id"), device_id, gpu.findtext("product_name")))
    return out


def replay(audit):
    """The profile the shipped profiles give the facts of a recorded audit (throughput intent)."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(repo, ".collections"))
    # pylint: disable=import-outside-toplevel
    from ansible_collections.gpufleet.tuning.plugins.plugin_utils import node_normal, profile_data, profile_node
    from ansible_collections.gpufleet.tuning.plugins.plugin_utils import profile_select
    profiles = profile_data.load_dir(os.path.join(repo, "roles", "profile", "files"))
    node = profile_node.describe(audit["facts"])
    profile = profile_select.select(node, profiles)
    profile["checks"] = [c for c in node_normal.absolute(profile, node, [])
                         if c["check"] in ("gpu_count", "nvlink_links", "memory_bandwidth")]
    return profile


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("host_dir", nargs="?")
    parser.add_argument("--expect-platform")
    parser.add_argument("--from-audit", help="choose from this audit.json's facts instead")
    args = parser.parse_args()
    if args.from_audit:
        with open(args.from_audit) as handle:
            audit = json.load(handle)
        profile = replay(audit)
        audit["profile"] = {"name": profile["name"]}
    else:
        with open(os.path.join(args.host_dir, "profile.json")) as handle:
            profile = json.load(handle)
        with open(os.path.join(args.host_dir, "audit.json")) as handle:
            audit = json.load(handle)
    bad = 0

    def line(ok, what, detail):
        nonlocal bad
        bad += 0 if ok else 1
        print("%-6s %-34s %s" % ("ok" if ok else "DIFFER", what, detail))

    print("profile %s (%s)" % (profile["name"], profile.get("description")))
    for reason in profile["reasons"]:
        print("  - %s" % reason)
    node = profile["node"]
    print("node: kind %s (%s); interconnect %s (%s); CPU vendor %s; %s online CPUs"
          % (node["kind"], node["kind_why"], node["interconnect"], ", ".join(node["interconnects"]),
             node["cpu_vendor"], node["cpu_count"]))
    if args.expect_platform:
        line(profile["platform"] == args.expect_platform, "platform", "%s (expected %s)"
             % (profile["platform"], args.expect_platform))
    smi = smi_gpus() if not args.from_audit else [
        (g["bdf"], g["device_id"], g["name"]) for g in node["gpus"]]  # the recorded facts are the reference
    line(len(smi) == node["gpu_count"], "GPU count vs nvidia-smi", "%d in the facts, %d in nvidia-smi"
         % (node["gpu_count"], len(smi)))
    models = dict((d.lower(), m["model"]) for m in profile["expectations"].get("models") or [] for d in m.get("device_ids") or [])
    for gpu, (bus, device_id, name) in zip(node["gpus"], smi):
        line(gpu["device_id"] == device_id, "device id %s" % gpu["bdf"], "%s (nvidia-smi %s, %s)" % (gpu["device_id"], device_id, bus))
        line(gpu["name"] == name, "name %s" % gpu["bdf"], "%r (nvidia-smi %r)" % (gpu["name"], name))
        if profile["platform"] != "base":
            line(gpu["device_id"] in models, "model of %s" % profile["platform"], models.get(gpu["device_id"], "none"))
    for check in profile.get("checks") or []:
        status = check["status"]
        line(status != "outside", "%s%s" % (check["check"], (" " + check["item"]) if check.get("item") else ""),
             "%s: %s" % (status, check["message"]))
    print("settings (layer):")
    for key in sorted(profile["settings"]):
        print("  %s = %s  (%s)" % (key, json.dumps(profile["settings"][key]), profile["sources"][key]))
    rails = ", ".join(r["name"] for r in profile["guard_rails"])
    print("guard rails: %s; violations: %s" % (rails, profile["violations"] or "none"))
    print("audit.json keeps the profile: %s" % ((audit.get("profile") or {}).get("name") == profile["name"]))
    bad += 0 if (audit.get("profile") or {}).get("name") == profile["name"] else 1
    print("%d difference(s)" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
