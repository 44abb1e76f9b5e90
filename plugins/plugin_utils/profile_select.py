# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Choose a node's profile from what it is, and layer it: base -> platform -> intent (the
inventory's own variables win over all three through Ansible's precedence: the roles' defaults
read the result, ``profile_settings``, and an inventory variable overrides a role default).

Why a platform is chosen by its GPUs first: the GPU model decides the memory bandwidth, the
NVLinks and the firmware's limits (Blackwell's FSP boot); the interconnect, CPU vendor and node
kind only break ties between platforms that hold the same GPU (``prefer``), and when they
differ from the platform's usual shape the reasons say so instead of falling back. A node whose
GPUs no platform holds (an unknown GPU, GPU models mixed across platforms, no GPU) gets ``base``
and the reason. An inventory pin (``gpufleet_profile``) wins over the facts, and the facts' own
choice is kept beside it (``auto``) so a report can say what the pin overrides.
"""

from __future__ import annotations

import copy
import re

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import profile_data, profile_guard


def _model_of(gpu, platform):
    """The platform's model entry for this GPU (by PCI device id, else by NVML name), or None."""
    for model in platform["models"]:
        if gpu["device_id"] and gpu["device_id"] in [d.lower() for d in model.get("device_ids") or []]:
            return model, "device id %s" % gpu["device_id"]
    for model in platform["models"]:
        for pattern in model.get("names") or []:
            if gpu["name"] and re.search(pattern, gpu["name"]):
                return model, "name %r" % gpu["name"]
    return None, None


def _gpu_label(gpu):
    return "%s (%s)" % (gpu["name"] or "name unknown", gpu["device_id"] or "device id unknown")


def _candidate(node, platform):
    """(score, reasons, models) of a platform that holds every GPU of the node, or None."""
    models = {}
    how = {}
    for gpu in node["gpus"]:
        model, why = _model_of(gpu, platform)
        if model is None:
            return None
        models[model["model"]] = model
        how.setdefault(model["model"], (why, 0))
        how[model["model"]] = (why, how[model["model"]][1] + 1)
    reasons = ["%d x %s, by %s" % (count, name, why) for name, (why, count) in sorted(how.items())]
    score = 0
    values = {"interconnect": node["interconnect"], "cpu_vendor": node["cpu_vendor"], "node_kind": node["kind"]}
    for key, wanted in sorted(platform["prefer"].items()):
        have = values[key]
        if have in wanted:
            score += 1
            reasons.append("%s %s, as the platform prefers" % (key.replace("_", " "), have))
        else:
            reasons.append("%s %s, where the platform prefers %s (chosen for its GPUs all the same)"
                           % (key.replace("_", " "), have if have is not None else "unknown", " or ".join(wanted)))
    return score, reasons, [models[name] for name in sorted(models)]


def check_rails(profiles, waive=None):
    """Every platform (and base) with every intent, on every node kind: a layering whose own
    settings break a guard rail that does not depend on the node's CPUs is refused when the
    profiles are loaded, naming the platform, the intent and the node kind, whichever node the
    run is about."""
    for platform_name in [None] + sorted(profiles["platforms"]):
        for intent_name in sorted(profiles["intents"]):
            for kind in profile_data.NODE_KINDS:
                layered = layer(profiles, platform_name, intent_name, [], kind)
                settings, rails = layered[0], [r for r in layered[3] if "min_housekeeping_cpus" not in r]
                found = profile_guard.violations(settings, rails, {"kind": kind}, waive=waive)
                broken = profile_guard.message(found)
                if broken:
                    raise profile_data.ProfileError("profile %s/%s on a %s node breaks its own guard rails: %s"
                                                    % (platform_name or "base", intent_name, kind, broken))


def choose(node, platforms):
    """(platform name or None, reasons, models) for ``node`` (profile_node.describe)."""
    if node.get("gpus_unknown"):
        return None, ["the node's GPUs could not be read (%s): the base profile" % node["gpus_unknown"]], []
    if not node["gpus"]:
        return None, ["no NVIDIA GPU on the PCI bus: the base profile"], []
    found = []
    for name in sorted(platforms):
        result = _candidate(node, platforms[name])
        if result is not None:
            found.append((-result[0], name, result[1], result[2]))
    if not found:
        labels = sorted(set(_gpu_label(g) for g in node["gpus"]))
        if len(labels) > 1:
            why = "GPUs %s: no platform profile holds all of them" % ", ".join(labels)
        else:
            why = "GPU %s: no platform profile knows it" % labels[0]
        return None, [why + "; the base profile (the roles' defaults; pin one with gpufleet_profile, or add one "
                      "with gpufleet_profiles_extra)"], []
    found.sort()
    name, reasons, models = found[0][1:]
    others = [entry[1] for entry in found[1:] if entry[0] == found[0][0]]
    if others:
        reasons.append("as good a match: %s (chosen by name order; pin one with gpufleet_profile)" % ", ".join(others))
    return name, reasons, models


