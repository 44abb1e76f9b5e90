# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health verdict published for node_exporter's textfile collector (role
gpufleet.tuning.health, vars_health.yml): converge, the idempotence run and the check-mode run
leave one gpufleet.prom, whole, in the textfile directory. The container has no GPU: its verdict
is healthy, every status and action written with its value."""

from __future__ import annotations

import re

DIRECTORY = "/var/lib/prometheus/node-exporter"
PROM = DIRECTORY + "/gpufleet.prom"


def samples(text):
    """{(name, labels text): value} of the exposition text."""
    found = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        assert match, "not a sample line: %r" % line
        found[(match.group(1), match.group(2) or "")] = match.group(3)
    return found


def test_the_verdict_file_is_there_whole_and_alone(host):
    prom = host.file(PROM)
    assert prom.is_file and prom.user == "root" and prom.mode == 0o644
    assert host.file(DIRECTORY).listdir() == ["gpufleet.prom"], "a temporary file was left behind"
    text = prom.content_string
    assert text.startswith("# Managed by gpufleet.tuning") and text.endswith("\n")


def test_the_healthy_container_s_metrics(host):
    found = samples(host.file(PROM).content_string)
    assert found[("gpufleet_health_status", '{status="healthy"}')] == "1"
    assert found[("gpufleet_health_status", '{status="quarantined"}')] == "0"
    assert found[("gpufleet_health_blocking", "")] == "0"
    for action in ("monitor", "reset_gpu", "reboot", "drain", "rma"):
        assert found[("gpufleet_health_findings", '{action="%s"}' % action)] == "0"
    assert float(found[("gpufleet_last_audit_timestamp_seconds", "")]) > 1.7e9
    # the host role ran in the same play: the tuning time is there too
    assert ("gpufleet_last_tuning_timestamp_seconds", "") in found
    assert not [key for key in found if key[0] == "gpufleet_gpu_health_status"]  # no GPU here
