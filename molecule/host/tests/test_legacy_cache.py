# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bytecode cache an earlier version of the collection left (/var/cache/gpufleet-tuning,
planted by prepare_legacy_cache.yml) is gone after the first run, which says it changed; the
idempotence run and the check-mode run find nothing to remove."""

from __future__ import annotations

CACHE = "/var/cache/gpufleet-tuning"


def test_the_cache_is_gone(host):
    assert not host.file(CACHE).exists


def test_the_first_run_removed_it_and_the_later_ones_had_nothing_to_do(results):
    assert results("converge-1")["__host_legacy_cache"]["changed"] is True
    for run in ("converge-2", "check"):
        assert results(run)["__host_legacy_cache"]["changed"] is False, run
