"""report/anchors: the links of the fleet page land on the headings system-improve.md really has,
with the anchors a Markdown viewer gives them (GitHub's rule, the one the report itself uses for
its own ``#manual-steps`` link)."""

import glob
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_report import audit_report
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import anchors
from ansible_collections.gpufleet.tuning.tests.unit.plugins.plugin_utils import audit_cases as cases


@pytest.mark.parametrize("heading, slug", [
    ("Findings", "findings"),
    ("P0: high impact, fixable now", "p0-high-impact-fixable-now"),
    ("vm.swappiness (`swappiness_high`)", "vmswappiness-swappiness_high"),
    ("GPUDirect RDMA peer memory (nvidia_peermem) (`peermem_not_loaded`)",
     "gpudirect-rdma-peer-memory-nvidia_peermem-peermem_not_loaded"),
    ("IOMMU translation of Blackwell GPUs (never iommu=pt) (`iommu_translated_blackwell`)",
     "iommu-translation-of-blackwell-gpus-never-iommupt-iommu_translated_blackwell"),
    ("`--tags runtime`", "--tags-runtime"),
    ("Ünïcode  two  spaces", "ünïcode--two--spaces"),
])
def test_slugs_follow_the_github_rule(heading, slug):
    assert anchors.slug(anchors.rendered_text(heading)) == slug


def test_repeated_headings_are_numbered_as_github_numbers_them():
    slugger = anchors.Slugger()
    assert [slugger(t) for t in ("a", "a-1", "a", "a", "b")] == ["a", "a-1", "a-2", "a-3", "b"]


def test_headings_in_code_fences_are_not_headings():
    text = "# Top\n\n```\n# not a heading\n```\n\n## Findings\n"
    assert [h[2] for h in anchors.headings(text)] == ["top", "findings"]


@pytest.mark.parametrize("name", cases.NODES)
def test_every_finding_of_a_real_report_has_the_anchor_of_its_own_heading(name):
    audit = cases.audit(name)
    text = audit_report(audit)
    found = anchors.report_anchors(text)
    every = [anchor for _level, _raw, anchor in anchors.headings(text)]
    assert len(every) == len(set(every)), "anchors are unique in a document"
    lines = text.splitlines()
    for finding in audit["findings"]:
        anchor = found["rules"][finding["rule"]]
        heading = "#### %s (`%s`)" % (finding["title"], finding["rule"])
        assert heading in lines
        assert anchor == anchors.slug(anchors.rendered_text(heading[5:])), heading
    assert found["sections"]["findings"] == "findings" and found["sections"]["unknown"] == "unknown"
    assert set(found["severities"]) == set(f["severity"] for f in audit["findings"])


def test_the_checked_in_reports_have_every_section_the_page_links():
    for path in sorted(glob.glob(os.path.join(cases.FIXTURES, "*.md"))):
        if path.endswith("fleet-audit.md"):
            continue
        with open(path) as handle:
            found = anchors.report_anchors(handle.read())
        assert {"findings", "optimal", "unknown", "not_applicable", "manual"} <= set(found["sections"]), path


def test_a_finding_without_its_heading_gets_its_severity_then_the_findings_section():
    found = {"sections": {"findings": "findings"}, "severities": {"P1": "p1-x"}, "rules": {"a": "a-heading"}}
    assert anchors.finding_anchor(found, "a", "P0") == "a-heading"
    assert anchors.finding_anchor(found, "b", "P1") == "p1-x"
    assert anchors.finding_anchor(found, "b", "P2") == "findings"
    assert anchors.finding_anchor(None, "b", "P2") is None
