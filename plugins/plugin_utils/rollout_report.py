# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet rollout's reports: rollout-<run id>.json, .md and .xml (JUnit).

playbooks/rollout.yml hands one dict, ``rollout``, to these three filters at its end. All three
start from the same check (``rollout_result``), so the JSON, the page and the JUnit file can
never disagree about a count, a verdict or which hosts were left alone:

- the dict is checked against the contract before anything is rendered, and a key or value
  that breaks it (an unknown status, a host in a batch but not in ``hosts``, a host marked
  untouched in a batch that ran, a failed host in a batch after which the rollout went on)
  fails naming it: a report that quietly says "completed" over a typo (``stoped_after_batch``)
  is worse than none;
- the verdict, the counts and each batch's outcome are computed here, once, and written into
  the JSON, so a dashboard reads them instead of re-deriving them;
- the page stays readable for hundreds of hosts: failed and unreachable hosts in full, tuned
  hosts with something to look at (drift, a failed check) in full, the rest in one table with
  their changes grouped (one line per distinct change, with the hosts that got it), and the
  hosts not touched grouped by the batch they were planned in;
- the JUnit file is built with xml.etree (escaped, characters XML 1.0 cannot carry replaced
  by their escapes), with every count taken from the children it writes.

The rollout's text (host names, check messages, failure messages, change targets and values)
comes from the nodes and the play: every string of the checked rollout is cleaned (node_text: no
control or bidi character, bounded length; the checks name a bad value as it was given), so the
JSON, the page and the JUnit file carry the same plain text. The page then Markdown-escapes each
value (markdown_text: ``escape``, and ``code`` for a target), so a host named ``<img src=x
onerror=...>`` or a message holding ``[x](javascript:...)`` is shown as that text; it has no
link at all.

Nothing here reads the clock or the machine: the same rollout renders the same bytes. The
filters rollout_result, rollout_markdown and rollout_junit (plugins/filter/rollout.py) are thin
wrappers over this file; tests and other controller code (the fleet page's test fleet) import it
here, never from a filter plugin.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.module_utils.common.numbers import NumberError, finite_number
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.records import KEYS as CHANGE_KEYS
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.records import KINDS as CHANGE_KINDS
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import markdown_text
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_rules import ACTIONS as HEALTH_ACTIONS
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.health_verdict import PHASES as HEALTH_PHASES
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.health_verdict import POLICIES as HEALTH_POLICIES
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.health_verdict import STATUSES as HEALTH_STATUSES
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.node_text import TEXT_LIMIT, clean, clean_tree

# quarantined: the health gate found the host's hardware at fault (before the tuning, or after a
# failure past the gate): not tuned further, never reverted as a regression, and no failure of the
# rollout (the gate stops it only for a canary, or under gpufleet_health_policy stop).
HOST_STATUSES = ("tuned", "unchanged", "quarantined", "failed", "unreachable", "untouched")
CHECK_STATUSES = ("passed", "failed", "error", "skipped")
RUN_ID_RE = re.compile(r"[A-Za-z0-9._-]+\Z")
MAX_SECONDS = 7 * 24 * 3600  # a check's time_s: longer than any check runs, a bound against nonsense only

# Keys of the input; the derived keys are what rollout_result adds, accepted (and computed
# again) so that its own result can be passed to the other two filters.
TOP_KEYS = ("run_id", "started", "finished", "canary", "serial", "revert_on_failure", "check_mode", "batches",
            "stopped_after_batch", "stop_reason", "hosts")
TOP_DERIVED = ("status", "verdict", "counts", "health", "batch_outcomes")
HOST_KEYS = ("status", "batch", "checks", "changes", "verified", "verify_failures", "reverted", "revert",
             "failure", "drift", "health")
HOST_DERIVED = ("failed_check", "reason")
CHECK_KEYS = ("name", "status", "message", "time_s")
# Drift and restored items come from gpufleet.tuning.tuning_state and tuning_revert: their kind
# is the item's way back (sysctl, sysfs, file, kmod...), a file's state may be shown as text
# already, and they carry more (key, reboot, recorded_by), kept as they are.
DRIFT_STATES = ("recorded", "current")
RESTORED_STATES = ("before", "current")
REVERT_KEYS = ("restored", "failed", "pending_reboot")
FILE_STATE_KEYS = ("sha256", "size", "mode")
FAILURE_KEYS = ("stage", "task", "message")
# A host's health as the rollout keeps it (roles/rollout/vars/main.yml __rollout_health: the
# verdict of plugin_utils/health_verdict.py cut to these keys, each finding to one line's).
HEALTH_KEYS = ("status", "policy", "phase", "actions", "blocking", "findings")
HEALTH_FINDING_KEYS = ("rule", "item", "message", "action", "blocking")
HEALTH_CHECK = "health"

# How many names a phrase lists before it says "and N more".
NAMES_IN_VERDICT = 3
NAMES_IN_CELL = 10
NAMES_PER_CHANGE = 6

JUNIT_SUITES = "gpufleet-rollout"
JUNIT_CLASS = "gpufleet.rollout."
# Characters XML 1.0 cannot carry, not even escaped (control characters, lone surrogates).
_XML_BAD = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


# ------------------------------------------------------------------------------ checking

def _fail(who, path, value, wanted):
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:60] + "..." + shown[-12:]
    raise AnsibleFilterError("%s: %s=%s %s" % (who, path, shown, wanted))


def _keys(who, path, node, allowed, derived=()):
    if not isinstance(node, dict):
        _fail(who, path, node, "is not a dict")
    unknown = [key for key in node if key not in allowed and key not in derived]
    if unknown:
        raise AnsibleFilterError("%s: %s has an unknown key %r: the keys are %s" % (
            who, path, unknown[0], ", ".join(allowed)))


def _text(who, path, value, optional=True, empty=True):
    if value is None and optional:
        return None
    if not isinstance(value, str) or (not empty and not value):
        _fail(who, path, value, "is not %s" % ("a non-empty string" if not empty else "a string"))
    return str(value)


def _bool(who, path, value, default):
    if value is None:
        return default
    if not isinstance(value, bool):
        _fail(who, path, value, "is not true or false")
    return value


def _list(who, path, value):
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        _fail(who, path, value, "is not a list")
    return list(value)


