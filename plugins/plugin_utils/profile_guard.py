# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Guard rails: what a profile's platform (or any node) must never be given, checked on the
values in effect, whoever set them (a profile layer, the inventory, an extra variable).

Why data and not code in each module: the rail belongs to the platform (no identity IOMMU on
Blackwell PCIe cards, whose firmware boot breaks with it), so it travels with the platform's
profile, and the host role checks it before its first change, naming the rail, the variable and
the value. Three kinds, each limited to ``node_kinds`` when given:

- ``forbid_args``: regular expressions no kernel argument in ``variables`` (lists of arguments,
  such as host_cmdline_present) may match.
- ``require``: host role variables that must hold the given value (a setting a VM or a container
  cannot hold, such as PCIe writes from an LXC guest).
- ``min_housekeeping_cpus``: CPU isolation in ``variables`` (``isolcpus=``, ``nohz_full=``, with
  or without isolcpus' flags) must leave at least this many online CPUs to the kernel.

``gpufleet_profile_waive`` names rails an operator has decided to step over; a waived rail is
reported, never silently dropped.
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

ISOLATION_ARGS = ("isolcpus", "nohz_full")
_ISOLCPUS_FLAGS = ("nohz", "domain", "managed_irq")


def cpu_set(text):
    """The CPUs of a kernel CPU list (``0-3,8``, ``0-15:2/4``: the first 2 of every group of 4) as
    a set, as lib/bitmap.c's bitmap_parselist reads it; ValueError for what the kernel refuses."""
    cpus = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        span, colon, groups = part.partition(":")
        first, dash, last = span.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()) or (colon and not dash):
            raise ValueError("%r is not a CPU list (like 0-3,8)" % text)
        first, last = int(first), int(last) if dash else int(first)
        used, group = 1, 1
        if colon:
            used_text, slash, group_text = groups.partition("/")
            if not slash or not used_text.isdigit() or not group_text.isdigit():
                raise ValueError("%r is not a CPU list: %r needs used/group after the colon" % (text, part))
            used, group = int(used_text), int(group_text)
            if not 0 < used <= group:
                raise ValueError("%r is not a CPU list: %r uses %d of every %d" % (text, part, used, group))
        if last < first:
            raise ValueError("%r is not a CPU list: %r runs backwards" % (text, part))
        for start in range(first, last + 1, group):
            cpus.update(range(start, min(start + used, last + 1)))
    return cpus


def isolated(args):
    """The CPUs the kernel arguments ``args`` isolate (isolcpus=, nohz_full=); ValueError for a
    list that cannot be read."""
    cpus = set()
    for arg in args:
        key, sep, text = str(arg).partition("=")
        if not sep or key not in ISOLATION_ARGS:
            continue
        parts = text.split(",")
        if key == "isolcpus":
            parts = [p for p in parts if p not in _ISOLCPUS_FLAGS]
        cpus |= cpu_set(",".join(parts))
    return cpus


def _applies(rail, node):
    kinds = rail.get("node_kinds")
    return not kinds or (node or {}).get("kind") in kinds


def _list_values(values, names):
    for name in names:
        items = values.get(name)
        if isinstance(items, list):
            for item in items:
                yield name, item


def _arg_name(arg):
    return str(arg).split("=", 1)[0]


def _housekeeping(rail, values, node):
    args = [entry[1] for entry in _list_values(values, rail["variables"])]
    try:
        cpus = isolated(args)
    except ValueError as exc:
        return ["%s: %s" % ("/".join(rail["variables"]), exc)]
    if not cpus:
        return []
    online_text = (node or {}).get("cpus_online")
    if not online_text:
        return ["%d CPUs isolated (%s), but the node's online CPUs are unknown: the housekeeping CPUs left "
                "cannot be counted" % (len(cpus), ", ".join(a for a in args if _arg_name(a) in ISOLATION_ARGS))]
    try:
        online = cpu_set(online_text)
    except ValueError as exc:
        return ["%d CPUs isolated, but the node's online CPUs cannot be read (%s): the housekeeping CPUs left "
                "cannot be counted" % (len(cpus), exc)]
    left = online - cpus
    if len(left) < rail["min_housekeeping_cpus"]:
        return ["%s leave %d of the %d online CPUs (%s) to housekeeping, fewer than %d"
                % (", ".join(a for a in args if _arg_name(a) in ISOLATION_ARGS), len(left), len(online),
                   online_text, rail["min_housekeeping_cpus"])]
    return []


def _problems(rail, values, node):
    if "forbid_args" in rail:
        found = []
        for name, item in _list_values(values, rail["variables"]):
            if any(re.search(p, str(item)) for p in rail["forbid_args"]):
                found.append("%s holds %r" % (name, item))
        return found
    if "require" in rail:
        return ["%s is %r, must be %r" % (name, values[name], want)
                for name, want in rail["require"].items() if name in values and values[name] != want]
    return _housekeeping(rail, values, node)


def violations(values, rails, node, waive=None):
    """Every rail ``values`` (host role variable -> value in effect) break on ``node``
    (profile_node.describe): a list of ``{"rail", "problem", "why", "waived"}``."""
    out = []
    for rail in rails or []:
        if not _applies(rail, node):
            continue
        for problem in _problems(rail, values or {}, node):
            out.append({"rail": rail["name"], "problem": problem, "why": " ".join(rail["why"].split()),
                        "waived": rail["name"] in (waive or [])})
    return out


def message(found):
    """One line per unwaived violation, for a failure."""
    return "; ".join("guard rail %s: %s (%s)" % (v["rail"], v["problem"], v["why"]) for v in found if not v["waived"])


def profile_guard(values, profile):
    """The filter gpufleet.tuning.profile_guard: the problems (one line each) the host role's
    values in effect (``values``: variable -> value) give under ``profile``'s guard rails on its
    node; waived rails are left out. An empty or missing profile holds no rails."""
    if not isinstance(values, dict):
        raise AnsibleFilterError("profile_guard: the input must map host role variables to their values, got %s"
                                 % type(values).__name__)
    profile = profile if isinstance(profile, dict) else {}
    found = violations(plain_values(values), profile.get("guard_rails") or [], profile.get("node") or {},
                       waive=profile.get("waived") or [])
    return ["guard rail %s: %s (%s)" % (v["rail"], v["problem"], v["why"]) for v in found if not v["waived"]]


def variables(profile):
    """The host role variables the rails of ``profile`` read (for the host role's lookup)."""
    names = []
    for rail in (profile or {}).get("guard_rails") or []:
        for name in list(rail.get("variables") or []) + list(rail.get("require") or {}):
            if name not in names:
                names.append(name)
    return names


def plain_values(values):
    """Ansible's templated values as plain types; 2.15 renders a bool as text ("False")."""
    out = {}
    for key, value in values.items():
        if isinstance(value, str) and value in ("True", "False"):
            value = value == "True"
        out[str(key)] = value
    return out
