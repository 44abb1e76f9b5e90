# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe AER error counters, as the kernel keeps them per device in sysfs.

What the kernel writes (drivers/pci/pcie/aer.c, ``aer_stats_dev_attr`` and
``aer_stats_rootport_attr``; Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats):

- ``/sys/bus/pci/devices/<bdf>/aer_dev_correctable``, ``aer_dev_nonfatal``, ``aer_dev_fatal``:
  one line ``"%s %llu"`` per error bit of the AER status register that has a name, zeros
  included (correctable: RxErr, BadTLP, BadDLLP, Rollover, Timeout, NonFatalErr, CorrIntErr,
  HeaderOF; uncorrectable: Undefined, DLP, SDES, TLP, FCP, CmpltTO, CmpltAbrt, UnxCmplt, RxOF,
  MalfTLP, ECRC, UnsupReq, ACSViol, UncorrIntErr, BlockedTLP, AtomicOpBlocked, TLPBlockedErr,
  PoisonTLPBlocked), a line ``dev_cor_errs_bit[N] <n>`` (``dev_nonfatal_errs_bit``,
  ``dev_fatal_errs_bit``) for an unnamed bit only once it counted something, and last
  ``TOTAL_ERR_COR <n>`` / ``TOTAL_ERR_NONFATAL <n>`` / ``TOTAL_ERR_FATAL <n>``. The totals
  count the ERR_* messages the device sent: one message can carry several bits, so a total may
  be less than the sum of its lines. Kernels 4.19 to 5.x named the bits in words with spaces
  ("Receiver Error 2", "RELAY_NUM Rollover 0", as the ABI document still shows), so a line's
  name is everything before its last field.
- root ports and root complex event collectors only: ``aer_rootport_total_err_cor``,
  ``aer_rootport_total_err_fatal``, ``aer_rootport_total_err_nonfatal``, one number each: the
  ERR_* messages the port received from its whole hierarchy, its own included. They move only
  where the kernel handles AER itself (the root port's AER interrupt); the per-device files
  also count errors firmware reports through APEI.

"As seen by the device": an endpoint's bad link may count at its link partner (the root port
or switch port above it) while the endpoint reads 0, so a GPU's counters are read together
with those of the bridges on its path. The counts live in kernel memory from the device's
enumeration (boot, hotplug, a rescan) and are never reset otherwise.

The files are absent when the device has no AER capability (``pdev->aer_stats`` is not
allocated, the attributes are hidden) or the kernel was built without CONFIG_PCIEAER; such a
device is unknown here with that reason, never 0.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import facts
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import pci_config

# key, file, the name of its total line
DEVICE_FILES = (
    ("correctable", "aer_dev_correctable", "TOTAL_ERR_COR"),
    ("nonfatal", "aer_dev_nonfatal", "TOTAL_ERR_NONFATAL"),
    ("fatal", "aer_dev_fatal", "TOTAL_ERR_FATAL"),
)
ROOTPORT_FILES = (
    ("correctable", "aer_rootport_total_err_cor"),
    ("nonfatal", "aer_rootport_total_err_nonfatal"),
    ("fatal", "aer_rootport_total_err_fatal"),
)
_COUNT_RE = re.compile(r"[0-9]+\Z")


class _Missing(Exception):
    """The file does not exist."""


def parse_stats(text, total_name):
    """(total, {name: count}) of one aer_dev_* file's text; ValueError naming the line that is
    not ``<name> <count>`` or the missing total line."""
    total = None
    counts = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.rsplit(None, 1)
        if len(parts) != 2 or not _COUNT_RE.match(parts[1]):
            raise ValueError("line %d %r is not '<name> <count>'" % (number, line[:80]))
        name, count = parts[0].strip(), int(parts[1])
        if name == total_name:
            if total is not None:
                raise ValueError("line %d repeats %s" % (number, total_name))
            total = count
        else:
            counts[name] = count
    if total is None:
        raise ValueError("no %s line" % total_name)
    return total, counts


def _read_text(path):
    """The file's text; _Missing when absent, OSError when unreadable."""
    data = fileops.read_bytes(path)
    if data is None:
        raise _Missing(path)
    return data.decode("utf-8", "replace")


def _missing_reason(path):
    return "%s does not exist: no AER capability, or a kernel without AER statistics" % path