def _int(who, path, value, low, high=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        _fail(who, path, value, "is not an integer from %d%s" % (low, " to %d" % high if high is not None else " up"))
    return int(value)


def _scalar(who, path, value):
    if value is not None and (isinstance(value, (dict, list, tuple)) or not isinstance(value, (str, int, float))):
        _fail(who, path, value, "is not a string, a number or null")
    return value


def _file_state(who, path, value):
    """null (absent), {sha256, size, mode?} or {link: target}."""
    if value is None:
        return None
    if isinstance(value, dict) and set(value) == {"link"}:
        return {"link": _text(who, path + ".link", value["link"], optional=False)}
    if not isinstance(value, dict) or "sha256" not in value or not set(value) <= set(FILE_STATE_KEYS):
        _fail(who, path, value, "is not a file state: null (absent), {sha256, size, mode} or {link}")
    state = {"sha256": _text(who, path + ".sha256", value["sha256"], optional=False, empty=False)}
    if value.get("size") is not None:
        state["size"] = _int(who, path + ".size", value["size"], 0)
    if value.get("mode") is not None:
        state["mode"] = str(_scalar(who, path + ".mode", value["mode"]))
    return state


def _state(who, path, kind, value):
    return _file_state(who, path, value) if kind == "file" else _scalar(who, path, value)


def _change(who, path, node):
    """A change record (module_utils/common/records.py): exactly its keys, a known kind, a file
    state for a file record."""
    _keys(who, path, node, CHANGE_KEYS)
    missing = [key for key in CHANGE_KEYS if key not in node]
    if missing:
        raise AnsibleFilterError("%s: %s lacks %r: a change record has %s" % (
            who, path, missing[0], ", ".join(CHANGE_KEYS)))
    kind = node["kind"]
    if kind not in CHANGE_KINDS:
        _fail(who, path + ".kind", kind, "is not one of %s" % ", ".join(CHANGE_KINDS))
    return {"area": _text(who, path + ".area", node["area"]), "kind": kind,
            "target": _text(who, path + ".target", node["target"], optional=False, empty=False),
            "before": _state(who, path + ".before", kind, node["before"]),
            "after": _state(who, path + ".after", kind, node["after"])}


def _observed(who, path, node, states):
    """A drift or restored item: a target, an area and kind if given, each of ``states`` a value,
    a text or a file state; the other keys kept as given."""
    if not isinstance(node, dict):
        _fail(who, path, node, "is not a dict")
    out = dict(node)
    out["target"] = _text(who, path + ".target", node.get("target"), optional=False, empty=False)
    out["area"] = _text(who, path + ".area", node.get("area"))
    out["kind"] = _text(who, path + ".kind", node.get("kind"))
    for key in states:
        value = node.get(key)
        out[key] = _file_state(who, "%s.%s" % (path, key), value) if isinstance(value, dict) else \
            _scalar(who, "%s.%s" % (path, key), value)
    return out


def _check(who, path, node):
    _keys(who, path, node, CHECK_KEYS)
    name = _text(who, path + ".name", node.get("name"), optional=False, empty=False)
    status = node.get("status")
    if status not in CHECK_STATUSES:
        _fail(who, path + ".status", status, "is not one of %s" % ", ".join(CHECK_STATUSES))
    time_s = node.get("time_s")
    if time_s is not None:
        try:
            time_s = finite_number(path + ".time_s", time_s, 0, MAX_SECONDS)
        except NumberError as exc:
            raise AnsibleFilterError("%s: %s" % (who, exc))
    return {"name": name, "status": status, "message": _text(who, path + ".message", node.get("message")) or "",
            "time_s": time_s}


def _revert(who, path, node):
    if node is None:
        return None
    _keys(who, path, node, REVERT_KEYS)
    pending = _list(who, path + ".pending_reboot", node.get("pending_reboot"))
    return {
        "restored": [_observed(who, "%s.restored[%d]" % (path, index), item, RESTORED_STATES)
                     for index, item in enumerate(_list(who, path + ".restored", node.get("restored")))],
        "failed": [_failed_restore(who, "%s.failed[%d]" % (path, index), item)
                   for index, item in enumerate(_list(who, path + ".failed", node.get("failed")))],
        "pending_reboot": [_text(who, "%s.pending_reboot[%d]" % (path, index), item, optional=False)
                           for index, item in enumerate(pending)],
    }


def _failed_restore(who, path, node):
    _keys(who, path, node, ("target", "message"))
    return {"target": _text(who, path + ".target", node.get("target"), optional=False, empty=False),
            "message": _text(who, path + ".message", node.get("message")) or ""}


def _failure(who, path, node):
    if node is None:
        return None
    _keys(who, path, node, FAILURE_KEYS)
    return dict((key, _text(who, "%s.%s" % (path, key), node.get(key)) or "") for key in FAILURE_KEYS)


def _action(who, path, value, optional=False):
    if value is None and optional:
        return None
    if value not in HEALTH_ACTIONS:
        _fail(who, path, value, "is not one of %s" % ", ".join(HEALTH_ACTIONS))
    return value


def _health_finding(who, path, node):
    _keys(who, path, node, HEALTH_FINDING_KEYS)
    item = node.get("item")
    return {"rule": _text(who, path + ".rule", node.get("rule"), optional=False, empty=False),
            "item": None if item is None else str(_scalar(who, path + ".item", item)),
            "message": _text(who, path + ".message", node.get("message")) or "",
            "action": _action(who, path + ".action", node.get("action"), optional=True),
            "blocking": _bool(who, path + ".blocking", node.get("blocking"), False)}


def _health(who, path, node):
    """The host's health verdict as the rollout keeps it (HEALTH_KEYS), null when not judged."""
    if node is None:
        return None
    _keys(who, path, node, HEALTH_KEYS)
    status = node.get("status")
    if status not in HEALTH_STATUSES:
        _fail(who, path + ".status", status, "is not one of %s" % ", ".join(HEALTH_STATUSES))
    policy = node.get("policy")
    if policy is not None and policy not in HEALTH_POLICIES:
        _fail(who, path + ".policy", policy, "is not one of %s" % ", ".join(HEALTH_POLICIES))
    phase = node.get("phase")
    if phase is not None and phase not in HEALTH_PHASES:
        _fail(who, path + ".phase", phase, "is not one of %s" % ", ".join(HEALTH_PHASES))
    blocking = _bool(who, path + ".blocking", node.get("blocking"), status == "quarantined")
    if blocking != (status == "quarantined"):
        _fail(who, path + ".blocking", blocking, "contradicts status %s: a health verdict blocks exactly when it is "
              "quarantined" % status)
    actions = [_action(who, "%s.actions[%d]" % (path, index), item)
               for index, item in enumerate(_list(who, path + ".actions", node.get("actions")))]
    return {"status": status, "policy": policy, "phase": phase, "actions": actions, "blocking": blocking,
            "findings": [_health_finding(who, "%s.findings[%d]" % (path, index), item)
                         for index, item in enumerate(_list(who, path + ".findings", node.get("findings")))]}


def _host(who, name, node):
    path = "hosts.%s" % name
    _keys(who, path, node, HOST_KEYS, HOST_DERIVED)
    status = node.get("status")
    if status not in HOST_STATUSES:
        _fail(who, path + ".status", status, "is not one of %s" % ", ".join(HOST_STATUSES))
    batch = node.get("batch")
    if batch is not None:
        batch = _int(who, path + ".batch", batch, 1)
    host = {
        "status": status,
        "batch": batch,
        "checks": [_check(who, "%s.checks[%d]" % (path, index), item)
                   for index, item in enumerate(_list(who, path + ".checks", node.get("checks")))],
        "changes": [_change(who, "%s.changes[%d]" % (path, index), item)
                    for index, item in enumerate(_list(who, path + ".changes", node.get("changes")))],
        "verified": node.get("verified"),
        "verify_failures": [_text(who, "%s.verify_failures[%d]" % (path, index), item, optional=False)
                            for index, item in enumerate(_list(who, path + ".verify_failures",
                                                               node.get("verify_failures")))],
        "reverted": _bool(who, path + ".reverted", node.get("reverted"), False),
        "revert": _revert(who, path + ".revert", node.get("revert")),
        "failure": _failure(who, path + ".failure", node.get("failure")),
        "drift": [_observed(who, "%s.drift[%d]" % (path, index), item, DRIFT_STATES)
                  for index, item in enumerate(_list(who, path + ".drift", node.get("drift")))],
        "health": _health(who, path + ".health", node.get("health")),
        # an untouched host's reason as its outcome gave it (the gate's words), completed later
        "reason": _text(who, path + ".reason", node.get("reason")) if status == "untouched" else None,
    }
    verified = host["verified"]
    if verified is not None and not isinstance(verified, bool):
        _fail(who, path + ".verified", verified, "is not true, false or null")
    if status in ("tuned", "unchanged"):
        if "verified" not in node:
            host["verified"] = True
        elif verified is not True:
            _fail(who, path + ".verified", verified, "contradicts status %s (verified on this host): give true" % status)
    if host["reverted"] and status not in ("failed", "unreachable"):
        _fail(who, path + ".reverted", True, "contradicts status %s: only a failed or unreachable host is reverted%s"
              % (status, " (a quarantined host's tuning is left for its repair)" if status == "quarantined" else ""))
    if status == "quarantined" and not (host["health"] and host["health"]["blocking"]):
        _fail(who, path + ".health", node.get("health"), "is not a blocking health verdict, but the host is quarantined "
              "(its health.status is quarantined)")
    if status == "untouched":
        for key in ("checks", "changes", "verify_failures", "drift"):
            if host[key]:
                _fail(who, "%s.%s" % (path, key), node.get(key), "is not empty, but the host is untouched")
        for key in ("verified", "revert", "failure", "health"):
            if host[key] is not None:
                _fail(who, "%s.%s" % (path, key), node.get(key), "is not null, but the host is untouched")
    return host


def _serial(who, value):
    """As the user gave it: an integer, a text ("25%") or Ansible's list of those."""
    if value is None:
        return None
    items = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, str)) or (isinstance(item, int) and item < 1) \
                or (isinstance(item, str) and not item.strip()):
            _fail(who, "serial", value, "is not a batch size: an integer from 1 up, a text such as \"25%\", or a list of those")
    return list(value) if isinstance(value, (list, tuple)) else value


