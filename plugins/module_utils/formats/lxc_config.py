# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read and edit LXC and Proxmox container configs without disturbing a byte we do not own.

Why not a key/value parser that writes the file back: Proxmox keeps more than keys in
``/etc/pve/lxc/<vmid>.conf``. The description is stored as ``#`` comment lines (URL-encoded
text), snapshots and pending changes follow as ``[name]`` / ``[pve:pending]`` sections with
their own keys (raw ``lxc.*`` lines included), and operators hand-edit plain LXC configs with
comments and their own spacing. So the file is held as a list of lines, each with its own end
of line (LF, CRLF, or none on the last line), and an edit touches only the lines of one key in
the live section (everything before the first line that starts with ``[``).

Both spellings of a raw key are recognised: ``key: value`` (Proxmox's own, which its writer
emits) and ``key = value`` (plain LXC; Proxmox's parser accepts it too, with or without
spaces). A new line is written in the file's own style, decided from its existing key lines.

Limit values follow LXC 5's ``lxc.prlimit.*`` parser (src/lxc/confile.c, set_config_prlimit):
``unlimited`` or a number read with strtoull, optionally ``soft:hard``; a single value sets both
halves. strtoull wraps a leading minus, so an existing ``-1`` means RLIM_INFINITY, i.e.
unlimited, and is treated as such. Values this collection writes are stricter (see
``parse_limit``): a plain number of bytes, ``unlimited``, or ``soft:hard`` with soft <= hard.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import rlimit

MEMLOCK_KEY = "lxc.prlimit.memlock"

ACCEPTED_LIMITS = ("'unlimited', a plain number of bytes (e.g. 68719476736), or SOFT:HARD where "
                   "each half is 'unlimited' or a number of bytes and SOFT <= HARD")

_SUFFIXES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SUFFIXED = re.compile(r"^([0-9]+)\s*([KMGT])(?:i?B)?\Z", re.IGNORECASE)
_DIGITS = re.compile(r"^[0-9]+\Z")

# A key line: optional indent, a key, optional blanks, then ':' or '='. Comments never match.
_KEY_LINE = re.compile(rb"^[ \t]*([A-Za-z0-9_][A-Za-z0-9_.\-]*)([ \t]*)([:=])([ \t]*)")
# Keys of Proxmox's own container schema (pve-container, PVE::LXC::Config), written "key: value".
_PVE_KEYS = re.compile(
    rb"^(arch|cmode|console|cores|cpulimit|cpuunits|debug|description|entrypoint|env|features|"
    rb"hookscript|hostname|lock|memory|nameserver|onboot|ostype|parent|protection|rootfs|"
    rb"searchdomain|snaptime|startup|swap|tags|template|timezone|tty|(?:dev|mp|net|unused)[0-9]+)\Z")


_PVE_KEY_SHAPE = re.compile(rb"^[a-z][a-z0-9_-]*\Z")


class ConfigError(Exception):
    """A config file or a limit value this module refuses to work with."""


# ---------------------------------------------------------------------------------------------
# Limit values


def parse_limit(value):
    """Validate a wanted limit (module input) and return ``(soft, hard)`` integers.

    Accepted: ``unlimited`` (any case), a plain number of bytes, or ``SOFT:HARD`` of those with
    SOFT <= HARD. Size suffixes are refused rather than converted, because LXC itself reads a
    plain number (``64G`` in the config makes the container fail to start); the error shows the
    number to write. ``-1`` and ``infinity`` are refused with a hint: they are other tools'
    spellings (LXC happens to read ``-1`` as unlimited through strtoull, by accident).
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError("limit %r is not valid: use %s" % (value, ACCEPTED_LIMITS))
    text = str(value).strip()
    parts = text.split(":")
    if len(parts) > 2 or not text:
        raise ConfigError("limit %r is not valid: use %s" % (value, ACCEPTED_LIMITS))
    halves = [_input_half(part.strip(), value) for part in parts]
    soft, hard = halves[0], halves[-1]
    if soft > hard:
        raise ConfigError("limit %r is not valid: the soft limit %s is above the hard limit %s (the "
                          "kernel refuses that and the container would not start); use %s"
                          % (value, rlimit.format_value(soft), rlimit.format_value(hard), ACCEPTED_LIMITS))
    return soft, hard


def _input_half(text, whole):
    if text.lower() == "unlimited":
        return rlimit.INFINITY
    if _DIGITS.match(text):
        number = int(text)
        if number <= rlimit.INFINITY:
            return number
        raise ConfigError("limit %r is not valid: %s is larger than the largest limit (%d); use %s"
                          % (whole, text, rlimit.INFINITY, ACCEPTED_LIMITS))
    hint = ""
    match = _SUFFIXED.match(text)
    if match:
        hint = " (LXC reads a plain number of bytes: write %d for %s)" % (
            int(match.group(1)) * _SUFFIXES[match.group(2).upper()], text)
    elif text.lower() in ("-1", "infinity", "inf"):
        hint = " (write 'unlimited')"
    raise ConfigError("limit %r is not valid%s: use %s" % (whole, hint, ACCEPTED_LIMITS))


def parse_lxc_value(raw):
    """What LXC 5 makes of an existing ``lxc.prlimit.*`` value: ``(soft, hard)``, or None.

    None means an empty value, which clears the limit back to LXC's default (inherited from
    the process that starts the container). Raises ConfigError for a value LXC refuses (the
    container would not start) or one the kernel refuses (soft above hard).
    """
    text = raw.strip()
    if not text:
        return None
    soft, rest = _lxc_half(text, raw)
    rest = rest.lstrip()
    if rest.startswith(":"):
        rest = rest[1:].lstrip()
    elif rest:
        raise ConfigError("%r is not a limit LXC can read" % raw)
    if rest:
        hard, rest = _lxc_half(rest, raw)
        if rest.strip():
            raise ConfigError("%r is not a limit LXC can read" % raw)
    else:
        hard = soft
    if soft > hard:
        raise ConfigError("%r has a soft limit above the hard limit: the container cannot start" % raw)
    return soft, hard


def _lxc_half(text, raw):
    """One half as LXC's parse_limit_value reads it: ``unlimited`` as a prefix, else strtoull."""
    if text.startswith("unlimited"):
        return rlimit.INFINITY, text[len("unlimited"):]
    index = 0
    while index < len(text) and text[index] in " \t\n\v\f\r":
        index += 1
    negative = False
    if index < len(text) and text[index] in "+-":
        negative = text[index] == "-"
        index += 1
    end = index
    while end < len(text) and "0" <= text[end] <= "9":
        end += 1
    if end == index:
        return 0, text  # strtoull converted nothing: 0, and the text is left where it was
    number = int(text[index:end])
    if number > rlimit.INFINITY:
        raise ConfigError("%r is out of range for LXC (strtoull reports ERANGE)" % raw)
    if negative:
        number = (-number) & rlimit.INFINITY  # strtoull negates in unsigned arithmetic
    return number, text[end:]