def _read_device_file(path, total_name):
    """(envelope of the total, {name: count} or None)."""
    try:
        text = _read_text(path)
    except _Missing:
        return facts.unknown(path, _missing_reason(path)), None
    except (OSError, IOError) as exc:
        return facts.unknown(path, fileops.describe(exc)), None
    try:
        total, counts = parse_stats(text, total_name)
    except ValueError as exc:
        return facts.unknown(path, "cannot parse %s: %s" % (path, exc)), None
    return facts.fact(total, path), counts


def _bad_bdf(bdf):
    """Why ``bdf`` cannot name a directory of /sys/bus/pci/devices, or None."""
    if isinstance(bdf, str) and pci_config.is_sysfs_bdf(bdf):
        return None
    return "%r is not a PCI address as sysfs names it (DDDD:BB:DD.F, lower-case hex)" % (bdf,)


def device_counters(sys_root, bdf):
    """{"correctable": env, "nonfatal": env, "fatal": env, "counts": env}

    correctable/nonfatal/fatal: fact(TOTAL as int, <file path>) or unknown(<file path>, reason:
    "<path> does not exist: no AER capability, or a kernel without AER statistics" / "cannot
    parse <path>: ..." / the OSError, e.g. permission); counts: fact({"correctable": {"RxErr":
    3, ...only names with count > 0}, "nonfatal": {...}, "fatal": {...}}, <device dir>), holding
    the files that could be read (unknown when none of the three could be read). Names are the
    kernel's own (``RxErr``, ``dev_cor_errs_bit[3]``, or the older kernels' words)."""
    directory = pci_config.device_dir(sys_root, bdf) if isinstance(bdf, str) else str(bdf)
    bad = _bad_bdf(bdf)
    if bad:
        found = dict((key, facts.unknown(directory, bad)) for key, _name, _total in DEVICE_FILES)
        found["counts"] = facts.unknown(directory, bad)
        return found
    found = {}
    counts = {}
    for key, name, total_name in DEVICE_FILES:
        found[key], per_name = _read_device_file(os.path.join(directory, name), total_name)
        if per_name is not None:
            counts[key] = dict((error, count) for error, count in per_name.items() if count > 0)
    if counts:
        found["counts"] = facts.fact(counts, directory)
    else:
        found["counts"] = facts.unknown(directory, "none of %s could be read (%s)" % (
            ", ".join(name for _key, name, _total in DEVICE_FILES),
            found["correctable"]["unknown"]))
    return found


def rootport_counters(sys_root, bdf):
    """{"correctable": env, "nonfatal": env, "fatal": env}: the ERR_* messages a root port (or
    root complex event collector) received from its hierarchy, from aer_rootport_total_err_*;
    fact(int, <file path>) or unknown(<file path>, reason), absent on every other device."""
    directory = pci_config.device_dir(sys_root, bdf) if isinstance(bdf, str) else str(bdf)
    bad = _bad_bdf(bdf)
    found = {}
    for key, name in ROOTPORT_FILES:
        path = os.path.join(directory, name)
        if bad:
            found[key] = facts.unknown(directory, bad)
            continue
        try:
            text = _read_text(path).strip()
        except _Missing:
            found[key] = facts.unknown(path, "%s does not exist: not a root port or root complex event "
                                             "collector, no AER capability, or a kernel without AER "
                                             "statistics" % path)
            continue
        except (OSError, IOError) as exc:
            found[key] = facts.unknown(path, fileops.describe(exc))
            continue
        if not _COUNT_RE.match(text):
            found[key] = facts.unknown(path, "cannot parse %s: %r is not a count" % (path, text[:80]))
        else:
            found[key] = facts.fact(int(text), path)
    return found


def path_counters(sys_root, bdfs):
    """For the bridges on a GPU's PCI path (a list of BDFs, root port first): (envelope,
    unreported). The envelope is fact([{"bdf": b, "correctable": n, "nonfatal": n, "fatal":
    n}], "derived") listing, in the order given, only the bridges whose three totals could be
    read (plain ints, not envelopes); ``unreported`` lists the other bridges (no AER statistics,
    or a total unreadable or unparsable), also in order."""
    reported = []
    unreported = []
    for bdf in bdfs:
        found = device_counters(sys_root, bdf)
        totals = dict((key, facts.value(found[key])) for key, _name, _total in DEVICE_FILES)
        if any(value is None for value in totals.values()):
            unreported.append(bdf)
            continue
        entry = {"bdf": bdf}
        entry.update(totals)
        reported.append(entry)
    return facts.fact(reported, "derived"), unreported