def _batches(who, value, hosts):
    batches = []
    seen = {}
    for index, batch in enumerate(_list(who, "batches", value)):
        path = "batches[%d]" % index
        if not isinstance(batch, (list, tuple)) or not batch:
            _fail(who, path, batch, "is not a non-empty list of host names")
        names = []
        for name in batch:
            _text(who, path, name, optional=False, empty=False)
            if name in seen:
                _fail(who, path, name, "is also in batches[%d]: a host is in one batch" % seen[name])
            if name not in hosts:
                _fail(who, path, name, "is not in hosts: every host of a batch has its entry in hosts")
            seen[name] = index
            names.append(str(name))
        batches.append(names)
    return batches


# ------------------------------------------------------------------------------ judging

def _failed_check(host):
    """The first check that failed or broke, None when no check shows the failure."""
    for check in host["checks"]:
        if check["status"] in ("failed", "error"):
            return check["name"]
    return None


def _where_failed(host):
    """``verify`` (the check), ``task "Apply"`` (no check shows it), ``unreachable`` or None."""
    if host["status"] == "unreachable":
        return "unreachable"
    if host["failed_check"]:
        return host["failed_check"]
    if host["failure"] and host["failure"]["stage"]:
        return host["failure"]["stage"]
    if host["failure"] and host["failure"]["task"]:
        return "task \"%s\"" % _plain(host["failure"]["task"])
    return None


def _what_failed(name, host):
    """``fleet-h3 failed verify`` / ``fleet-h7 unreachable`` / ``fleet-h3 failed at task "X"``."""
    where = _where_failed(host)
    if where == "unreachable":
        return "%s unreachable" % name
    if where is None:
        return "%s failed" % name
    return "%s failed %s%s" % (name, "at " if where.startswith("task ") else "", where)


def _quarantine_where(host):
    """``at verify`` for a host quarantined after a failure past the gate, "" for one the gate
    quarantined before its tuning."""
    where = _where_failed(host)
    if where in (None, HEALTH_CHECK, "unreachable"):
        return ""
    return "at %s" % where


def _actions_text(health):
    return ", ".join(health["actions"]) if health and health["actions"] else "no action named"


def _quarantined_phrase(name, host):
    """``fleet-h3 quarantined (rma)`` / ``fleet-h5 quarantined at verify (reset_gpu), not reverted``."""
    where = _quarantine_where(host)
    return "%s quarantined%s (%s)%s" % (name, " " + where if where else "", _actions_text(host["health"]),
                                        ", not reverted" if host["changes"] else "")


def _tuned_anyway(host):
    """A host tuned although its health blocks (gpufleet_health_policy report)."""
    return host["status"] in ("tuned", "unchanged") and bool(host["health"]) and host["health"]["blocking"]


def _health_summary(result):
    """The rollout's health, quarantined hosts first: counts per health status over the hosts
    that ran (``not_judged``: no verdict), then the hosts whose health was not healthy, each with
    its actions and findings."""
    hosts = result["hosts"]
    ran = [name for name in _order(result) if hosts[name]["status"] != "untouched"]
    counts = dict((status, 0) for status in HEALTH_STATUSES)
    counts["not_judged"] = 0
    for name in ran:
        health = hosts[name]["health"]
        counts[health["status"] if health else "not_judged"] += 1

    def entry(name):
        host, health = hosts[name], hosts[name]["health"]
        where = _quarantine_where(host) if host["status"] == "quarantined" else ""
        return {"host": name, "batch": host["batch"], "status": host["status"], "health": health["status"],
                "phase": health["phase"], "policy": health["policy"], "actions": list(health["actions"]),
                "at": where[3:] if where else None, "reverted": host["reverted"],
                "findings": [dict(f) for f in health["findings"]]}

    return {"counts": counts,
            "quarantined": [entry(n) for n in ran if hosts[n]["status"] == "quarantined"],
            "tuned_anyway": [entry(n) for n in ran if _tuned_anyway(hosts[n])],
            "degraded": [entry(n) for n in ran if hosts[n]["health"] and hosts[n]["health"]["status"] == "degraded"
                         and hosts[n]["status"] != "quarantined"]}


