# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decide whether this code runs inside a container, from evidence that matters.

Marker files lie: the H200 machines are full-root VMs booted from a container image that
carry a stale /.dockerenv AND a /run/systemd/container saying "docker", and Ansible's own facts
call them docker guests. So the decision rests on live evidence only: PID 1's environment
(``container=``, set by LXC, podman and systemd-nspawn), a user namespace that does not map the
whole uid range, cgroup paths of LXC/docker/podman payloads, and a read-only /proc/sys mount.
Files that an image can carry (/.dockerenv, /run/.containerenv, /run/systemd/container) only
name the kind once live evidence exists, and are otherwise reported as ignored.

What each kind of machine shows (and so what the tests in test_container.py model):

- a bare host or a full-root VM: identity uid_map ``0 0 4294967295``, PID 1's cgroup is
  ``/init.scope`` (or a VM agent's own: ``0::/process_api/core`` on the H200 machines, where
  PID 1 is ``process_api`` and its environ answers EACCES), /proc/sys read-write. Not a
  container, whatever marker files the image left behind (seen on an H200 machine,
  2026-11-30: /.dockerenv and /run/systemd/container "docker" present, both ignored; this
  collection's CI VM carries a stale /.dockerenv too);
- a privileged podman container (the molecule host scenario): identity uid_map and a
  read-write /proc/sys, so the namespace checks see nothing; PID 1's environment tells
  (podman sets ``container=podman`` in every container), and on cgroup v1 with the host's
  cgroup namespace so does PID 1's ``/libpod_parent/libpod-<id>`` path. Seen there
  (2026-11-30): "PID 1 environment has container=podman", "PID 1 cgroup path names a podman
  payload", then the markers "/run/systemd/container says podman", "/run/.containerenv
  exists";
- an unprivileged LXC or podman container: ``container=lxc``/``podman`` in PID 1's
  environment, a partial uid_map (``0 100000 65536``) and a read-only /proc/sys;
- docker: a read-only /proc/sys (unprivileged) and a ``/docker/<id>`` cgroup path where the
  cgroup namespace is the host's; docker sets no ``container=`` variable.

The rule for the modules that do host work (cpu_power, pcie_maxreadreq): inside a container
they refuse to *write*, never to look. A call whose plan is empty is ok and unchanged; a
runtime write is refused with what it would have changed (``refusal()``); boot-time
persistence (a systemd unit, a udev rule) is left out of the plan and reported in
skipped_keys (``persistence_left_alone()``), since what a container installs runs when the
container starts, not when the host boots. ``allow_in_container`` is the operator's word that
the detection is wrong and this is the host: the module then behaves as on the host.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops

_CGROUP_HINTS = (
    (re.compile(r"/lxc\.payload\.([^/]+)"), "lxc"),
    (re.compile(r"/lxc/([^/]+)"), "lxc"),
    (re.compile(r"/docker[-/]([0-9a-f]{12,})"), "docker"),
    (re.compile(r"/libpod-([0-9a-f]{12,})"), "podman"),
    (re.compile(r"/machine\.slice/.*machine-([^/]+)\.scope"), "systemd-nspawn"),
)

_FULL_RANGE = 4294967295


def _pid1_container_var(proc_root):
    data = fileops.read_quiet(os.path.join(proc_root, "1", "environ"))
    if not data:
        return None
    for item in data.split("\0"):
        if item.startswith("container="):
            return item.split("=", 1)[1] or "unknown"
    return None


def uid_map_is_identity(proc_root="/proc"):
    """True when this process sees the initial user namespace's full uid range, 0 to 2^32-1.

    None when the map cannot be read. An unprivileged container maps a slice only
    (e.g. ``0 100000 65536``), which is what makes its root unable to touch host state.
    """
    data = fileops.read_quiet(os.path.join(proc_root, "self", "uid_map"))
    if data is None:
        return None
    rows = [line.split() for line in data.strip().splitlines() if line.strip()]
    return rows == [["0", "0", str(_FULL_RANGE)]]


def _proc_sys_read_only(proc_root):
    try:
        return bool(os.statvfs(os.path.join(proc_root, "sys")).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _marker_files(root):
    """(description, kind) of container marker files present; an image can carry them stale."""
    found = []
    text = fileops.read_quiet(os.path.join(root, "run", "systemd", "container"))
    if text and text.strip():
        found.append(("/run/systemd/container says %s" % text.strip(), text.strip()))
    if os.path.exists(os.path.join(root, "run", ".containerenv")):
        found.append(("/run/.containerenv exists", "podman"))
    if os.path.exists(os.path.join(root, ".dockerenv")):
        found.append(("/.dockerenv exists", "docker"))
    return found


def detect(proc_root="/proc", root="/"):
    """Return ``{"detected": bool, "kind": str or None, "evidence": [...], "ignored": [...]}``.

    ``evidence`` lists the live facts the decision rests on; ``ignored`` lists marker files
    seen but not trusted on their own (stale ones on a VM, for one).
    """
    evidence = []
    kind = None

    value = _pid1_container_var(proc_root)
    if value:
        evidence.append("PID 1 environment has container=%s" % value)
        kind = value

    if uid_map_is_identity(proc_root) is False:
        evidence.append("user namespace maps a partial uid range (unprivileged container)")
        kind = kind or "user-namespace"

    cgroup = fileops.read_quiet(os.path.join(proc_root, "1", "cgroup")) or ""
    for pattern, name in _CGROUP_HINTS:
        if pattern.search(cgroup):
            evidence.append("PID 1 cgroup path names a %s payload" % name)
            kind = kind if kind not in (None, "user-namespace") else name
            break

    if _proc_sys_read_only(proc_root):
        evidence.append("/proc/sys is mounted read-only")

    markers = _marker_files(root)
    ignored = []
    if evidence:
        for text, marker_kind in markers:
            evidence.append(text)
            if kind in (None, "user-namespace"):
                kind = marker_kind
        kind = kind or "unknown"
    else:
        ignored = [text for text, _kind in markers]

    return {
        "detected": bool(evidence),
        "kind": kind,
        "evidence": evidence,
        "ignored": ignored,
    }


def guarded(found, allow_in_container):
    """True when writes must be refused: a container was detected and the operator did not
    say that this is the host."""
    return bool(found["detected"]) and not allow_in_container


def refusal(actions, found, owner):
    """The failure message of a refused runtime write: ``actions`` (phrases such as "set MRRS
    4096 on 0000:41:00.0") and ``owner`` ("PCI config space and udev") name what and whose."""
    return ("refusing to %s from inside a container (%s): %s belong to the host, so run this on "
            "the host (gpufleet.tuning.host role); nothing was changed. Set allow_in_container=true "
            "only where the detection is wrong and this is the host"
            % ("; ".join(actions), "; ".join(found["evidence"]), owner))


def persistence_left_alone(found, mechanism, would):
    """The skipped_keys text for boot-time persistence left out of the plan in a container:
    ``mechanism`` says what it is ("a systemd unit"), ``would`` what the plan held."""
    return ("inside a container (%s): %s written here acts when the container starts, not when the "
            "host boots, so it would keep nothing for the host; left alone (the plan would %s). Set "
            "allow_in_container=true only where this is the host"
            % ("; ".join(found["evidence"]), mechanism, would))
