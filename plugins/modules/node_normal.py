#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done on the controller by the action plugin of the same name
# (plugins/action/node_normal.py); this file holds its documentation for ansible-doc.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_normal
short_description: Say whether a host is normal - against its profile's expectations and its fleet peers
version_added: 0.1.0
description:
  - "Reads the host's figures: every P2P pair one way and both ways (O(verify), else the host's
    C(verify.json)), decode tokens/s and TTFT p50 at one stream and the decode efficiency
    (O(benchmark), else its C(benchmark.json))."
  - "Absolute: the GPU count for the node kind and the active NVLinks per GPU (from the
    profile's node), each P2P pair against its floor (the link-derived floor verify applied, or
    the profile's), the decode efficiency against the profile's band (the GPU model's memory
    bandwidth named as the reference). Each check is V(ok), V(outside), V(unknown) (with why) or
    V(not_applicable)."
  - "Peers: the hosts of the same profile in O(artifacts) (their C(normal.json)); per figure the
    median and the median absolute deviation (MAD); the host is an outlier on a figure more than
    O(mads) MADs from the median (the MAD taken as at least O(min_spread_pct) % of the median).
    With fewer than O(min_peers) hosts having a figure, no peer verdict and the reason."
  - Writes C(normal.json) (the verdict, with the figures, for the next host's peers and the fleet
    page) into O(path), whole and atomically, only when its bytes differ.
  - Runs in the controller process; no module is sent to the host.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: In check mode nothing is written. The roles set C(check_mode) false on the task
      (a record on the controller, not a change to the host).
  diff_mode:
    support: none
    description: A record on the controller.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller only.
options:
  host:
    description: The host's inventory name.
    type: str
    required: true
  profile:
    description: The host's profile (M(gpufleet.tuning.profile_select)'s C(profile)); empty judges
      no absolute expectation and groups the host with no peers.
    type: dict
    default: {}
  verify:
    description: This run's verify result (the verify role's C(verify_report)); empty reads C(verify.json).
    type: dict
  benchmark:
    description: This run's benchmark comparison; empty reads C(benchmark.json).
    type: dict
  artifacts:
    description: The artifacts folder whose host folders hold the peers' C(normal.json); default the folder above O(path).
    type: path
  mads:
    description: How many MADs from the peers' median make an outlier (at least 0.5).
    type: float
    default: 3.0
  min_peers:
    description: The fewest hosts of the profile (this one included) with a figure for a peer verdict on it (at least 2).
    type: int
    default: 3
  min_spread_pct:
    description: The MAD is taken as at least this percentage of the median.
    type: float
    default: 2.0
  path:
    description: The host's folder on the controller, an absolute path.
    type: path
    required: true
  mode:
    description: Permission bits of the file, an octal string.
    type: str
    default: "0644"
notes:
  - docs/profiles.md, "Is this node normal?".
seealso:
  - module: gpufleet.tuning.profile_select
  - module: gpufleet.tuning.p2p_bandwidth
  - module: gpufleet.tuning.inference_benchmark
"""

EXAMPLES = r"""
- name: Hold the host to its profile and its peers
  gpufleet.tuning.node_normal:
    host: "{{ inventory_hostname }}"
    profile: "{{ profile_selected.profile }}"
    verify: "{{ verify_report }}"
    path: "{{ inventory_hostname | gpufleet.tuning.artifact_dir(playbook_dir ~ '/../artifacts') }}"
    mads: 4
  register: normal
  check_mode: false

- name: Fail a host outside its expectations
  ansible.builtin.assert:
    that: normal.outside | length == 0
    fail_msg: "{{ normal.lines }}"
"""

RETURN = r"""
host:
  description: The host's inventory name.
  returned: always
  type: str
time:
  description: When it was judged, UTC.
  returned: always
  type: str
profile:
  description: The profile's C(name), C(platform) and C(reasons).
  returned: always
  type: dict
checks:
  description: The absolute checks, each C(check) (V(gpu_count), V(nvlink_links), V(p2p_floor),
    V(decode_efficiency)), C(item), C(status), C(message), C(value), C(expected).
  returned: always
  type: list
  elements: dict
outside:
  description: The checks whose status is V(outside).
  returned: always
  type: list
  elements: dict
figures:
  description: The host's figures, each C(figure), C(value), C(unit), C(better) (V(higher) or V(lower)), C(source).
  returned: always
  type: list
  elements: dict
peers:
  description: C(profile), C(hosts) (of the profile), C(compared) (per figure C(value), C(median),
    C(mad), C(mads_away), C(hosts), C(direction)), C(outliers) (the same, with C(message)),
    C(reason) when no peer verdict could be made.
  returned: always
  type: dict
normal:
  description: True when nothing is outside and no figure is an outlier; null when nothing could be judged.
  returned: always
  type: bool
lines:
  description: One line per problem (an expectation outside, an outlier with its figure and the peers' median).
  returned: always
  type: list
  elements: str
files:
  description: The files written (or due, in check mode).
  returned: always
  type: list
  elements: str
"""