def _revert_state(host):
    """reverted / revert incomplete / not reverted / nothing to revert / None (not asked)."""
    revert = host["revert"]
    if revert and revert["failed"]:
        return "revert incomplete"
    if host["reverted"]:
        return "reverted"
    if not host["changes"] and not (revert and revert["restored"]):
        return None if host["status"] == "unreachable" else "nothing to revert"
    return "not reverted"


def _issues(host):
    """What makes a tuned host worth a full section: a health verdict that blocks (tuned under
    gpufleet_health_policy report), drift, a check that failed or broke, a verify failure listed
    although the host verified."""
    out = []
    if _tuned_anyway(host):
        out.append("health %s, tuned anyway" % host["health"]["status"])
    bad = [c["name"] for c in host["checks"] if c["status"] in ("failed", "error")]
    if bad:
        out.append("check %s did not pass" % ", ".join(bad))
    if host["drift"]:
        out.append("drift")
    if host["verify_failures"]:
        out.append("verify failures listed")
    return out


def _plural(count, word, words=None):
    return "%d %s" % (count, word if count == 1 else (words or word + "s"))


def _names(names, limit):
    if len(names) <= limit:
        return ", ".join(names)
    return "%s and %d more" % (", ".join(names[:limit]), len(names) - limit)


def _order(result):
    """Hosts in batch order, then the hosts of no batch in the order given."""
    seen = [name for batch in result["batches"] for name in batch]
    planned = set(seen)
    return seen + [name for name in result["hosts"] if name not in planned]


def _verdict(result):
    hosts, counts = result["hosts"], result["counts"]
    order = _order(result)
    total_batches = len(result["batches"])
    failing = [name for name in order if hosts[name]["status"] in ("failed", "unreachable")]
    quarantined = [name for name in order if hosts[name]["status"] == "quarantined"]
    sick = [_quarantined_phrase(name, hosts[name]) for name in quarantined[:NAMES_IN_VERDICT]]
    if len(quarantined) > NAMES_IN_VERDICT:
        sick.append("%d more hosts quarantined" % (len(quarantined) - NAMES_IN_VERDICT))
    sick = ", ".join(sick)
    untouched = counts["untouched"]
    touched = counts["total"] - untouched
    parts = []
    if result["status"] == "completed":
        done = [name for name in order if hosts[name]["status"] not in ("untouched", "quarantined")]
        if quarantined:  # the hardware first, then the others
            parts.append(sick)
            which = "the other %d hosts" % len(done) if len(done) > 1 else (done[0] if done else "")
        else:
            which = "All %d hosts" % touched if touched > 1 else (done[0] if done else "")
        if not touched:
            head = "No host to roll out to"
        elif not done:
            head = "no other host to tune"
        elif counts["unchanged"] == len(done):
            head = "%s already tuned and verified" % which
        else:
            head = "%s tuned and verified" % which
            if counts["unchanged"]:
                head += " (%d already tuned)" % counts["unchanged"]
        parts.append(head)
    else:
        if result["status"] == "stopped":
            head = "Stopped after batch %d of %d" % (result["stopped_after_batch"], total_batches)
        else:
            head = "Completed %s with failures" % ("all %d batches" % total_batches if total_batches > 1
                                                   else "the only batch")
        if failing:
            shown = [_what_failed(name, hosts[name]) for name in failing[:NAMES_IN_VERDICT]]
            if len(failing) > NAMES_IN_VERDICT:
                shown.append("%d more hosts failed or unreachable" % (len(failing) - NAMES_IN_VERDICT))
            parts.append("%s: %s" % (head, ", ".join(shown)))
            reverts = [(name, _revert_state(hosts[name])) for name in failing]
            reverts = [(name, state) for name, state in reverts if state]
            if len(failing) <= NAMES_IN_VERDICT:
                parts.extend("%s %s" % (name, state) if state != "nothing to revert" else "nothing to revert on %s" % name
                             for name, state in reverts)
            elif reverts:
                tally = {}
                for _name, state in reverts:
                    tally[state] = tally.get(state, 0) + 1
                parts.append(", ".join("%d %s" % (tally[state], state) for state in
                                       ("reverted", "revert incomplete", "not reverted", "nothing to revert")
                                       if state in tally))
            if quarantined:
                parts.append(sick)
        else:
            parts.append("%s: %s" % (head, sick or result["stop_reason"] or "no host failed"))
    anyway = [name for name in order if _tuned_anyway(hosts[name])]
    if anyway:
        shown = ["%s (%s)" % (name, _actions_text(hosts[name]["health"])) for name in anyway[:NAMES_IN_VERDICT]]
        if len(anyway) > NAMES_IN_VERDICT:
            shown.append("%d more" % (len(anyway) - NAMES_IN_VERDICT))
        parts.append("tuned despite a blocking health verdict (gpufleet_health_policy report): %s" % ", ".join(shown))
    if untouched:
        parts.append("%s not touched" % _plural(untouched, "host"))
    drift = [name for name in order if hosts[name]["status"] in ("tuned", "unchanged") and hosts[name]["drift"]]
    if drift:
        parts.append("drift on %s" % (_names(drift, NAMES_IN_VERDICT) if len(drift) <= NAMES_IN_VERDICT
                                      else _plural(len(drift), "host")))
    return ("Check mode: " if result["check_mode"] else "") + "; ".join(parts)


def _batch_outcome(result, index, names):
    number = index + 1
    hosts = result["hosts"]
    last_ran = result["stopped_after_batch"] or len(result["batches"])
    counts = dict((status, 0) for status in HOST_STATUSES)
    for name in names:
        counts[hosts[name]["status"]] += 1
    if number > last_ran:
        outcome = "not run (stopped after batch %d)" % last_ran
    else:
        outcome = _ran_outcome(hosts, names)
        if number == result["stopped_after_batch"]:
            outcome += "; the rollout stopped here"
    return {"batch": number, "canary": index == 0, "hosts": list(names), "ran": number <= last_ran,
            "counts": counts, "outcome": outcome}


def _ran_outcome(hosts, names):
    """``passed: 2 tuned`` / ``failed: fleet-h3 (verify); 1 tuned`` for hosts that ran."""
    failing = ["%s (%s)" % (name, _where_failed(hosts[name]) or "failed")
               for name in names if hosts[name]["status"] in ("failed", "unreachable")]
    sick = ["%s (%s)" % (name, _actions_text(hosts[name]["health"]))
            for name in names if hosts[name]["status"] == "quarantined"]
    good = ["%d %s" % (sum(1 for n in names if hosts[n]["status"] == status), status)
            for status in ("tuned", "unchanged") if any(hosts[n]["status"] == status for n in names)]
    if failing:
        return "failed: %s%s%s" % (_names(failing, NAMES_IN_CELL),
                                   "; quarantined: %s" % _names(sick, NAMES_IN_CELL) if sick else "",
                                   "; %s" % ", ".join(good) if good else "")
    if sick:
        return "quarantined: %s%s" % (_names(sick, NAMES_IN_CELL), "; %s" % ", ".join(good) if good else "")
    return "passed: %s" % (", ".join(good) or "no host")