def effective_limit(entries):
    """What LXC applies from a key's live lines: the last one wins, an empty one clears.

    ``entries`` is ``ContainerConfig.entries(key)``. Returns ``(pair or None, raw text of the
    deciding line or None, error or None)``; an error means LXC would refuse that value.
    """
    pair, raw, error = None, None, None
    for _index, value in entries:
        raw = value
        try:
            pair, error = parse_lxc_value(value), None
        except ConfigError as exc:
            pair, error = None, str(exc)
    return pair, raw, error


def lxcpath_setting(text):
    """``lxc.lxcpath`` of the text of ``/etc/lxc/lxc.conf`` (LXC reads the first one), or None."""
    for line in (text or "").splitlines():
        match = re.match(r"^[ \t]*lxc\.lxcpath[ \t]*=[ \t]*(\S.*?)[ \t]*\Z", line)
        if match:
            return match.group(1)
    return None


def split_tags(value):
    """Proxmox's ``tags`` value as a list: it is stored ``a;b`` and split on ``;``, ``,`` and blanks."""
    return [tag for tag in re.split(r"[;,\s]+", value or "") if tag]


# ---------------------------------------------------------------------------------------------
# Config files


class Line:
    """One line: its bytes without the end of line, and the end of line itself."""

    __slots__ = ("body", "eol")

    def __init__(self, body, eol):
        self.body = body
        self.eol = eol

    def __repr__(self):
        return "Line(%r, %r)" % (self.body, self.eol)


