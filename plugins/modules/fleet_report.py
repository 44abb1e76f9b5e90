#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done on the controller by the action plugin of the same name
# (plugins/action/fleet_report.py); this file holds its documentation for ansible-doc.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_report
short_description: Make the fleet's report page (index.html) from the records in the artifacts folder
version_added: 0.1.0
description:
  - Reads the records the collection keeps in the artifacts folder O(path) on the Ansible
    controller and writes one self-contained page, C(index.html), beside them. Per host
    C(HOST/audit.json) and C(system-improve.md) (the audit role), C(verify.json) (the verify
    role), C(benchmark.json), C(benchmark-before.json) and C(benchmark-after.json) (the serving
    role); for the fleet C(fleet-audit.json), C(fleet-drift.json) and every
    C(rollout-RUN_ID.json) (the rollout role). Any of them may be missing.
  - The page shows the hosts that need a look and why; a grid of hosts by findings coloured by
    severity, each cell a link to that finding in the host's C(system-improve.md)
    (C(HOST/system-improve.md#ANCHOR), the anchor a Markdown viewer gives the finding's
    heading); the latest rollout as a timeline of its batches (canary, failures, reverts, hosts
    not touched); the drift since the previous run (settings that no longer hold, the read-back,
    P2P against the previous run, what each audit found fixed or new); and per host its P2P
    matrices (one way and both ways, peer and staged) as heatmaps against the floor each pair
    was judged by, the pairs that fell short marked, and its inference benchmark before and
    after the tuning (decode tokens/s, time to first token and inter-token latency percentiles)
    with the noise band and the decode efficiency against its ceiling.
  - The page needs nothing else to open - the stylesheet and the charts (SVG) are inline, there
    is no script, and its Content-Security-Policy allows no request. It is readable on a phone
    (wide parts scroll in their own boxes).
  - Runs in the controller process itself, whatever host the task is for; no module is sent to
    a host. A record that cannot be read (a symbolic link, a FIFO, socket or device, a host
    folder writable by others without the sticky bit, not JSON, too large) is left out and named
    in the result's RV(notes) and at the foot of the page; a FIFO is never opened, so nothing
    blocks.
  - The artifacts folder may be shared with other local users, so nothing is done by path after
    a check. The folder is opened once, one component at a time from C(/), without following
    links; the records are read, and the page compared and written, relative to that open
    folder (each host folder opened the same way), so a link swapped in after a check is never
    followed.
  - The page is written whole and atomically (a temporary file created in the folder, renamed
    over C(index.html), which replaces the entry itself) with mode O(mode) whatever the umask,
    and only when its bytes or mode differ - it depends on the records only (no clock), so a
    second run over the same records changes nothing.
  - The folder must exist and be a directory. Refused with an error naming it, before anything
    is written - O(path) or a host folder that is a symbolic link (the folders above O(path) are
    resolved once, the operator's setup), a link swapped in for a folder of the resolved path, or
    one where C(index.html) is; a folder
    (O(path) or any folder above it) writable by other users without the sticky bit (a sticky
    one such as C(/tmp) is fine); a FIFO, socket, device or anything but a regular file where
    C(index.html) goes.
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: In check mode nothing is written; C(changed) says whether a write was due. The
      report role sets C(check_mode) false on the task, as the other roles do for their records.
  diff_mode:
    support: none
    description: The page is the controller's, not a change on a host; no diff is shown.
  platform:
    support: full
    platforms: posix
    description: Runs on the controller only, which is POSIX.
options:
  path:
    description: The artifacts folder on the controller, an absolute path; C(index.html) is written in it.
    type: path
    required: true
  title:
    description: The page's title and heading (at most 200 characters).
    type: str
    default: GPU fleet report
  mode:
    description: Permission bits of C(index.html), an octal string.
    type: str
    default: "0644"
seealso:
  - module: gpufleet.tuning.artifact_files
"""

EXAMPLES = r"""
- name: Make the fleet page on the controller
  gpufleet.tuning.fleet_report:
    path: "{{ playbook_dir }}/../artifacts"
  delegate_to: localhost
  run_once: true
  check_mode: false

- name: The same, as the role does it (playbooks/report.yml runs it alone)
  ansible.builtin.import_role:
    name: gpufleet.tuning.report
"""

RETURN = r"""
path:
  description: The page written (or, in check mode, that would be written).
  returned: always
  type: str
  sample: /srv/gpufleet/artifacts/index.html
size:
  description: Its size in bytes.
  returned: always
  type: int
  sample: 284512
sha256:
  description: SHA-256 of its content.
  returned: always
  type: str
  sample: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
notes:
  description: Records left out of the page, each with the reason.
  returned: always
  type: list
  elements: str
  sample: ["gpu-07/verify.json: not JSON (Expecting value: line 1 column 1 (char 0))"]
summary:
  description: What the page shows, in counts and names.
  returned: always
  type: dict
  contains:
    hosts:
      description: Hosts on the page.
      type: int
    findings:
      description: Findings of every host's last audit, all together.
      type: int
    p2p_measured:
      description: Hosts whose P2P matrices were measured.
      type: int
    p2p_short:
      description: Hosts with a GPU pair that fell short of its floor.
      type: list
      elements: str
    benchmarked:
      description: Hosts with an inference benchmark.
      type: int
    drifted:
      description: Hosts with settings that no longer hold or are not as configured.
      type: list
      elements: str
    needs_a_look:
      description: Hosts with a rollout failure, drift, a P2P shortfall or regression, a failed benchmark gate or a failed verification.
      type: list
      elements: str
    rollout:
      description: The latest rollout (C(run_id), C(status), C(verdict)), or null without one.
      type: dict
  sample: {"hosts": 16, "findings": 210, "p2p_measured": 12, "p2p_short": ["gpu-01"], "benchmarked": 5,
           "drifted": ["gpu-02"], "needs_a_look": ["gpu-01", "gpu-02"],
           "rollout": {"run_id": "20261201T070000Z-1a2b", "status": "stopped",
                       "verdict": "Stopped after batch 1 of 5: gpu-01 failed verify; gpu-01 reverted; 15 hosts not touched"}}
"""