def _normalize(rollout, who):
    """The checked, completed rollout (see rollout_result)."""
    _keys(who, "rollout", rollout, TOP_KEYS, TOP_DERIVED)
    run_id = rollout.get("run_id")
    if not isinstance(run_id, str) or not RUN_ID_RE.match(run_id):
        _fail(who, "run_id", run_id, "is not a run id: letters, digits, '.', '_' and '-' (required)")
    raw_hosts = rollout.get("hosts")
    if not isinstance(raw_hosts, dict):
        _fail(who, "hosts", raw_hosts, "is not a dict of host name: host result")
    for name in raw_hosts:
        if not isinstance(name, str) or not name:
            _fail(who, "hosts", name, "is not a host name (a non-empty string)")
    batches = _batches(who, rollout.get("batches"), raw_hosts)
    hosts = dict((str(name), _host(who, name, node)) for name, node in raw_hosts.items())
    stopped = rollout.get("stopped_after_batch")
    if stopped is not None:
        if not batches:
            _fail(who, "stopped_after_batch", stopped, "is set, but there is no batch")
        stopped = _int(who, "stopped_after_batch", stopped, 1, len(batches))
    canary = rollout.get("canary")
    if canary is None:
        canary = len(batches[0]) if batches else 1
    result = {
        "run_id": str(run_id),
        "started": _text(who, "started", rollout.get("started")),
        "finished": _text(who, "finished", rollout.get("finished")),
        "canary": _int(who, "canary", canary, 1 if batches else 0),  # 0: a rollout with no host
        "serial": _serial(who, rollout.get("serial")),
        "revert_on_failure": _bool(who, "revert_on_failure", rollout.get("revert_on_failure"), True),
        "check_mode": _bool(who, "check_mode", rollout.get("check_mode"), False),
        "batches": batches,
        "stopped_after_batch": stopped,
        "stop_reason": _text(who, "stop_reason", rollout.get("stop_reason")),
        "hosts": hosts,
    }
    _check_plan(who, result)
    for host in hosts.values():
        host["failed_check"] = _failed_check(host) if host["status"] in ("failed", "unreachable", "quarantined") \
            else None
        host["reason"] = _untouched_reason(result, host, host["reason"]) if host["status"] == "untouched" else None
    failed = any(h["status"] in ("failed", "unreachable") for h in hosts.values())
    result["status"] = "stopped" if stopped is not None else ("failed" if failed else "completed")
    counts = dict((status, 0) for status in HOST_STATUSES)
    for host in hosts.values():
        counts[host["status"]] += 1
    counts["total"] = len(hosts)
    result["counts"] = counts
    result["health"] = _health_summary(result)
    result["batch_outcomes"] = [_batch_outcome(result, index, names) for index, names in enumerate(batches)]
    result["verdict"] = _verdict(result)
    return result


def _check_plan(who, result):
    """Each host where the plan puts it: its batch number the plan's, untouched exactly when its
    batch did not run (or it is in none), and no failure in a batch after which the rollout went
    on (it stops before the next batch after a batch with a failed or unreachable host)."""
    stopped = result["stopped_after_batch"]
    last_ran = stopped or len(result["batches"])
    planned = {}
    for index, names in enumerate(result["batches"]):
        for name in names:
            planned[name] = index + 1
    for name, host in result["hosts"].items():
        path = "hosts.%s" % name
        number = planned.get(name)
        if host["batch"] is not None and host["batch"] != number:
            _fail(who, path + ".batch", host["batch"], "is not the host's batch in batches (%s)" % (
                "batch %d" % number if number else "it is in none"))
        host["batch"] = number
        if number is None:
            continue  # a serving container follows its host, outside the batches
        if number > last_ran:
            if host["status"] != "untouched":
                _fail(who, path + ".status", host["status"], "is impossible: its batch %d comes after the stop "
                      "(stopped_after_batch %d), so the host is untouched" % (number, stopped))
            continue
        if host["status"] == "untouched":
            _fail(who, path + ".status", "untouched", "is impossible: its batch %d ran" % number)
        if host["status"] in ("failed", "unreachable") and number < last_ran:
            went_on = "stopped_after_batch is null" if stopped is None else "stopped_after_batch %d" % stopped
            _fail(who, path + ".status", host["status"],
                  "in batch %d, but the rollout went on to batch %d (%s): it stops after a batch with a failed "
                  "or unreachable host" % (number, number + 1, went_on))


def _untouched_reason(result, host, given=None):
    """Why the host was left alone; ``given``: the reason its outcome gave (the gate's words, such
    as a quarantined canary's), kept after the stop, once (a reason this wrote is taken as it is)."""
    if host["batch"] is None:
        return "in no batch of this rollout"
    reason = "the rollout stopped after batch %d of %d" % (result["stopped_after_batch"], len(result["batches"]))
    if result["stop_reason"]:
        reason += " (%s)" % result["stop_reason"]
    if given and given.startswith(reason):
        return given
    if given and given != result["stop_reason"]:
        reason += ": %s" % given
    return "%s; this host was in batch %d" % (reason, host["batch"])


def _accept(rollout, who):
    try:
        return clean_tree(_normalize(rollout, who))
    except AnsibleFilterError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError) as exc:  # a shape the checks above missed
        raise AnsibleFilterError("%s: the rollout is malformed: %s" % (who, exc))


# ------------------------------------------------------------------------------ wording

def _plain(text):
    """One line of plain text (the JSON's and the JUnit file's): newlines and runs of blanks
    become one space."""
    return " ".join(clean(text, TEXT_LIMIT).split())


def _plain_code(text):
    """A target in the JUnit file, between backticks as on the page."""
    text = _plain(text)
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return "%s%s%s%s%s" % (fence, pad, text, pad, fence)


# The page's text: every value Markdown-escaped; a table cell's ``|`` too.
_inline = _cell = markdown_text.escape


def _code(text, md=True):
    return markdown_text.code(text) if md else _plain_code(text)


def _state_text(kind, value, md=True):
    text = _inline if md else _plain
    if isinstance(value, dict):
        if "link" in value:
            return "link to %s" % text(value["link"])
        shown = ["sha256 %s" % text(value["sha256"][:12])]
        if value.get("size") is not None:
            shown.append("%d B" % value["size"])
        if value.get("mode"):
            shown.append("mode %s" % text(value["mode"]))
        return ", ".join(shown)
    if value is None:
        return "absent" if kind == "file" else "(none)"
    return text(value)


