# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node fact as the controller reads it back: gpufleet.tuning.node_facts wraps every fact in an
envelope, ``{"source": ..., "value": ...}``, or ``{"source": ..., "unknown": why, "value": null}``
when it could not be read. One reader of that shape for the controller's code that only wants the
value (the profile's node, the fleet page, the health verdict's per-GPU view); the audit's rules
read the envelopes themselves (audit_rules.view), since they must say why a fact is unknown."""

from __future__ import annotations


def value(node):
    """An envelope's value (None when unknown), or ``node`` itself when it is not an envelope."""
    if isinstance(node, dict) and "value" in node and "source" in node:
        return None if "unknown" in node else node["value"]
    return node
