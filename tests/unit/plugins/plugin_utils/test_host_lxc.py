"""The host's container logic: which containers get the limit (lxc_targets.merge, what
gpufleet.tuning.lxc_memlock raises over a selection), and what the summary says."""

import pytest


from ansible_collections.gpufleet.tuning.plugins.plugin_utils.changes import change_summary
from ansible_collections.gpufleet.tuning.plugins.module_utils.common import records
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.host_lxc import lxc_memlock_report
from ansible_collections.gpufleet.tuning.plugins.module_utils import lxc_targets


def record(cid, selected, reason, **kw):
    base = {"id": str(cid), "manager": "proxmox", "vmid": int(cid), "container_name": str(cid), "hostname": None,
            "path": "/etc/pve/lxc/%s.conf" % cid, "lxc_path": None, "selected": selected, "reason": reason}
    base.update(kw)
    return base


DISCOVERY = {
    "changed": False, "lxc_host": True, "managers": ["proxmox"], "sources": ["/etc/pve/lxc"], "unmatched": [],
    "containers": [
        record(101, True, "NVIDIA GPU passed through (dev0: /dev/nvidia0)", hostname="llm-serve-01"),
        record(103, True, "NVIDIA GPU passed through (dev0: /dev/nvidia0)", hostname="llm-serve-03"),
        record(104, False, "no NVIDIA GPU passed through", hostname="web-01"),
        record(900, False, "a template (template: 1), not a serving container"),
        {"id": "serving", "manager": "lxc", "vmid": None, "container_name": "serving", "hostname": "serving",
         "path": "/srv/lxc/serving/config", "lxc_path": "/srv/lxc", "selected": True, "reason": "tagged x"},
    ],
}


# --- targets -----------------------------------------------------------------------------------

def test_discovered_targets_by_vmid_or_path():
    targets = lxc_targets.merge(DISCOVERY)
    assert targets == [
        {"vmid": 101, "label": "101 (llm-serve-01)", "source": "selected: NVIDIA GPU passed through (dev0: /dev/nvidia0)"},
        {"vmid": 103, "label": "103 (llm-serve-03)", "source": "selected: NVIDIA GPU passed through (dev0: /dev/nvidia0)"},
        {"path": "/srv/lxc/serving/config", "label": "serving", "source": "selected: tagged x"},
    ]


def test_each_config_once_and_a_given_limit_wins():
    containers = [{"guest": "llm-serve-01.example.net", "vmid": 101, "limit": "68719476736"},
                  {"guest": "llm-serve-09.example.net", "vmid": 109, "limit": "unlimited"},
                  {"path": "/etc/pve/lxc/103.conf", "limit": "1024:unlimited"}, {"name": "web"},
                  {"path": "/var/lib/lxc/web/config"}, {"vmid": "104"}]
    targets = lxc_targets.merge(DISCOVERY, containers)
    assert [t["label"] for t in targets] == [
        "101 (llm-serve-01)", "103 (llm-serve-03)", "serving", "109 (llm-serve-09.example.net)", "web", "104"]
    assert targets[0]["limit"] == "68719476736" and targets[0]["vmid"] == 101
    assert targets[0]["source"].endswith("; inventory host llm-serve-01.example.net")
    assert targets[1]["limit"] == "1024:unlimited" and targets[1]["source"].endswith("; listed in containers")
    assert "limit" not in targets[2]
    assert targets[4] == {"name": "web", "label": "web", "source": "listed in containers"}
    # The inventory host of a container stays with it, found first by discovery or not, so a
    # play on that host finds what was done for it (a rollout's container step).
    assert [t.get("guest") for t in targets] == [
        "llm-serve-01.example.net", None, None, "llm-serve-09.example.net", None, None]


def test_nothing_discovered_is_fine():
    assert lxc_targets.merge({}) == []
    assert lxc_targets.merge({"skipped": True}, [{"vmid": 101}]) == [
        {"vmid": 101, "label": "101", "source": "listed in containers"}]


@pytest.mark.parametrize("containers, message", [
    ([{"vmdi": 101}], "unknown key(s) vmdi"),
    ([{"vmid": 101, "name": "x"}], "2 of vmid, name, path given"),
    ([{}], "0 of vmid, name, path given"),
    ([101], "is not valid: each container is a dict"),
    ([{"vmid": "abc"}], "vmid 'abc' is not valid"),
    ([{"vmid": True}], "vmid True is not valid"),
    ([{"path": "/etc/pve/lxc/101.conf", "guest": "ct1"}], "must name its container by vmid or name"),
])
def test_bad_entries_name_the_entry(containers, message):
    with pytest.raises(lxc_targets.TargetError) as exc:
        lxc_targets.merge(DISCOVERY, [{"vmid": 101}] + containers)
    assert "containers[1]" in str(exc.value) and message in str(exc.value)


# --- report ------------------------------------------------------------------------------------

def item(label, source="selected: x", **kw):
    return {"label": label, "source": source, **kw}


def memlock(*results):
    return {"changed": any(r.get("changed") for r in results), "results": list(results)}