def _change_line(record, md=True):
    """``area `target`: before -> after``: Markdown for the page (``md``), plain for JUnit."""
    return "%s %s: %s -> %s" % ((_inline if md else _plain)(record["area"] or record["kind"]), _code(record["target"], md),
                                _state_text(record["kind"], record["before"], md),
                                _state_text(record["kind"], record["after"], md))


def _drift_line(record, md=True):
    return "%s %s: recorded %s, now %s" % ((_inline if md else _plain)(record["area"] or record["kind"]),
                                           _code(record["target"], md),
                                           _state_text(record["kind"], record["recorded"], md),
                                           _state_text(record["kind"], record["current"], md))


def _restored_line(record, md=True):
    kind = record.get("kind")
    before, current = _state_text(kind, record["before"], md), _state_text(kind, record["current"], md)
    label = "%s %s" % ((_inline if md else _plain)(record.get("area") or kind), _code(record["target"], md))
    if record["before"] == record["current"]:
        return "%s: back to %s" % (label, before)
    return "%s: restored to %s, but reads %s" % (label, before, current)


def _failure_text(failure):
    """``at verify, task "Check": 2 checks failed``; "" for no failure."""
    if not failure:
        return ""
    where = ", ".join(x for x in ("at %s" % failure["stage"] if failure["stage"] else "",
                                  "task \"%s\"" % failure["task"] if failure["task"] else "") if x)
    return ": ".join(x for x in (where, failure["message"]) if x)


def _health_text(host, md=True):
    """The host's health in one line: ``**quarantined** before the tuning: rma, reset_gpu; not
    tuned, not benchmarked, nothing reverted``; Markdown for the page (``md``), plain for JUnit."""
    health = host["health"]
    text = _inline if md else _plain
    if health["status"] == "healthy":
        return "healthy"
    out = "**%s**" % health["status"] if md else health["status"]
    if host["status"] == "quarantined":
        where = _quarantine_where(host)
        out += " %s, judged again after the failure" % text(where) if where else " before the tuning"
    out += ": %s" % _actions_text(health)
    if host["status"] == "quarantined":
        out += "; %s" % ("the tuning is not reverted as a regression" if host["changes"]
                         else "not tuned, not benchmarked, nothing reverted")
    elif health["blocking"]:
        out += "; tuned anyway (gpufleet_health_policy %s)" % (health["policy"] or "report")
    elif health["status"] == "degraded":
        out += " (not blocking)"
    return out


def _health_finding_line(finding, md=True):
    """``GPU 0 (0000:41:00.0): a row remapping failed (`gpu_remap_failure`: rma, blocking)``."""
    text = _inline if md else _plain
    head = "%s: " % text(finding["item"]) if finding["item"] else ""
    what = ", ".join(x for x in (finding["action"] or "", "blocking" if finding["blocking"] else "") if x)
    return "%s%s (%s%s)" % (head, text(finding["message"]) or "no message", _code(finding["rule"], md),
                            ": %s" % what if what else "")


def _health_lines(host):
    """The page's lines for a host's health: its line, then one per finding."""
    if not host["health"]:
        return []
    findings = ["  - %s" % _health_finding_line(finding) for finding in host["health"]["findings"]]
    return ["- Health: %s" % _health_text(host)] + findings


def _seconds(value):
    return "-" if value is None else ("%.1f s" % value if value < 100 else "%.0f s" % value)


def _host_time(host):
    times = [c["time_s"] for c in host["checks"] if c["time_s"] is not None]
    return sum(times) if times else None


def _yes_no(value):
    return {True: "yes", False: "no", None: "not verified"}[value]


# ------------------------------------------------------------------------------ Markdown

def _host_section(name, host, result):
    lines = ["### %s" % _inline(name), ""] + _health_lines(host)
    status = "**%s**" % host["status"]
    where = " in batch %d" % host["batch"] if host["batch"] else ""
    lines.append("- Status: %s%s%s" % (status, where, " (canary)" if host["batch"] == 1 else ""))
    if host["status"] in ("tuned", "unchanged") and _issues(host):
        lines.append("- Look at: %s" % _inline("; ".join(_issues(host))))
    if _failure_text(host["failure"]):
        lines.append("- Failure: %s" % _inline(_failure_text(host["failure"])))
    if host["checks"]:
        lines += ["", "| check | status | time | message |", "|---|---|---|---|"]
        for check in host["checks"]:
            shown = check["status"].upper() if check["status"] in ("failed", "error") else check["status"]
            lines.append("| %s | %s | %s | %s |" % (_cell(check["name"]), shown, _seconds(check["time_s"]),
                                                    _cell(check["message"])))
        lines.append("")
    lines.append("- Changed: %s" % ("%s" % _plural(len(host["changes"]), "item") if host["changes"] else "nothing"))
    lines += ["  - %s" % _change_line(record) for record in host["changes"]]
    verified = _yes_no(host["verified"])
    lines.append("- Verified: %s" % verified)
    lines += ["  - %s" % _inline(item) for item in host["verify_failures"]]
    lines.append(_revert_lines(host, result))
    if host["drift"]:
        lines.append("- Drift (settings that no longer hold): %s" % _plural(len(host["drift"]), "item"))
        lines += ["  - %s" % _drift_line(record) for record in host["drift"]]
    return lines + [""]


def _revert_lines(host, result, md=True):
    """The revert's lines: Markdown for the page (``md``), plain for JUnit."""
    text = _inline if md else _plain
    revert = host["revert"]
    state = _revert_state(host)
    if host["status"] in ("tuned", "unchanged") and not revert:
        word = "not needed"
    elif host["status"] == "quarantined" and not revert:
        word = ("no: quarantined for its hardware, the tuning is not reverted as a regression" if host["changes"]
                else "nothing to revert (nothing changed)")
    elif state == "reverted":
        word = "yes"
    elif state == "revert incomplete":
        word = "incomplete: %s could not be restored" % _plural(len(revert["failed"]), "item")
    elif state == "not reverted":
        word = "no" + (" (revert_on_failure is off)" if not result["revert_on_failure"] else "")
    else:
        word = "nothing to revert (nothing changed)"
    lines = ["- Reverted: %s" % word]
    if revert:
        for record in revert["restored"]:
            lines.append("  - restored %s" % _restored_line(record, md))
        for item in revert["failed"]:
            lines.append("  - could not restore %s: %s" % (_code(item["target"], md), text(item["message"]) or "no reason given"))
        if revert["pending_reboot"]:
            lines.append("  - restored, takes effect at the next reboot: %s" % ", ".join(
                _code(target, md) for target in revert["pending_reboot"]))
    return "\n".join(lines)


