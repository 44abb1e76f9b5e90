# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver's XID events since this boot, read from the kernel log.

An XID is the driver's report of a GPU fault: 79 says the GPU fell off the bus, 48 that an
uncorrectable ECC error occurred, 119 that the GSP firmware stopped answering. NVML keeps no
history of them; the kernel log is the one place every one of them is written. Each event
here is one (GPU, code) pair with its count, the times it was first and last seen and its last
message; the audit judges the codes with roles/audit/vars/main/xid_codes.yml.

Sources, the first that gives records wins (the reasons of those that failed are kept):

1. ``/dev/kmsg``: the kernel's ring buffer as records (Documentation/ABI/testing/dev-kmsg:
   ``<prio>,<seq>,<usec since boot>,<flags>;<message>`` and dictionary lines that begin with a
   space). It holds nothing older than this boot and numbers every record. Opening it needs
   CAP_SYSLOG where kernel.dmesg_restrict=1 (Debian's and recent Ubuntu's default); a
   container often has none, or /dev/null or the console in its place, which give no records
   and count as unreadable. Only the kernel facility counts: a program may write to
   /dev/kmsg too.
2. The text logs of a syslog daemon: ``/var/log/kern.log`` (Debian, Ubuntu), then
   ``/var/log/messages`` (RHEL, SUSE), then ``/var/log/syslog``. Only lines of the program
   ``kernel`` stamped at or after ``btime`` of /proc/stat count. Timestamps: RFC 3339 (rsyslog's
   high-precision format, Debian 12 and later) or the traditional ``Dec  7 05:09:01`` (local
   time, no year: the year that does not put it after now). A printk time after ``kernel:``
   (``[  123.456789]``) is the event's time when present, else the timestamp less btime. A
   file with no line of this boot is stale (the daemon writes elsewhere or not at all) and
   counts as unreadable.
3. None of them: every fact unknown, its reason naming each source and why it failed.

``kernel_log_complete`` says whether the records read reach back to boot, so that a count of
zero means none happened: for /dev/kmsg, the first record read has sequence number 0 (nothing
was rotated out of the ring buffer), no EPIPE (records overwritten while reading) was met and
``max_bytes`` was not reached; for a text log, the part read (its last ``max_bytes``) has a
line from before this boot. An incomplete log still gives the XIDs it holds; their counts are
then lower bounds.