TUNED = {"changed": True, "path": "/etc/pve/lxc/101.conf", "container_name": "101", "limit_before": None,
         "limit_after": "unlimited", "restart_required": True, "limit_running": "8388608", "pending": False,
         "item": item("101 (llm-serve-01)", "selected: NVIDIA GPU passed through (dev0: /dev/nvidia0)")}
PENDING = {"changed": False, "path": "/etc/pve/lxc/103.conf", "container_name": "103", "limit_before": "65536",
           "limit_after": "65536", "restart_required": False, "pending": True,
           "pending_reason": "container 103 is locked by Proxmox (lock: backup): a backup (vzdump) is running; "
                             "run again when it has finished (or `pct unlock 103` if the lock is stale)",
           "item": item("103 (llm-serve-03)")}
ALREADY = {"changed": False, "path": "/srv/lxc/serving/config", "container_name": "serving",
           "limit_before": "unlimited", "limit_after": "unlimited", "restart_required": False, "pending": False,
           "item": item("serving", "selected: tagged x")}
FAILED = {"failed": True, "msg": "container config /etc/pve/lxc/109.conf does not exist", "item": item("109")}


def test_report_names_every_container():
    lines = lxc_memlock_report(DISCOVERY, memlock(TUNED, PENDING, ALREADY, FAILED))
    assert lines == [
        "containers: tuned 101 (llm-serve-01): lxc.prlimit.memlock (none, LXC's default) -> unlimited "
        "[selected: NVIDIA GPU passed through (dev0: /dev/nvidia0)]",
        "containers: 101 (llm-serve-01): restart pending: the running container still has memlock 8388608; it gets "
        "the new limit at its next start (host_lxc_restart_ok=true lets the role restart it)",
        "containers: PENDING 103 (llm-serve-03): container 103 is locked by Proxmox (lock: backup): a backup "
        "(vzdump) is running; run again when it has finished (or `pct unlock 103` if the lock is stale)",
        "containers: serving already has lxc.prlimit.memlock unlimited [selected: tagged x]",
        "containers: FAILED 109: container config /etc/pve/lxc/109.conf does not exist",
        "containers: left alone 104 (web-01): no NVIDIA GPU passed through",
        "containers: left alone 900: a template (template: 1), not a serving container",
    ]


def test_report_restart_allowed_and_check_mode_wording():
    lines = lxc_memlock_report(DISCOVERY, memlock(TUNED), True, True)
    assert lines[0].startswith("containers: would tune 101 (llm-serve-01): lxc.prlimit.memlock")
    assert lines[1] == ("containers: 101 (llm-serve-01): would be restarted at the end of the play to apply the "
                        "new limit (host_lxc_restart_ok)")
    lines = lxc_memlock_report(DISCOVERY, memlock(TUNED), True, False)
    assert "restarted at the end of the play" in lines[1] and "would" not in lines[1]


def test_a_container_named_by_hand_is_not_also_left_alone():
    web = dict(ALREADY, path="/etc/pve/lxc/104.conf", container_name="104",
               item=item("104", "listed in host_lxc_containers"))
    lines = lxc_memlock_report(DISCOVERY, memlock(web))
    assert not any("left alone 104" in line for line in lines)
    assert "containers: 104 already has lxc.prlimit.memlock unlimited [listed in host_lxc_containers]" in lines


def test_report_when_nothing_is_selected_or_nothing_ran():
    # the loop had no item: every container is still named
    empty_loop = {"changed": False, "skipped": True, "skipped_reason": "No items in the list", "results": []}
    none = dict(DISCOVERY, containers=[record(104, False, "the selector is none")])
    assert lxc_memlock_report(none, empty_loop) == ["containers: left alone 104: the selector is none"]
    # neither task ran (another tag): nothing to say
    assert lxc_memlock_report({}, {}) == []
    assert lxc_memlock_report({"skipped": True, "false_condition": "x"}, {}) == []
    not_lxc = {"changed": False, "lxc_host": False, "containers": [], "sources": [], "unmatched": []}
    assert lxc_memlock_report(not_lxc, empty_loop) == ["containers: none: not a Proxmox VE or LXC host"]
    bare = dict(not_lxc, lxc_host=True, sources=["/etc/pve/lxc"])
    assert lxc_memlock_report(bare, empty_loop) == ["containers: none found (read /etc/pve/lxc)"]


def test_report_unmatched_terms_and_a_failed_discovery():
    lines = lxc_memlock_report(dict(DISCOVERY, containers=[], unmatched=["999", "tag:llm"]), {})
    assert lines == ["containers: selector term(s) 999, tag:llm named no container on this host"]
    lines = lxc_memlock_report({"failed": True, "msg": "select term 'x/y' is not valid"}, {})
    assert lines == ["containers: FAILED to list this host's containers: select term 'x/y' is not valid"]


def test_change_summary_names_the_container_of_each_item():
    looped = memlock(dict(TUNED, changes=[records.file_change("lxc_memlock", "/etc/pve/lxc/101.conf", "a", "b")]),
                     PENDING)
    assert change_summary({"lxc_memlock": looped}) == [
        "lxc_memlock 101: wrote /etc/pve/lxc/101.conf",
        "lxc_memlock 101: a restart is required for this to take effect",
    ]
