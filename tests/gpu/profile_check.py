# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""On a real GPU node, after playbooks/audit.yml: the profile the facts chose, held against what
nvidia-smi says the node is, and the node's real figures against the profile's expectations.

    python3 tests/gpu/profile_check.py ARTIFACTS/HOST [--expect-platform hgx-hopper]

Reads HOST/profile.json and HOST/audit.json (read-only), runs ``nvidia-smi -q -x`` for the GPUs'
names and PCI device ids, and prints one line per comparison. Exit 1 when the platform differs
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("host_dir")
    parser.add_argument("--expect-platform")
    args = parser.parse_args()
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
    smi = smi_gpus()
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