Not counted: SXids (an NVSwitch's, not a GPU's), lines of other programs quoting an XID,
dictionary lines of kmsg records, and fragments: the first line of a text log's tail, a last
line without its newline, a line that does not begin ``NVRM: Xid (<address>): <code>,`` (a ring
buffer wrap leaves ``ci:00): 79, ...``, a cut line ``... 79`` has no comma after the code).
"""

from __future__ import annotations

import calendar
import errno
import os
import re
import stat
import time

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import facts

KMSG = "/dev/kmsg"
TEXT_LOGS = ("/var/log/kern.log", "/var/log/messages", "/var/log/syslog")
PROC_STAT = "/proc/stat"
# One /dev/kmsg read returns one record, and a record with its dictionary is at most
# CONSOLE_EXT_LOG_MAX (8192) bytes: a smaller buffer would fail with EINVAL.
READ_SIZE = 8192
MESSAGE_MAX = 300
KMSG_HINT = "reading it needs CAP_SYSLOG or kernel.dmesg_restrict=0"
TEXT_HINT = "reading it needs root or the log's group (adm on Debian and Ubuntu)"
# A traditional timestamp this far after now is last year's (a clock stepped back is no new year).
CLOCK_GRACE_S = 86400
# EPIPE in a row before giving up (the kernel moves the reader to the oldest record each time).
MAX_EPIPE = 1000

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_MONTHS = {name: number for number, name in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}

_KMSG_RECORD = re.compile(rb"([0-9]+),([0-9]+),([0-9]+),[^;]*;(.*)\Z", re.S)
_ESCAPE = re.compile(rb"\\x([0-9A-Fa-f]{2})")
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<domain>[0-9A-Fa-f]{4,8}):(?P<bus>[0-9A-Fa-f]{2}):(?P<device>[0-9A-Fa-f]{2})"
    r"(?:\.(?P<function>[0-7]))?\):\s*(?P<code>[0-9]{1,6}),\s*(?P<rest>.*)\Z", re.S)
# The fields before the human part: pid=0, pid='<unknown>', name=python3, name=<unknown>.
_FIELDS = re.compile(r"(?:(?:pid|name)=(?:'[^']*'|[^,]*),\s*)*")
_RFC3339 = re.compile(
    r"(?P<key>(?P<y>[0-9]{4})-(?P<mo>[0-9]{2})-(?P<d>[0-9]{2})[T ](?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2}))"
    r"(?P<frac>\.[0-9]+)?(?P<zone>Z|[+-][0-9]{2}:?[0-9]{2})?\s+(?P<rest>.*)\Z", re.S)
_TRADITIONAL = re.compile(
    r"(?P<key>(?P<mon>[A-Z][a-z]{2}) +(?P<d>[0-9]{1,2}) (?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2}))"
    r"\s+(?P<rest>.*)\Z", re.S)
_KERNEL_LINE = re.compile(r"\S+\s+kernel:\s*(?:\[\s*(?P<printk>[0-9]+\.[0-9]+)\]\s*)?(?P<message>.*)\Z", re.S)


class _Unreadable(Exception):
    """A source that gave nothing to read; the message is its reason."""


def gather(root="/", gpu_bdfs=(), max_bytes=16 * 1048576):
    """Returns a dict of envelopes:

    - ``kernel_log``: fact(path read, path), e.g. "/dev/kmsg"; unknown with each source's reason;
    - ``kernel_log_complete``: fact(bool, path): the records read reach back to boot (see the
      module's docstring); unknown when no log was read;
    - ``xid``: fact([event, ...], path), one event per (bdf, code) sorted by bus number and code;
    - ``xid_total``: fact(int, path), the sum of the events' counts.

    An event is a plain dict: ``{"bdf": "0000:41:00.0", "gpu": <index of that bdf in gpu_bdfs,
    or None>, "code": 79, "count": 3, "first_s": 1234.567, "last_s": 1300.1, "last_message":
    "GPU has fallen off the bus."}``; times are seconds since boot (None when the source gives
    none). ``gpu_bdfs``: the GPUs' PCI addresses as sysfs names them, in index order. ``root``:
    where ``/`` is (a test's tree). ``max_bytes``: the most read from one source.
    """
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError("max_bytes must be a positive number of bytes, not %r" % (max_bytes,))
    index = _gpu_index(gpu_bdfs)
    reasons = []
    try:
        return _result(KMSG, *_read_kmsg(_under(root, KMSG), index, max_bytes))
    except _Unreadable as exc:
        reasons.append(str(exc))
    boot_time = _boot_time(root)
    now = time.time()
    for name in TEXT_LOGS:
        try:
            return _result(name, *_read_text_log(root, name, index, boot_time, now, max_bytes))
        except _Unreadable as exc:
            reasons.append(str(exc))
    reason = "; ".join(reasons)
    return {key: facts.unknown(KMSG, reason) for key in ("kernel_log", "kernel_log_complete", "xid", "xid_total")}


def _result(source, events, complete):
    listed = events.listed()
    return {
        "kernel_log": facts.fact(source, source),
        "kernel_log_complete": facts.fact(bool(complete), source),
        "xid": facts.fact(listed, source),
        "xid_total": facts.fact(sum(event["count"] for event in listed), source),
    }


def _under(root, path):
    return os.path.join(root, path.lstrip("/"))


def _refused(exc):
    """EPERM or EACCES: dmesg_restrict without CAP_SYSLOG, a file of another group."""
    return isinstance(exc, PermissionError) or getattr(exc, "errno", None) in (errno.EPERM, errno.EACCES)


def _why(path, exc, hint):
    """One line for a source's OSError, naming the path as the node sees it (not the test root)."""
    number = getattr(exc, "errno", None)
    if number == errno.ENOENT:
        return "%s does not exist" % path
    if _refused(exc):
        text = exc.strerror or (os.strerror(number) if number else "Permission denied")
        return "%s: %s (%s)" % (path, text, hint)
    if number is None:
        return "%s: %s" % (path, exc)
    return fileops.describe(OSError(number, exc.strerror or os.strerror(number), path))


# --- the XIDs -----------------------------------------------------------------------------


def _bdf_key(text):
    """``0000:41:00.0`` -> (0, 0x41, 0, 0); None when it is not a PCI address."""
    try:
        domain, bus, rest = str(text).strip().split(":")
        device, function = rest.split(".")
        return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
    except (ValueError, AttributeError):
        return None


def _gpu_index(gpu_bdfs):
    """{address key: (index, bdf as given, lower-case)}; the first of duplicates wins."""
    index = {}
    for position, bdf in enumerate(gpu_bdfs or ()):
        key = _bdf_key(bdf)
        if key is not None and key not in index:
            index[key] = (position, str(bdf).strip().lower())
    return index


class _Events:
    """XID events grouped by (address, code), in the order the log gives them."""

    def __init__(self, index):
        self.index = index
        self.groups = {}

    def add(self, message, seconds):
        """Count ``message`` when it is a GPU's XID; False when it is not one."""
        match = _XID.match(message)
        if not match:
            return False
        function = match.group("function") or "0"
        domain = match.group("domain").lower()
        key = (int(domain, 16), int(match.group("bus"), 16), int(match.group("device"), 16), int(function))
        gpu, bdf = self.index.get(key, (None, "%s:%s:%s.%s" % (
            domain.zfill(4), match.group("bus").lower(), match.group("device").lower(), function)))
        rest = match.group("rest")
        text = rest[_FIELDS.match(rest).end():].strip()[:MESSAGE_MAX]
        code = int(match.group("code"))
        event = self.groups.get((key, code))
        if event is None:
            self.groups[(key, code)] = {"bdf": bdf, "gpu": gpu, "code": code, "count": 1, "first_s": seconds,
                                        "last_s": seconds, "last_message": text}
        else:
            event["count"] += 1
            event["last_s"] = seconds
            event["last_message"] = text
        return True

    def listed(self):
        """The events sorted by PCI address (as numbers) and code."""
        return [self.groups[key] for key in sorted(self.groups)]


# --- /dev/kmsg ----------------------------------------------------------------------------


def _unescape(data):
    """The kernel writes bytes that are not printable (and the backslash) as ``\\xNN``."""
    return _ESCAPE.sub(lambda match: bytes((int(match.group(1), 16),)), data).decode("utf-8", "replace")


class _KmsgParser:
    """Records from /dev/kmsg bytes, whatever the read boundaries (the device gives one record
    per read, a regular file standing in for it gives chunks)."""

    def __init__(self, events):
        self.events = events
        self.pending = []
        self.records = 0
        self.first_seq = None

    def feed(self, chunk):
        """Parse the records ``chunk`` ends; keep the start of one it does not end."""
        parts = chunk.split(b"\n")
        if len(parts) == 1:
            self.pending.append(chunk)
            return
        self.pending.append(parts[0])
        self._line(b"".join(self.pending))
        for line in parts[1:-1]:
            self._line(line)
        self.pending = [parts[-1]]  # a record not ended yet: dropped if nothing ends it

    def _line(self, line):
        if not line or line[:1] == b" ":
            return  # a dictionary line (SUBSYSTEM=pci, DEVICE=+pci:...): not a message
        match = _KMSG_RECORD.match(line)
        if not match:
            return  # a fragment
        self.records += 1
        if self.first_seq is None:
            self.first_seq = int(match.group(2))
        if int(match.group(1)) >> 3:
            return  # not the kernel's facility: a program wrote it
        message = match.group(4)
        if b"Xid" in message:
            self.events.add(_unescape(message), round(int(match.group(3)) / 1e6, 6))


def _read_kmsg(path, index, max_bytes):
    """(events, complete) from the kmsg device at ``path``; _Unreadable when it gives no record."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)
    except OSError as exc:
        raise _Unreadable(_why(KMSG, exc, KMSG_HINT)) from exc
    parser = _KmsgParser(_Events(index))
    total = 0
    overwritten = capped = False
    stopped = None
    epipes = 0
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(mode) or stat.S_ISREG(mode)):
            raise _Unreadable("%s is %s, not the kernel's log device" % (KMSG, fileops.kind(mode)))
        while True:
            if total >= max_bytes:
                capped = True
                break
            try:
                chunk = os.read(fd, READ_SIZE)
            except BlockingIOError:
                break  # EAGAIN: every record read
            except BrokenPipeError:
                overwritten = True  # records were overwritten; the next read gives the oldest left
                epipes += 1
                if epipes > MAX_EPIPE:
                    stopped = "EPIPE on every read"
                    break
                continue
            except OSError as exc:
                if not parser.records and _refused(exc):
                    raise _Unreadable(_why(KMSG, exc, KMSG_HINT)) from exc
                stopped = _why(KMSG, exc, KMSG_HINT)
                break
            epipes = 0
            if not chunk:
                break  # EOF: a regular file standing in for the device
            total += len(chunk)
            parser.feed(chunk)
    finally:
        os.close(fd)
    if not parser.records:
        raise _Unreadable("%s gave no records%s" % (KMSG, ": %s" % stopped if stopped else ""))
    complete = parser.first_seq == 0 and not overwritten and not capped and stopped is None
    return parser.events, complete


# --- text logs ----------------------------------------------------------------------------


def _boot_time(root):
    """(``btime`` of /proc/stat in epoch seconds, None) or (None, why it is unknown)."""
    try:
        data = fileops.read_bytes(_under(root, PROC_STAT))
    except OSError as exc:
        return None, _why(PROC_STAT, exc, "reading it needs /proc mounted")
    if data is None:
        return None, "%s does not exist" % PROC_STAT
    for line in data.decode("ascii", "replace").splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "btime" and fields[1].isdigit():
            return int(fields[1]), None
    return None, "%s has no btime line" % PROC_STAT


def _read_tail(path, max_bytes):
    """The last ``max_bytes`` of a regular file, less a first line cut by that; OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC)
    try:
        st = os.fstat(fd)
        size = st.st_size
        what = fileops.kind(st.st_mode)
        if what:
            raise OSError(errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL, "is %s, not a log file" % what,
                          path)
        # One byte more than the part kept: whether it is a newline says if the part starts a line.
        start = max(0, size - max_bytes - 1)
        if start:
            os.lseek(fd, start, os.SEEK_SET)
        chunks = []
        left = size - start
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if start:
        data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
    return data


class _Clock:
    """Line timestamps as epoch seconds; the last conversion is kept (lines share seconds)."""

    def __init__(self, now):
        self.now = now
        self.last = (None, None)

    def parse(self, line):
        """(epoch seconds, the rest of the line) or None for a line without a known timestamp."""
        match = _RFC3339.match(line)
        if match:
            base = self._cached(match.group("key") + (match.group("zone") or ""), self._rfc3339, match)
            if base is None:
                return None
            return base + float(match.group("frac") or 0), match.group("rest")
        match = _TRADITIONAL.match(line)
        if match and match.group("mon") in _MONTHS:
            base = self._cached(match.group("key"), self._traditional, match)
            return None if base is None else (base, match.group("rest"))
        return None

    def _cached(self, key, convert, match):
        if self.last[0] != key:
            try:
                self.last = (key, convert(match))
            except (ValueError, OverflowError):
                self.last = (key, None)
        return self.last[1]

    @staticmethod
    def _rfc3339(match):
        fields = tuple(int(match.group(name)) for name in ("y", "mo", "d", "h", "mi", "s"))
        if not (1 <= fields[1] <= 12 and 1 <= fields[2] <= 31):
            raise ValueError("not a date")
        zone = match.group("zone")
        if not zone:
            return time.mktime(fields + (0, 0, -1))
        offset = 0
        if zone != "Z":
            digits = zone[1:].replace(":", "")
            offset = (int(digits[:2]) * 60 + int(digits[2:])) * 60 * (-1 if zone[0] == "-" else 1)
        return calendar.timegm(fields + (0, 0, 0)) - offset

    def _traditional(self, match):
        day, hour, minute, second = (int(match.group(name)) for name in ("d", "h", "mi", "s"))
        if not 1 <= day <= 31:
            raise ValueError("not a day")
        year = time.localtime(self.now).tm_year
        epoch = None
        for guess in (year, year - 1):
            epoch = time.mktime((guess, _MONTHS[match.group("mon")], day, hour, minute, second, 0, 0, -1))
            if epoch <= self.now + CLOCK_GRACE_S:
                break
        return epoch


def _read_text_log(root, name, index, boot_time, now, max_bytes):
    """(events, complete) from one syslog file; _Unreadable when absent, unreadable or stale.

    ``boot_time``: _boot_time's answer."""
    try:
        data = _read_tail(_under(root, name), max_bytes)
    except OSError as exc:
        raise _Unreadable(_why(name, exc, TEXT_HINT)) from exc
    boot, why = boot_time
    if boot is None:
        raise _Unreadable("%s: which lines are of this boot is unknown: %s" % (name, why))
    lines = data.split(b"\n")
    lines.pop()  # what follows the last newline: empty, or a line still being written
    events = _Events(index)
    clock = _Clock(now)
    dated = before = this_boot = 0
    for raw in lines:
        stamped = clock.parse(raw.decode("utf-8", "replace"))
        if stamped is None:
            continue
        dated += 1
        epoch, rest = stamped
        if epoch < boot:
            before += 1
            continue
        this_boot += 1
        if "Xid" not in rest:
            continue
        match = _KERNEL_LINE.match(rest)
        if match is None:
            continue  # another program's line
        printk = match.group("printk")
        events.add(match.group("message"), float(printk) if printk else round(epoch - boot, 3))
    if not dated:
        raise _Unreadable("%s has no line with a timestamp this reader knows (RFC 3339 or 'Dec  7 05:09:01')" % name)
    if not this_boot:
        raise _Unreadable("%s has no line from this boot (the syslog daemon does not write it now)" % name)
    return events, before > 0