def _grouped_changes(names, hosts):
    """One line per distinct change with the hosts that got it, in first-seen order."""
    groups, order = {}, []
    for name in names:
        for record in hosts[name]["changes"]:
            line = _change_line(record)
            if line not in groups:
                groups[line] = []
                order.append(line)
            if not groups[line] or groups[line][-1] != name:
                groups[line].append(name)
    lines = []
    for line in order:
        got = groups[line]
        if len(got) == len(names) and len(names) > 1:
            who = "all %d hosts" % len(names)
        elif len(got) <= NAMES_PER_CHANGE:
            who = ", ".join(_inline(n) for n in got)
        else:
            who = "%d hosts: %s" % (len(got), _names([_inline(n) for n in got], NAMES_PER_CHANGE))
        lines.append("- %s (%s)" % (line, who))
    return lines


def _health_section(result, order):
    """The rollout's health, before the rest: the counts, each quarantined host in full, the
    hosts tuned although their health blocks, the degraded ones with their findings. Nothing
    when no host was judged (a rollout from before the health gate)."""
    hosts, summary = result["hosts"], result["health"]
    counts = summary["counts"]
    if not any(counts[status] for status in HEALTH_STATUSES):
        return []
    judged = sum(counts[status] for status in HEALTH_STATUSES)
    lines = ["## Health", "",
             "- Judged: %s: %s%s" % (_plural(judged, "host"), ", ".join(
                 "%d %s" % (counts[status], status) for status in HEALTH_STATUSES),
                 "; %d not judged" % counts["not_judged"] if counts["not_judged"] else "")]
    if summary["quarantined"]:
        lines.append("- Quarantined (not tuned further, not reverted; the rollout went on%s): %s" % (
            " until it stopped" if result["stopped_after_batch"] else "",
            ", ".join("%s (%s)" % (_inline(e["host"]), ", ".join(e["actions"]) or "no action named")
                      for e in summary["quarantined"])))
    if summary["tuned_anyway"]:
        lines.append("- Tuned despite a blocking verdict (gpufleet_health_policy report): %s" % ", ".join(
            "%s (%s)" % (_inline(e["host"]), ", ".join(e["actions"]) or "no action named")
            for e in summary["tuned_anyway"]))
    degraded = [e["host"] for e in summary["degraded"]]
    if degraded:
        lines.append("- Degraded (not blocking, tuned): %s" % _names([_inline(n) for n in degraded], NAMES_IN_CELL))
        for name in degraded[:NAMES_IN_CELL]:
            lines += ["  - %s: %s" % (_inline(name), _health_finding_line(f))
                      for f in hosts[name]["health"]["findings"]]
    lines.append("")
    for entry in summary["quarantined"]:
        lines += _host_section(entry["host"], hosts[entry["host"]], result)
    return lines


def _markdown(result):
    hosts = result["hosts"]
    order = _order(result)
    counts = result["counts"]
    lines = ["# Fleet rollout %s%s" % (_inline(result["run_id"]), " (check mode)" if result["check_mode"] else ""), "",
             "**%s**" % _inline(result["verdict"]), ""]
    if result["stop_reason"]:
        lines += ["Stop reason: %s" % _inline(result["stop_reason"]), ""]
    serial = result["serial"]
    if isinstance(serial, list):
        serial = ", ".join(str(s) for s in serial)
    lines += ["- Run: %s (%s)" % (_inline(result["run_id"]), result["status"]),
              "- Started: %s; finished: %s" % (_inline(result["started"]) if result["started"] else "-",
                                               _inline(result["finished"]) if result["finished"] else "-"),
              "- Canary: %d; serial: %s; revert on failure: %s%s" % (
                  result["canary"], "-" if serial is None else _inline(serial), "yes" if result["revert_on_failure"] else "no",
                  "; check mode: nothing was changed, the changes are what a run would make" if result["check_mode"] else ""),
              "- Hosts: %d (%s)" % (counts["total"], ", ".join(
                  "%d %s" % (counts[s], s) for s in HOST_STATUSES if counts[s]) or "none"),
              ""]
    lines += _health_section(result, order)
    lines += ["## Batches", ""]
    if result["batch_outcomes"]:
        lines += ["| batch | hosts | outcome |", "|---|---|---|"]
        for batch in result["batch_outcomes"]:
            members = batch["hosts"]
            shown = _names(members, NAMES_IN_CELL)
            if len(members) > NAMES_IN_CELL:
                shown = "%d hosts: %s" % (len(members), shown)
            lines.append("| %d%s | %s | %s |" % (
                batch["batch"], " (canary)" if batch["canary"] else "", _cell(shown), _cell(batch["outcome"])))
        outside = [n for n in order if hosts[n]["batch"] is None and hosts[n]["status"] != "untouched"]
        if outside:
            lines.append("| no batch | %s | %s |" % (_cell(_names(outside, NAMES_IN_CELL)),
                                                     _cell(_ran_outcome(hosts, outside))))
    else:
        lines.append("No batch.")
    lines.append("")

    failing = [n for n in order if hosts[n]["status"] in ("failed", "unreachable")]
    if failing:
        lines += ["## Failed and unreachable hosts", ""]
        for name in failing:
            lines += _host_section(name, hosts[name], result)
    done = [n for n in order if hosts[n]["status"] in ("tuned", "unchanged")]
    flagged = [n for n in done if _issues(hosts[n])]
    clean = [n for n in done if not _issues(hosts[n])]
    if flagged:
        lines += ["## Tuned hosts to look at", ""]
        for name in flagged:
            lines += _host_section(name, hosts[name], result)
    if clean:
        lines += ["## Tuned and verified", "",
                  "| host | batch | status | changes | checks | time |", "|---|---|---|---|---|---|"]
        for name in clean:
            host = hosts[name]
            tally = {}
            for check in host["checks"]:
                tally[check["status"]] = tally.get(check["status"], 0) + 1
            lines.append("| %s | %s | %s | %d | %s | %s |" % (
                _cell(name), "-" if host["batch"] is None else host["batch"], host["status"], len(host["changes"]),
                ", ".join("%d %s" % (tally[s], s) for s in CHECK_STATUSES if s in tally) or "-",
                _seconds(_host_time(host))))
        lines.append("")
        grouped = _grouped_changes(clean, hosts)
        lines += ["### What changed on these hosts", ""] + (grouped or ["Nothing: every host was already tuned."]) + [""]
    untouched = [n for n in order if hosts[n]["status"] == "untouched"]
    if untouched:
        lines += ["## Not touched", ""]
        if result["stopped_after_batch"]:
            lines += ["The rollout stopped after batch %d of %d%s; these hosts were left as they were:" % (
                result["stopped_after_batch"], len(result["batches"]),
                ": %s" % _inline(result["stop_reason"]) if result["stop_reason"] else ""), ""]
        by_batch = {}
        for name in untouched:
            by_batch.setdefault(hosts[name]["batch"], []).append(name)
        for number in sorted(by_batch, key=lambda b: (b is None, b or 0)):
            label = "batch %d" % number if number else "in no batch"
            lines.append("- %s (%d): %s" % (label, len(by_batch[number]), ", ".join(_inline(n) for n in by_batch[number])))
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