def split_lines(data):
    """Bytes to Lines; ``b"".join(body + eol)`` gives the same bytes back."""
    lines = []
    start = 0
    while start < len(data):
        newline = data.find(b"\n", start)
        if newline == -1:
            lines.append(Line(data[start:], b""))
            break
        chunk = data[start:newline]
        if chunk.endswith(b"\r"):
            lines.append(Line(chunk[:-1], b"\r\n"))
        else:
            lines.append(Line(chunk, b"\n"))
        start = newline + 1
    return lines


def join_lines(lines):
    return b"".join(line.body + line.eol for line in lines)


def looks_like_config(data, proxmox):
    """Whether ``data`` (bytes) reads as a container config and nothing else: every line blank, a
    comment, or an ``lxc.*`` key; in a Proxmox config (``proxmox``) also a snapshot header
    ``[name]`` or any ``key: value`` of its schema's shape (the schema grows with each release).
    A revert checks a recorded config with it before writing it back, so a crafted record cannot
    pass another file that happens to be named ``config`` (``/etc/selinux/config``) as one."""
    for line in split_lines(data):
        body = line.body.strip()
        if not body or body.startswith(b"#"):
            continue
        if proxmox and body.startswith(b"[") and body.endswith(b"]"):
            continue
        match = _KEY_LINE.match(body)
        if match is None:
            return False
        key = match.group(1)
        if key.startswith(b"lxc."):
            continue
        if not (proxmox and match.group(3) == b":" and _PVE_KEY_SHAPE.match(key)):
            return False
    return True


def is_proxmox_path(path):
    """Proxmox keeps container configs as ``<vmid>.conf`` under /etc/pve."""
    path = path or ""
    return "/etc/pve/" in path or re.match(r"^[0-9]+\.conf\Z", os.path.basename(path)) is not None


def _key_regex(key):
    return re.compile(rb"^([ \t]*" + re.escape(key.encode("ascii")) + rb"[ \t]*[:=][ \t]*)(.*?)([ \t]*)\Z")


