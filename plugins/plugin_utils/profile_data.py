# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The profiles as data: the files shipped in roles/profile/files (base.yml, platforms/*.yml,
intents/*.yml) and the inventory's additions (``gpufleet_profiles_extra``), read and checked on
the controller.

Why checked here, once, with messages that name the file, the entry and the value: a profile
sets the host role's variables on every node it is chosen for, so a typo (a variable no role
has, a setting of the wrong type, a regular expression that does not compile) must stop the run
before anything is chosen, not surface as a default silently kept on a fleet.

Only the variables in SETTABLE can be set by a profile: the roles' defaults of exactly these
read the chosen profile (``profile_settings.NAME | default(base)``), so a profile setting any
other would be ignored; a unit test holds the two lists together.
"""

from __future__ import annotations

import copy
import os
import re

import yaml

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# The variables a profile may set, with the type each takes (for the check here; the roles'
# argument specs check values again when they start). Their defaults read profile_settings. Only
# variables whose base value is not null: ansible-core 2.15 renders a template's None as "None".
SETTABLE = {
    "host_cmdline_present": list,
    "host_cmdline_extra": list,
    "host_cmdline_cstate_cap": bool,
    "host_cpu_power_max_idle_latency_us": int,
    "host_cpu_power_governor": str,
    "host_cpu_power_energy_performance_preference": str,
    "host_pcie_mrrs_enabled": bool,
    "host_pcie_size": int,
    "host_pcie_acs_enabled": bool,
    "host_peermem_state": str,
    "host_nvidia_options": dict,
    "host_sysctl_settings": dict,
    "verify_p2p_enabled": bool,
    "verify_p2p_link_floors": bool,
    "verify_p2p_floor_efficiency": dict,
    "verify_p2p_no_peer_access": str,
    "verify_p2p_min_speedup": dict,
    "serving_benchmark_concurrency": list,
    "serving_benchmark_input_tokens": int,
    "serving_benchmark_output_tokens": int,
    "serving_gate_figures": list,
}

# What the selection reads of a node (profile_node.describe) and may prefer.
NODE_KINDS = ("bare_metal", "proxmox_host", "vm", "lxc_guest", "container")
INTERCONNECTS = ("nvswitch", "nvlink", "pcie_switch", "pcie")
PREFER_KEYS = {"interconnect": INTERCONNECTS, "cpu_vendor": None, "node_kind": NODE_KINDS}
GUARD_RAIL_KINDS = ("forbid_args", "require", "min_housekeeping_cpus")
MODEL_KEYS = ("model", "device_ids", "names", "memory_gib", "memory_bandwidth_gbps", "nvlink_links")
RAIL_KEYS = ("name", "why", "node_kinds", "variables") + GUARD_RAIL_KINDS
NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}\Z")
DEVICE_ID = re.compile(r"^10de:[0-9a-f]{4}\Z")


class ProfileError(ValueError):
    """A profile that cannot be used; the message names the profile, the entry and the value."""


def _type_names(types):
    types = types if isinstance(types, tuple) else (types,)
    names = {list: "a list", dict: "a mapping", bool: "true or false", int: "an integer", float: "a number",
             str: "a string", type(None): "null"}
    return " or ".join(names[t] for t in types)


def _is(value, types):
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def load_file(path):
    """One profile file, parsed with the safe loader (a mapping)."""
    try:
        with open(path, "rb") as handle:
            data = yaml.load(handle, Loader=_SAFE_LOADER)  # nosec B506: a safe loader
    except OSError as exc:
        raise ProfileError("cannot read the profile file %s: %s" % (path, fileops.describe(exc)))
    except yaml.YAMLError as exc:
        raise ProfileError("the profile file %s is not YAML: %s" % (path, " ".join(str(exc).split())))
    if not isinstance(data, dict):
        raise ProfileError("the profile file %s must hold a mapping, not %s" % (path, type(data).__name__))
    return data


def load_dir(folder):
    """The shipped profiles under ``folder``: ``{"base": {...}, "platforms": {name: {...}},
    "intents": {name: {...}}}``, each checked; a file's ``name`` must be its file name."""
    if not isinstance(folder, str) or not os.path.isabs(folder):
        raise ProfileError("profiles_dir must be an absolute path, got %r" % (folder,))
    data = {"base": check(load_file(os.path.join(folder, "base.yml")), "base", "base.yml"),
            "platforms": {}, "intents": {}}
    for kind in ("platforms", "intents"):
        where = os.path.join(folder, kind)
        try:
            names = sorted(n for n in os.listdir(where) if n.endswith(".yml"))
        except OSError as exc:
            raise ProfileError("cannot list the profile folder %s: %s" % (where, fileops.describe(exc)))
        for filename in names:
            label = "%s/%s" % (kind, filename)
            entry = check(load_file(os.path.join(where, filename)), kind, label)
            if entry["name"] != filename[:-len(".yml")]:
                raise ProfileError("%s: name %r is not its file name" % (label, entry["name"]))
            data[kind][entry["name"]] = entry
    return data


def merge(base, over):
    """``over`` layered on ``base``: mappings combined key by key (recursively), anything else
    (lists, scalars) replaced. Neither argument is changed."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict((k, copy.deepcopy(v)) for k, v in base.items())
        for key, value in over.items():
            out[key] = merge(out[key], value) if key in out else copy.deepcopy(value)
        return out
    return copy.deepcopy(over)


def extend(shipped, extra):
    """The shipped profiles with the inventory's ``extra`` (``{"base": {...}, "platforms": {name:
    {...}}, "intents": {name: {...}}}``) layered on: an entry of a shipped name is merged over it
    (its models, guard rails and other lists replaced whole), a new name added. Checked again."""
    if extra in (None, {}):
        return shipped
    if not isinstance(extra, dict):
        raise ProfileError("gpufleet_profiles_extra must be a mapping (base, platforms, intents), got %s"
                           % type(extra).__name__)
    unknown = sorted(set(extra) - {"base", "platforms", "intents"})
    if unknown:
        raise ProfileError("gpufleet_profiles_extra: unknown key %s (known: base, platforms, intents)"
                           % ", ".join(repr(k) for k in unknown))
    out = {"base": shipped["base"], "platforms": dict(shipped["platforms"]), "intents": dict(shipped["intents"])}
    if extra.get("base") is not None:
        if not isinstance(extra["base"], dict):
            raise ProfileError("gpufleet_profiles_extra.base must be a mapping, got %s" % type(extra["base"]).__name__)
        out["base"] = check(merge(shipped["base"], dict(extra["base"], name="base")), "base",
                            "gpufleet_profiles_extra.base")
    for kind in ("platforms", "intents"):
        entries = extra.get(kind) or {}
        if not isinstance(entries, dict):
            raise ProfileError("gpufleet_profiles_extra.%s must be a mapping of name to profile, got %s"
                               % (kind, type(entries).__name__))
        for name, entry in entries.items():
            label = "gpufleet_profiles_extra.%s.%s" % (kind, name)
            if not isinstance(entry, dict):
                raise ProfileError("%s must be a mapping, got %s" % (label, type(entry).__name__))
            layered = merge(out[kind].get(name, {}), dict(entry, name=name))
            if name not in shipped[kind]:
                layered.setdefault("origin", "inventory")
            out[kind][name] = check(layered, kind, label)
    return out


def _check_settings(settings, label):
    if not isinstance(settings, dict):
        raise ProfileError("%s: settings must be a mapping of role variable to value, got %s"
                           % (label, type(settings).__name__))
    for name, value in settings.items():
        if name not in SETTABLE:
            raise ProfileError("%s: %r is not a variable a profile can set (settable: %s)"
                               % (label, name, ", ".join(sorted(SETTABLE))))
        if not _is(value, SETTABLE[name]):
            raise ProfileError("%s: %s must be %s, got %r" % (label, name, _type_names(SETTABLE[name]), value))


def _check_models(models, label):
    if not isinstance(models, list) or not models:
        raise ProfileError("%s: models must be a non-empty list of GPU models" % label)
    for index, model in enumerate(models):
        where = "%s: models[%d]" % (label, index)
        if not isinstance(model, dict) or not isinstance(model.get("model"), str):
            raise ProfileError("%s must be a mapping with a model name (model: ...)" % where)
        unknown = sorted(set(model) - set(MODEL_KEYS))
        if unknown:
            raise ProfileError("%s (%s): unknown key %s (known: %s)" % (where, model["model"], ", ".join(repr(k) for k in unknown),
                                                                        ", ".join(MODEL_KEYS)))
        ids = model.get("device_ids") or []
        names = model.get("names") or []
        if not isinstance(ids, list) or not isinstance(names, list) or not (ids or names):
            raise ProfileError("%s (%s): device_ids or names must list how the GPU is recognised" % (where, model["model"]))
        for device_id in ids:
            if not isinstance(device_id, str) or not DEVICE_ID.match(device_id.lower()):
                raise ProfileError("%s (%s): device id %r is not like 10de:2330" % (where, model["model"], device_id))
        for pattern in names:
            _regex(pattern, "%s (%s): names" % (where, model["model"]))
        for key in ("memory_bandwidth_gbps", "memory_gib", "nvlink_links"):
            value = model.get(key)
            if value is not None and (not _is(value, (int, float)) or value < 0):
                raise ProfileError("%s (%s): %s must be a number of at least 0, got %r" % (where, model["model"], key, value))


def _regex(pattern, where):
    if not isinstance(pattern, str):
        raise ProfileError("%s: %r is not a regular expression (a string)" % (where, pattern))
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ProfileError("%s: %r does not compile: %s" % (where, pattern, exc))


def _check_prefer(prefer, label):
    if not isinstance(prefer, dict):
        raise ProfileError("%s: prefer must be a mapping (%s)" % (label, ", ".join(PREFER_KEYS)))
    for key, values in prefer.items():
        if key not in PREFER_KEYS:
            raise ProfileError("%s: prefer.%s is not something a node is chosen by (known: %s)"
                               % (label, key, ", ".join(PREFER_KEYS)))
        if not isinstance(values, list) or not values:
            raise ProfileError("%s: prefer.%s must be a non-empty list" % (label, key))
        allowed = PREFER_KEYS[key]
        for value in values:
            if allowed is not None and value not in allowed:
                raise ProfileError("%s: prefer.%s: %r is not one of %s" % (label, key, value, ", ".join(allowed)))


def _check_expectations(expectations, label):
    if not isinstance(expectations, dict):
        raise ProfileError("%s: expectations must be a mapping" % label)
    counts = expectations.get("gpu_count")
    if counts is not None:
        if not isinstance(counts, dict):
            raise ProfileError("%s: expectations.gpu_count must map node kinds (%s) to GPU counts"
                               % (label, ", ".join(NODE_KINDS)))
        for kind, allowed in counts.items():
            if kind not in NODE_KINDS:
                raise ProfileError("%s: expectations.gpu_count: %r is not a node kind (%s)" % (label, kind, ", ".join(NODE_KINDS)))
            if not isinstance(allowed, list) or not all(_is(n, int) and n > 0 for n in allowed):
                raise ProfileError("%s: expectations.gpu_count.%s must be a list of GPU counts, got %r" % (label, kind, allowed))
    band = expectations.get("decode_efficiency_pct")
    if band is not None and not (isinstance(band, list) and len(band) == 2 and all(_is(v, (int, float)) for v in band)
                                 and 0 <= band[0] < band[1]):
        raise ProfileError("%s: expectations.decode_efficiency_pct must be [low, high] percent, got %r" % (label, band))
    floors = expectations.get("p2p_floors")
    if floors is not None and floors not in ("link", "none"):
        raise ProfileError("%s: expectations.p2p_floors must be link or none, got %r" % (label, floors))


def _check_guard_rails(rails, label):
    if not isinstance(rails, list):
        raise ProfileError("%s: guard_rails must be a list" % label)
    for index, rail in enumerate(rails):
        where = "%s: guard_rails[%d]" % (label, index)
        if not isinstance(rail, dict) or not isinstance(rail.get("name"), str) or not NAME.match(rail["name"]):
            raise ProfileError("%s must be a mapping with a name (letters, digits, _ . -)" % where)
        where = "%s (%s)" % (where, rail["name"])
        unknown = sorted(set(rail) - set(RAIL_KEYS))
        if unknown:
            raise ProfileError("%s: unknown key %s (known: %s)" % (where, ", ".join(repr(k) for k in unknown), ", ".join(RAIL_KEYS)))
        if not isinstance(rail.get("why"), str) or not rail["why"].strip():
            raise ProfileError("%s: why must say what the rail protects" % where)
        kinds = [k for k in GUARD_RAIL_KINDS if k in rail]
        if len(kinds) != 1:
            raise ProfileError("%s: exactly one of %s, got %s" % (where, ", ".join(GUARD_RAIL_KINDS), kinds or "none"))
        kinds_on = rail.get("node_kinds")
        if kinds_on is not None and (not isinstance(kinds_on, list) or any(k not in NODE_KINDS for k in kinds_on)):
            raise ProfileError("%s: node_kinds must list node kinds (%s), got %r" % (where, ", ".join(NODE_KINDS), kinds_on))
        if "require" in rail:
            if not isinstance(rail["require"], dict) or not rail["require"]:
                raise ProfileError("%s: require must map host role variables to the value they must hold" % where)
            names = list(rail["require"])
        else:
            names = rail.get("variables")
            if not isinstance(names, list) or not names:
                raise ProfileError("%s: variables must list the host role variables it reads" % where)
        for name in names:
            if not isinstance(name, str) or not name.startswith("host_"):
                raise ProfileError("%s: %r is not a host role variable" % (where, name))
        if "forbid_args" in rail:
            if not isinstance(rail["forbid_args"], list) or not rail["forbid_args"]:
                raise ProfileError("%s: forbid_args must list regular expressions of kernel arguments" % where)
            for pattern in rail["forbid_args"]:
                _regex(pattern, where + ": forbid_args")
        if "min_housekeeping_cpus" in rail:
            value = rail["min_housekeeping_cpus"]
            if not _is(value, int) or value < 1:
                raise ProfileError("%s: min_housekeeping_cpus must be an integer of at least 1, got %r" % (where, value))


def check(entry, kind, label):
    """``entry`` (one profile) checked for its ``kind`` (base, platforms, intents); it is returned."""
    if not isinstance(entry.get("name"), str) or not NAME.match(entry["name"]):
        raise ProfileError("%s: name must be lower-case letters, digits, _ . - (got %r)" % (label, entry.get("name")))
    known = {"name", "description", "settings", "origin"}
    if kind == "platforms":
        known |= {"models", "prefer", "expectations", "guard_rails", "settings_by_node_kind"}
    elif kind == "base":
        known |= {"expectations", "guard_rails"}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise ProfileError("%s: unknown key %s (known for %s: %s)" % (label, ", ".join(repr(k) for k in unknown),
                                                                      kind, ", ".join(sorted(known))))
    _check_settings(entry.setdefault("settings", {}), label)
    if kind == "platforms":
        _check_models(entry.get("models"), label)
        _check_prefer(entry.setdefault("prefer", {}), label)
        by_kind = entry.setdefault("settings_by_node_kind", {})
        if not isinstance(by_kind, dict):
            raise ProfileError("%s: settings_by_node_kind must map node kinds (%s) to settings" % (label, ", ".join(NODE_KINDS)))
        for node_kind, settings in by_kind.items():
            if node_kind not in NODE_KINDS:
                raise ProfileError("%s: settings_by_node_kind: %r is not a node kind (%s)" % (label, node_kind, ", ".join(NODE_KINDS)))
            _check_settings(settings, "%s: settings_by_node_kind.%s" % (label, node_kind))
    if kind in ("platforms", "base"):
        _check_expectations(entry.setdefault("expectations", {}), label)
        _check_guard_rails(entry.setdefault("guard_rails", []), label)
    entry.setdefault("description", "")
    return entry
