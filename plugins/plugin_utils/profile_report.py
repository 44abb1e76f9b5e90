# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The profile in the audit: which one, why, what it sets that the node does not have yet, what
the node is held against. One section of system-improve.md (audit_report) and the record the
audit keeps (audit.json's ``profile``).

Why "what it sets that the node does not have" comes from the plan: the plan is the host role's
own part tasks in check mode with the profile's values in effect, so a setting whose part plans a
change is one the node does not hold yet; the part each variable belongs to is its name's prefix.
"""

from __future__ import annotations

# host role variable prefix -> the part (tasks/<part>.yml) it sets
PART_PREFIXES = (
    ("host_cmdline_", "kernel_cmdline"),
    ("host_cpu_power_", "cpu_power"),
    ("host_pcie_acs_", "pcie_acs"),
    ("host_pcie_", "pcie_maxreadreq"),
    ("host_peermem_", "nvidia_peermem"),
    ("host_nvidia_", "nvidia_driver_options"),
    ("host_sysctl_", "sysctl_profile"),
    ("host_lxc_", "lxc_memlock"),
)
RECORD_KEYS = ("name", "platform", "intent", "pinned", "description", "reasons", "auto", "settings", "sources",
               "expectations", "checks", "violations", "waived")


def part_of(variable):
    """The host role part a variable sets, or None (verify_*, serving_*)."""
    for prefix, part in PART_PREFIXES:
        if variable.startswith(prefix):
            return part
    return None


def record(profile):
    """What audit.json keeps of the profile (profile_select's result), or None."""
    if not isinstance(profile, dict) or not profile.get("name"):
        return None
    out = dict((k, profile[k]) for k in RECORD_KEYS if k in profile)
    out["guard_rails"] = [r.get("name") for r in profile.get("guard_rails") or []]
    return out


def _planned(planned, part):
    for phase in ("runtime", "reboot_required"):
        entry = ((planned or {}).get(phase) or {}).get(part)
        if isinstance(entry, dict):
            return phase, entry
    return None, None


def node_state(variable, planned):
    """How the node stands with one setting, from the plan of its part."""
    part = part_of(variable)
    if part is None:
        return "read by %s" % ("the verify role" if variable.startswith("verify_") else "the benchmark")
    phase, entry = _planned(planned, part)
    if entry is None:
        return "%s: not planned in this run" % part
    records = entry.get("records") or []
    if entry.get("status") == "failed":
        return "%s: could not be planned (%s)" % (part, entry.get("msg") or "failed")
    if records:
        return "**%s: the node does not have it yet** (%d change(s), --tags %s)" % (part, len(records), phase)
    if entry.get("status") == "skipped":
        why = " ".join(str(entry.get("msg") or "skipped").split())
        return "%s: nothing to do here (%s)" % (part, why if len(why) <= 100 else why[:97].rstrip() + "...")
    return "%s: the node has it" % part


def _code(value):
    text = str(value).replace("`", "'").replace("|", "\\|").replace("\n", " ")
    return "`%s`" % text


def lines(profile, planned):
    """The Profile section of system-improve.md."""
    if not isinstance(profile, dict) or not profile.get("name"):
        return ["## Profile", "", "No profile was chosen in this run (the profile role did not run): the roles' defaults.", ""]
    out = ["## Profile", "",
           "**%s** - %s; %s:" % (profile["name"], profile.get("description") or "",
                                 "pinned by the inventory" if profile.get("pinned") else "chosen from the facts"), ""]
    out += ["- %s" % reason for reason in profile.get("reasons") or []]
    out.append("")
    settings = profile.get("settings") or {}
    if settings:
        out += ["| setting | value | layer | on this node |", "|---|---|---|---|"]
        for name in sorted(settings):
            layer_name = (profile.get("sources") or {}).get(name, "")
            state = node_state(name, planned).replace("|", "\\|")
            out.append("| %s | %s | %s | %s |" % (_code(name), _code(settings[name]), layer_name, state))
        out += ["", "The inventory's own variables win over every layer; the rest are the roles' defaults (base).", ""]
    else:
        out += ["It sets nothing beyond the roles' defaults (base).", ""]
    checks = [c for c in profile.get("checks") or [] if c.get("status") != "not_applicable"]
    if checks:
        out += ["Expectations:", ""]
        for check in checks:
            item = (" " + check["item"]) if check.get("item") else ""
            out.append("- %s%s: %s (%s)" % (check["check"], item, check["message"], check["status"]))
        out.append("")
    rails = profile.get("guard_rails") or []
    if rails:
        names = [r if isinstance(r, str) else r.get("name") for r in rails]
        waived = profile.get("waived") or []
        out += ["Guard rails: %s." % ", ".join("%s%s" % (n, " (waived)" if n in waived else "") for n in names), ""]
    return out
