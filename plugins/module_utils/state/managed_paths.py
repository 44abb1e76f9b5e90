# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files each area of the collection writes: the only files a revert puts back.

Why a list and not "whatever the record names": the node's record (state.json) is data, and a
revert runs as root. A ``file`` item is put back only when its path is one its area's module
can write with its documented options; anything else in a record was not written by this
collection and is refused (state/checks.py says why, by item).

The names come from the modules and stay equal to theirs (tests/unit/plugins/module_utils/
state/test_managed_paths.py runs each module and checks every path it records):

- sysctl (sysctl_profile): ``/etc/sysctl.d/NN-gpufleet-<profile>.conf``, the values it replaced
  in ``/var/lib/gpufleet-tuning/sysctl/<profile>.json``;
- peermem (nvidia_peermem): ``gpufleet-nvidia-peermem.conf`` in /etc/modules-load.d and
  /etc/modprobe.d;
- nvidia_options (nvidia_driver_options): ``/etc/modprobe.d/<filename>``, its ``filename``
  option (default ``zz-gpufleet-nvidia.conf``; any ``*.conf`` name, with ``adopt``);
- kernel_cmdline: /etc/default/grub, the /etc/default/grub.d/*.cfg file that sets the command
  line, /etc/kernel/cmdline;
- lxc_memlock: a container config, ``/etc/pve/lxc/<vmid>.conf`` (or the node's own
  ``/etc/pve/nodes/<node>/lxc/<vmid>.conf``) or ``<lxcpath>/<name>/config`` (any lxcpath: the
  ``lxc.lxcpath`` of lxc.conf, or the ``path`` option), and the backup written beside it
  (``<config>.<YYYYmmdd-HHMMSS>[-N].gpufleet.bak``, only ever removed by a revert);
- pcie (pcie_maxreadreq, pcie_acs): their udev rules in /etc/udev/rules.d, their helpers in
  /usr/local/libexec/gpufleet, pcie_acs's ``/var/lib/gpufleet-tuning/pcie-acs/state.json``;
- cpu_power: /usr/local/sbin/gpufleet-cpu-power, /etc/systemd/system/gpufleet-cpu-power.service
  and the link that enables it in multi-user.target.wants;
- container_memlock (the container role, through tuning_state): its
  ``90-gpufleet-memlock.conf`` in /etc/security/limits.d, /etc/systemd/system.conf.d and the
  serving unit's drop-in directory;
- serving_launch (serving_launch): the serving unit's launch drop-in,
  ``/etc/systemd/system/<unit>.service.d/NN-gpufleet-<name>.conf``; its content, when a revert
  would write one back, must be such a drop-in (state/checks.py).

A symbolic link is a file's earlier state only where a module can record one: the unit's enable
link (pointing at that unit), and a path where a module replaces a link it found with its own
file. There a link is put back only when it pointed at /dev/null (a masked file) or, for a
config file, at a file of the same name (a configuration repository's copy): never a link to
another file (``-> /etc/shadow``) and never one a boot helper would run through.
"""

from __future__ import annotations

import os
import re

# What a link found at the path may be put back as (``kind`` of a rule).
PLAIN = "plain"      # no link: the module edits the file in place or writes it by content
CONFIG = "config"    # a config file read by the system: a link to /dev/null or to a file of the same name
BOOT = "boot"        # a file root runs or acts on at boot: only a link to /dev/null (masked)
WANTS = "wants"      # the unit's enable link: a link to that unit
BACKUP = "backup"    # a backup the module wrote: a revert only removes it

# Names as the modules check them (sysctl_profile.NAME_RE, lxc_memlock.NAME_RE,
# nvidia_driver_options.FILENAME_RE, the container role's container_serving_unit check).
_PROFILE = r"[a-z0-9][a-z0-9_-]{0,63}"
_LXC_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.+@-]{0,254}"
_MODPROBE_FILE = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,120}\.conf"
_UNIT = r"[A-Za-z0-9:_.@-]+"
_LAUNCH_DROPIN = r"[0-9]{2}-gpufleet-[a-z0-9_-]{1,60}\.conf"
_LXC_CONFIGS = (r"/etc/pve/lxc/[0-9]+\.conf", r"/etc/pve/nodes/[^/]+/lxc/[0-9]+\.conf",
                r"(?:/[^/]+)*/%s/config" % _LXC_NAME)
_BACKUP_SUFFIX = r"\.[0-9]{8}-[0-9]{6}(?:-[0-9]+)?\.gpufleet\.bak"