# ------------------------------------------------------------------------------ JUnit

def _escape_char(match):
    code = ord(match.group(0))
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code


def _xml(text):
    return _XML_BAD.sub(_escape_char, str(text))


def _time_attr(value):
    return "%.3f" % value


def _case(suite, name, check_name, time_s=None):
    case = ET.SubElement(suite, "testcase", {"classname": _xml(JUNIT_CLASS + name), "name": _xml(check_name)})
    if time_s is not None:
        case.set("time", _time_attr(time_s))
    return case


def _outcome(case, tag, message, kind, body=""):
    element = ET.SubElement(case, tag, {"message": _xml(message)})
    if kind:
        element.set("type", kind)
    if body:
        element.text = _xml(body)


def _host_out(host, result):
    """The suite's system-out: what changed, the revert, the drift, as the page words them."""
    lines = ["health: %s" % _health_text(host, md=False)] if host["health"] else []
    lines += ["health finding: %s" % _health_finding_line(f, md=False)
              for f in (host["health"] or {}).get("findings", [])]
    lines.append("status: %s" % host["status"])
    if _failure_text(host["failure"]):
        lines.append("failure: %s" % _failure_text(host["failure"]))
    lines += ["changed: %s" % _change_line(record, md=False) for record in host["changes"]]
    lines.append("verified: %s" % _yes_no(host["verified"]))
    lines += ["verify failure: %s" % item for item in host["verify_failures"]]
    lines += [line.replace("- Reverted: ", "reverted: ", 1).replace("  - ", "  ", 1)
              for line in _revert_lines(host, result, md=False).split("\n")]
    lines += ["drift: %s" % _drift_line(record, md=False) for record in host["drift"]]
    return "\n".join(lines) + "\n"


def _junit_checks(host):
    """The host's checks as JUnit shows them, the health first (before reachable, audit, tune,
    verify, serving): its check with the host's verdict over it (a blocking verdict fails it, also
    one judged again after a failure past the gate, and under gpufleet_health_policy report while
    the others pass), or one made from the verdict when no check carries it."""
    health = host["health"]
    mine = [check for check in host["checks"] if check["name"] == HEALTH_CHECK]
    others = [check for check in host["checks"] if check["name"] != HEALTH_CHECK]
    if not mine and not health:
        return others
    first = dict(mine[0]) if mine else {"name": HEALTH_CHECK, "status": "passed", "message": "", "time_s": None}
    if health and health["blocking"]:
        first["health"] = first["status"]  # the check's own status: a passed one was the judgment before a failure
        first["status"] = "failed"
    elif health and not first["message"]:
        first["message"] = _health_text(host, md=False)
    return [first] + mine[1:] + others


def _health_case(case, host, check):
    """A blocking health's failure: the message names the status, the actions and the findings;
    the body one finding a line, and the check's own message when the check failed too (a check
    that passed was the judgment before a failure past the gate)."""
    findings = [_health_finding_line(f, md=False) for f in host["health"]["findings"]]
    message = "; ".join([_health_text(host, md=False)] + findings)
    body = [_health_text(host, md=False)] + findings
    if check["health"] in ("failed", "error") and check["message"] and check["message"] not in body:
        body.append(check["message"])
    _outcome(case, "failure", message, "health", "\n".join(body))


def _suite(root, name, host, result):
    suite = ET.SubElement(root, "testsuite", {"name": _xml(name)})
    properties = ET.SubElement(suite, "properties")
    for key, value in (("run_id", result["run_id"]), ("status", host["status"]),
                       ("batch", "" if host["batch"] is None else str(host["batch"])),
                       ("verified", _yes_no(host["verified"])), ("reverted", "yes" if host["reverted"] else "no")) \
            + ((("health", host["health"]["status"]),) if host["health"] else ()):
        ET.SubElement(properties, "property", {"name": key, "value": _xml(value)})
    if host["status"] == "untouched":
        case = _case(suite, name, "rollout")
        _outcome(case, "skipped", "not touched: %s" % host["reason"], None)
    else:
        for check in _junit_checks(host):
            case = _case(suite, name, check["name"], check["time_s"])
            message = check["message"]
            if check.get("health"):
                _health_case(case, host, check)
            elif check["status"] == "failed":
                body = message
                if check["name"] == "verify":
                    body = "\n".join([message] * bool(message) + [f for f in host["verify_failures"] if f != message])
                _outcome(case, "failure", message or "%s failed" % check["name"], "failed", body)
            elif check["status"] == "error":
                _outcome(case, "error", message or "%s broke" % check["name"], "error", message)
            elif check["status"] == "skipped":
                _outcome(case, "skipped", message or "skipped", None)
        # A failed or unreachable host whose checks do not show it still fails in JUnit: one
        # testcase "rollout" carries the host's status.
        shown = any(c["status"] in ("failed", "error") for c in host["checks"])
        if host["status"] in ("failed", "unreachable") and not shown:
            case = _case(suite, name, "rollout")
            message = _failure_text(host["failure"])
            if host["status"] == "unreachable":
                _outcome(case, "error", message or "host unreachable", "unreachable", message)
            else:
                _outcome(case, "failure", message or "host failed", "failed", message)
        elif not host["checks"]:
            _case(suite, name, "rollout")
    out = ET.SubElement(suite, "system-out")
    out.text = _xml(_host_out(host, result)) if host["status"] != "untouched" else _xml("not touched: %s\n" % host["reason"])
    return _count(suite)


def _count(element):
    """Set tests/failures/errors/skipped (and time, when any case has one) from the children."""
    cases = element.findall("testcase")
    totals = {"tests": len(cases),
              "failures": sum(1 for c in cases if c.find("failure") is not None),
              "errors": sum(1 for c in cases if c.find("error") is not None),
              "skipped": sum(1 for c in cases if c.find("skipped") is not None)}
    times = [float(c.get("time")) for c in cases if c.get("time") is not None]
    for key in ("tests", "failures", "errors", "skipped"):
        element.set(key, str(totals[key]))
    if times:
        element.set("time", _time_attr(sum(times)))
    totals["time"] = sum(times) if times else None
    return totals


def _junit(result):
    root = ET.Element("testsuites", {"name": JUNIT_SUITES})
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    times = []
    for name in _order(result):
        counted = _suite(root, name, result["hosts"][name], result)
        for key in totals:
            totals[key] += counted[key]
        if counted["time"] is not None:
            times.append(counted["time"])
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(totals[key]))
    if times:
        root.set("time", _time_attr(sum(times)))
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ------------------------------------------------------------------------------ the three reports

def rollout_result(rollout):
    return _accept(rollout, "rollout_result")


def rollout_markdown(rollout):
    return _markdown(_accept(rollout, "rollout_markdown"))


def rollout_junit(rollout):
    return _junit(_accept(rollout, "rollout_junit"))