class ContainerConfig:
    """A container config file held as Lines; only the live section is ever edited."""

    def __init__(self, data, path=None):
        if b"\0" in data:
            raise ConfigError("%s holds NUL bytes: not a container config" % (path or "the file"))
        self.path = path
        self.data = data
        self.lines = split_lines(data)
        self.live_end = len(self.lines)
        for index, line in enumerate(self.lines):
            if line.body.startswith(b"["):
                self.live_end = index
                break

    @property
    def live(self):
        return self.lines[:self.live_end]

    def key_lines(self):
        """``(key, separator)`` of each key line in the live section, in order."""
        found = []
        for line in self.live:
            match = _KEY_LINE.match(line.body)
            if match:
                found.append((match.group(1), match.group(3), match))
        return found

    def is_container_config(self):
        """True when the live section has a raw ``lxc.*`` key or a Proxmox ``key:`` line."""
        for key, separator, _match in self.key_lines():
            if key.startswith(b"lxc."):
                return True
            if separator == b":" and _PVE_KEYS.match(key):
                return True
        return False

    def items(self):
        """``[(key, value)]`` of every key line of the live section, in order, as text.

        Bytes that are not UTF-8 (a hand-written Latin-1 comment or value) are kept as
        surrogates (``surrogateescape``), so nothing here fails on them and the caller decides
        how to show them. Trailing blanks of a value are dropped.
        """
        found = []
        for line in self.live:
            match = _KEY_LINE.match(line.body)
            if match:
                found.append((match.group(1).decode("ascii"),
                              line.body[match.end():].rstrip(b" \t").decode("utf-8", "surrogateescape")))
        return found

    def value_of(self, key):
        """Value of a plain ``key: value`` line of the live section (such as Proxmox's ``lock``)."""
        regex = _key_regex(key)
        for line in self.live:
            match = regex.match(line.body)
            if match:
                return match.group(2).decode("utf-8", "surrogateescape")
        return None

    def entries(self, key):
        """``[(line index, raw value)]`` of every ``key`` line in the live section."""
        regex = _key_regex(key)
        found = []
        for index, line in enumerate(self.live):
            match = regex.match(line.body)
            if match:
                found.append((index, match.group(2).decode("utf-8", "surrogateescape")))
        return found

    def style(self):
        """``"proxmox"`` (``key: value``) or ``"lxc"`` (``key = value``), from the file's own lines.

        Majority of the live section's key lines; a tie (or no vote) goes by the path: Proxmox
        files are ``<vmid>.conf`` under /etc/pve.
        """
        colon = sum(1 for _k, sep, _m in self.key_lines() if sep == b":")
        equals = sum(1 for _k, sep, _m in self.key_lines() if sep == b"=")
        if colon != equals:
            return "proxmox" if colon > equals else "lxc"
        return "proxmox" if is_proxmox_path(self.path) else "lxc"

    def _equals_separator(self):
        """``" = "`` or ``"="``: the spacing most ``=`` lines of the live section use."""
        spaced = tight = 0
        for _key, sep, match in self.key_lines():
            if sep != b"=":
                continue
            if match.group(2) or match.group(4):
                spaced += 1
            else:
                tight += 1
        return b"=" if tight > spaced else b" = "

    def _eol(self):
        crlf = sum(1 for line in self.lines if line.eol == b"\r\n")
        lf = sum(1 for line in self.lines if line.eol == b"\n")
        return b"\r\n" if crlf > lf else b"\n"

    def set_key(self, key, value, keep=None):
        """Bytes of the file with exactly one ``key`` line in the live section, set to ``value``.

        The first existing line keeps its place, indent and separator and only its value is
        replaced (or, when ``keep(raw_value)`` is true, it stays byte for byte: an equivalent
        spelling); later duplicates in the live section are dropped. Without any, a line is
        added after the live section's last non-blank line, in the file's style. Every other
        line, the end-of-line bytes and the presence or absence of a final newline are kept.
        """
        value_bytes = value.encode("ascii") if isinstance(value, str) else value
        lines = [Line(line.body, line.eol) for line in self.lines]
        found = self.entries(key)
        if found:
            first = found[0][0]
            if not (keep and keep(found[0][1])):
                match = _key_regex(key).match(lines[first].body)
                lines[first] = Line(match.group(1) + value_bytes + match.group(3), lines[first].eol)
            for index, _raw in reversed(found[1:]):
                del lines[index]
        else:
            if self.style() == "proxmox":
                separator = b": "
            else:
                separator = self._equals_separator()
            new = Line(key.encode("ascii") + separator + value_bytes, self._eol())
            insert_at = 0
            for index in range(self.live_end):
                if lines[index].body.strip():
                    insert_at = index + 1
            lines.insert(insert_at, new)
        # Every line but the last ends with a newline; the last one as the file's last did.
        default_eol = self._eol()
        for line in lines[:-1]:
            if not line.eol:
                line.eol = default_eol
        if lines:
            lines[-1].eol = self.lines[-1].eol if self.lines else default_eol
        return join_lines(lines)