CPU_POWER_UNIT = "gpufleet-cpu-power.service"

RULES = {
    "sysctl": (
        (r"/etc/sysctl\.d/[0-9]{2}-gpufleet-%s\.conf" % _PROFILE, CONFIG),
        (r"/var/lib/gpufleet-tuning/sysctl/%s\.json" % _PROFILE, PLAIN),
    ),
    "peermem": (
        (r"/etc/modules-load\.d/gpufleet-nvidia-peermem\.conf", CONFIG),
        (r"/etc/modprobe\.d/gpufleet-nvidia-peermem\.conf", CONFIG),
    ),
    "nvidia_options": (
        (r"/etc/modprobe\.d/%s" % _MODPROBE_FILE, CONFIG),
    ),
    "kernel_cmdline": (
        (r"/etc/default/grub", PLAIN),
        (r"/etc/default/grub\.d/[^/.][^/]*\.cfg", PLAIN),
        (r"/etc/kernel/cmdline", PLAIN),
    ),
    "lxc_memlock": tuple((pattern, PLAIN) for pattern in _LXC_CONFIGS)
    + tuple((pattern + _BACKUP_SUFFIX, BACKUP) for pattern in _LXC_CONFIGS),
    "pcie": (
        (r"/etc/udev/rules\.d/90-gpufleet-pcie-(?:maxreadreq|acs)\.rules", BOOT),
        (r"/usr/local/libexec/gpufleet/pcie-(?:maxreadreq|acs)", BOOT),
        (r"/var/lib/gpufleet-tuning/pcie-acs/state\.json", PLAIN),
    ),
    "cpu_power": (
        (r"/usr/local/sbin/gpufleet-cpu-power", BOOT),
        (r"/etc/systemd/system/%s" % re.escape(CPU_POWER_UNIT), BOOT),
        (r"/etc/systemd/system/multi-user\.target\.wants/%s" % re.escape(CPU_POWER_UNIT), WANTS),
    ),
    "container_memlock": (
        (r"/etc/security/limits\.d/90-gpufleet-memlock\.conf", PLAIN),
        (r"/etc/systemd/system\.conf\.d/90-gpufleet-memlock\.conf", PLAIN),
        (r"/etc/systemd/system/%s\.(?:service|scope)\.d/90-gpufleet-memlock\.conf" % _UNIT, PLAIN),
    ),
    "serving_launch": (
        (r"/etc/systemd/system/%s\.service\.d/%s" % (_UNIT, _LAUNCH_DROPIN), PLAIN),
    ),
}
_COMPILED = dict((area, tuple((re.compile(pattern + r"\Z"), kind) for pattern, kind in rules))
                 for area, rules in RULES.items())

# Areas whose files keep the owner they had (a container config of an unprivileged user's
# container is that user's); every other file goes back root's.
OWN_OWNER_AREAS = ("lxc_memlock",)


def node_path(path, root):
    """``path`` as the node names it (``root`` taken off: a test's fake tree), or None when it
    is not a normalized absolute path under ``root`` (``..``, ``//``, a relative path)."""
    if not isinstance(path, str) or "\0" in path or not path.startswith("/") or os.path.normpath(path) != path:
        return None
    if root in ("/", ""):
        return path
    top = os.path.normpath(root)
    if not path.startswith(top + "/"):
        return None
    return path[len(top):]


def kind_of(area, path):
    """The rule kind (PLAIN, CONFIG, BOOT, WANTS, BACKUP) of ``path`` (as the node names it) in
    ``area``, or None when no module of that area writes it."""
    for pattern, kind in _COMPILED.get(area, ()):
        if pattern.match(path):
            return kind
    return None


def link_refusal(kind, path, target):
    """Why a symbolic link ``path -> target`` is not put back, or None when it may be."""
    if not isinstance(target, str) or not target or "\0" in target or "\n" in target or len(target) > 4096:
        return "its link target %r is not a path" % (target,)
    if kind == WANTS:
        if os.path.basename(target) == CPU_POWER_UNIT:
            return None
        return "the enable link of %s would point at %s, another unit" % (CPU_POWER_UNIT, target)
    if target == "/dev/null" and kind in (CONFIG, BOOT):
        return None
    if kind == CONFIG and os.path.basename(target) == os.path.basename(path):
        return None
    if kind == CONFIG:
        return "a link to %s: only a link to /dev/null or to a file of the same name is put back here" % target
    if kind == BOOT:
        return "a link to %s: root runs or reads this file at boot, only a link to /dev/null is put back" % target
    return "a link to %s: no module of the collection records a link there" % target
