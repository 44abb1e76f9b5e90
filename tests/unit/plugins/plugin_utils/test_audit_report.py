"""gpufleet.tuning.audit_report: the Markdown rendered from fixed fact sets is compared, byte for
byte, with the checked-in reports in tests/unit/fixtures/audit/ (NAME.md for each node,
fleet-audit.md for three of them together).

After a deliberate change to the rules, the fixtures or the rendering, regenerate them and
review the diff before committing:

    GPUFLEET_REGENERATE_AUDIT_REPORTS=1 .venv-test/bin/python -m pytest -q tests/unit/plugins/plugin_utils/test_audit_report.py
    git diff tests/unit/fixtures/audit/
"""

import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_fleet import audit_fleet
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_report import audit_report
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils import audit_cases as cases

REGENERATE = os.environ.get("GPUFLEET_REGENERATE_AUDIT_REPORTS") == "1"
FLEET = ("untuned", "blackwell-pcie", "h200-nvlink")


def compare(text, name):
    path = os.path.join(cases.FIXTURES, name)
    if REGENERATE:
        with open(path, "w") as handle:
            handle.write(text)
    with open(path) as handle:
        expected = handle.read()
    assert text == expected, ("%s differs from the rendered report; if the change is meant, regenerate (see this "
                              "file's docstring) and review the diff" % os.path.relpath(path, cases.REPO))


@pytest.mark.parametrize("name", cases.NODES)
def test_the_host_report_is_the_checked_in_one(name):
    compare(audit_report(cases.audit(name)), name + ".md")


def test_the_fleet_report_is_the_checked_in_one():
    compare(audit_report(audit_fleet([cases.audit(name) for name in FLEET]), "fleet"), "fleet-audit.md")


def test_the_untuned_report_reads_like_an_expert_wrote_it():
    text = audit_report(cases.audit("untuned"))
    lines = text.splitlines()
    assert lines[0] == "# System improvement report: pve-gpu-01.example.net"
    assert "| GPUs | 4 x NVIDIA H100 80GB HBM3 (hopper) |" in lines
    assert "| Driver | 570.124.06 (open), CUDA 12.8 |" in lines
    assert "| Kernel | 6.8.12-8-pve |" in lines
    sections = [line for line in lines if line.startswith("## ")]
    assert sections == ["## Findings", "## Planned changes", "## Manual steps", "## Already optimal", "## Unknown",
                        "## Not applicable"]
    assert lines.index("### P0: high impact, fixable now") < lines.index("### P1: needs a reboot or a bigger change") \
        < lines.index("### P2: minor")
    assert "- GPU 0 (0000:01:00.0): MRRS is 512 bytes, below 4096" in lines
    assert "| sysctl_profile | vm.swappiness | 60 | 10 |" in lines
    assert "| kernel_cmdline | iommu | not set | pt |" in lines
    assert "- kernel_cmdline: waits for a reboot: iommu=pt (running: not set)" in lines
    assert "- lxc_memlock: a restart of 101 is needed before the change is live" in lines
    assert text.endswith("The audit changes nothing on the node.\n")


def test_the_blackwell_report_says_never_iommu_pt_where_it_matters():
    text = audit_report(cases.audit("blackwell-pcie"))
    assert "#### IOMMU translation of Blackwell GPUs (never iommu=pt) (`iommu_translated_blackwell`)" in text
    assert "do NOT switch it to identity" in text
    assert "- kernel_cmdline: left out iommu=pt: refused on NVIDIA Blackwell GPU" in text


def test_table_cells_are_escaped():
    audit = cases.audit("h200-nvlink")
    audit["planned"]["runtime"]["sysctl_profile"]["records"] = [
        {"area": "sysctl", "kind": "value", "target": "a|b", "before": "x\ny", "after": None}]
    assert "| sysctl_profile | a\\|b | x y | not set |" in audit_report(audit).splitlines()


def test_an_empty_audit_still_renders():
    text = audit_report({"host": "node1", "findings": [], "optimal": [], "unknown": [], "not_applicable": [],
                         "counts": {}, "planned": {}, "facts": {}})
    assert "## Findings\n\nNone." in text and "| GPUs | none found |" in text
    assert audit_report({"hosts": [], "findings": []}, "fleet").startswith("# Fleet audit\n\n0 hosts audited")


@pytest.mark.parametrize("data, kind, fragment", [
    ([], "host", "audit_report expects a dict"),
    ({}, "json", "kind must be host or fleet"),
])
def test_bad_input_is_refused(data, kind, fragment):
    with pytest.raises(AnsibleFilterError) as exc:
        audit_report(data, kind)
    assert fragment in str(exc.value)