def _expectations(base, platform, models):
    """The expectations in force: base's, the platform's over them, and per GPU model its memory
    bandwidth and NVLink links."""
    merged = profile_data.merge(base.get("expectations") or {}, (platform or {}).get("expectations") or {})
    merged["models"] = copy.deepcopy(models)
    return merged


def layer(profiles, platform_name, intent_name, models, node_kind=None):
    """The settings, expectations and guard rails of base -> platform (then its settings for the
    node's kind: what a VM or a container of that platform cannot hold) -> intent, with each
    setting's layer (``sources``)."""
    base = profiles["base"]
    platform = profiles["platforms"].get(platform_name) if platform_name else None
    intent = profiles["intents"][intent_name]
    settings, sources = {}, {}
    layers = [("base", base.get("settings") or {})]
    if platform is not None:
        layers.append(("platform " + platform["name"], platform["settings"]))
        by_kind = (platform.get("settings_by_node_kind") or {}).get(node_kind)
        if by_kind:
            layers.append(("platform %s on a %s node" % (platform["name"], node_kind), by_kind))
    layers.append(("intent " + intent["name"], intent["settings"]))
    for label, values in layers:
        for key, item in values.items():
            settings[key] = profile_data.merge(settings[key], item) if key in settings else copy.deepcopy(item)
            sources[key] = label
    rails = list(base.get("guard_rails") or []) + list((platform or {}).get("guard_rails") or [])
    return settings, sources, _expectations(base, platform, models), rails


def select(node, profiles, pin=None, intent="throughput", waive=None):
    """The profile of ``node``: name (``platform/intent`` or ``base/intent``), the platform and
    intent, why (``reasons``), the settings with their layers, the expectations, the guard rails
    and what the profile's own settings break of them (``violations``: a profile that breaks its
    own rails is refused before it is used)."""
    if intent not in profiles["intents"]:
        raise profile_data.ProfileError("gpufleet_profile_intent %r is not an intent (known: %s)"
                                        % (intent, ", ".join(sorted(profiles["intents"]))))
    auto_name, auto_reasons, auto_models = choose(node, profiles["platforms"])
    if pin:
        if pin != "base" and pin not in profiles["platforms"]:
            raise profile_data.ProfileError("gpufleet_profile %r is not a platform profile (known: base, %s)"
                                            % (pin, ", ".join(sorted(profiles["platforms"]))))
        name = None if pin == "base" else pin
        reasons = ["pinned by the inventory (gpufleet_profile: %s)" % pin]
        if pin != (auto_name or "base"):
            reasons.append("the facts alone would choose %s: %s" % (auto_name or "base", "; ".join(auto_reasons)))
        found, missing = {}, []
        for gpu in node["gpus"] if name is not None else []:
            model = _model_of(gpu, profiles["platforms"][name])[0]
            if model is None:
                missing.append(_gpu_label(gpu))
            else:
                found[model["model"]] = model
        models = [found[key] for key in sorted(found)]
        if missing:
            reasons.append("GPU %s is not a model of %s: its per-model expectations do not hold it"
                           % (", ".join(sorted(set(missing))), name))
    else:
        name, reasons, models = auto_name, auto_reasons, auto_models
    settings, sources, expectations, rails = layer(profiles, name, intent, models, node.get("kind"))
    violations = profile_guard.violations(settings, rails, node, waive=waive)
    result = {
        "name": "%s/%s" % (name or "base", intent),
        "platform": name or "base",
        "intent": intent,
        "pinned": bool(pin),
        "reasons": reasons,
        "description": (profiles["platforms"][name]["description"] if name else profiles["base"]["description"]),
        "node": node,
        "settings": settings,
        "sources": sources,
        "expectations": expectations,
        "guard_rails": rails,
        "guard_variables": profile_guard.variables({"guard_rails": rails}),
        "violations": violations,
        "waived": sorted(set(waive or []) & set(r["name"] for r in rails)),
    }
    if pin:
        result["auto"] = {"platform": auto_name or "base", "reasons": auto_reasons}
    return result
