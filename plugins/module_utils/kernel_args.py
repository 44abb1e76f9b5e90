# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command-line arguments, split and compared the way the kernel itself reads them.

Why not ``str.split()``: the kernel (lib/cmdline.c next_arg) lets a value hold spaces inside
double quotes (``foo="a b"``, or the whole argument quoted, ``"foo=a b"``), and it hands
everything after a bare ``--`` to init. Those init arguments are not kernel parameters at all:
they are never matched, removed or reordered here, and new arguments go before the ``--``.

Parameter names compare with ``-`` and ``_`` as the same character (the kernel's parameq), so
``intel-idle.max_cstate=1`` and ``intel_idle.max_cstate=1`` are one argument. An argument is
identified by (key, value); a bare flag (``quiet``) has the value None, which is not the same
as an empty value (``quiet=``).

Each managed key is treated as single-valued: ensuring ``key=value`` removes the other values
of that key and collapses duplicates. Keys the kernel reads as a list (several ``console=``,
``hugepagesz=``/``hugepages=`` pairs) would be damaged by that, so they are refused as
``present`` arguments; arguments the module does not manage are never touched.
"""

from __future__ import annotations

import re

INIT_SEPARATOR = "--"

# Keys the kernel accepts several times and reads as a list or as ordered pairs: collapsing
# them to one value would drop consoles or hugepage pools.
MULTI_VALUED = frozenset(["console", "hugepagesz", "hugepages", "memmap", "ip", "crashkernel"])

_KEY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")
_WHITESPACE = " \t\n\r\v\f"


class ArgError(Exception):
    """An argument given to the module that cannot be used; the message says why."""


def split(line):
    """Split a command line into raw argument strings, quotes kept, like the kernel does.

    Whitespace inside double quotes does not split; quotes may start anywhere in an argument.
    """
    tokens = []
    i = 0
    n = len(line or "")
    while i < n:
        while i < n and line[i] in _WHITESPACE:
            i += 1
        if i >= n:
            break
        start = i
        in_quote = False
        while i < n:
            char = line[i]
            if char in _WHITESPACE and not in_quote:
                break
            if char == '"':
                in_quote = not in_quote
            i += 1
        tokens.append(line[start:i])
    return tokens


def normalize_key(key):
    """The kernel compares parameter names with '-' and '_' as equal."""
    return key.replace("-", "_")


class Arg(object):
    """One argument: ``raw`` as written, ``key`` (normalized) and ``value`` (None for a flag)."""

    __slots__ = ("raw", "name", "key", "value")

    def __init__(self, raw):
        self.raw = raw
        text = raw
        quoted = text.startswith('"')
        if quoted:
            text = text[1:]
        if "=" in text:
            name, value = text.split("=", 1)
            if value.startswith('"'):
                value = value[1:]
                if value.endswith('"'):
                    value = value[:-1]
            elif quoted and value.endswith('"'):
                value = value[:-1]
        else:
            name, value = text, None
            if quoted and name.endswith('"'):
                name = name[:-1]
        self.name = name
        self.key = normalize_key(name)
        self.value = value

    @property
    def ident(self):
        return (self.key, self.value)

    def __repr__(self):
        return "Arg(%r)" % self.raw


def kernel_part(tokens):
    """The arguments the kernel itself reads: everything before a bare ``--``."""
    out = []
    for tok in tokens:
        if tok == INIT_SEPARATOR:
            break
        out.append(tok)
    return out


def parse_wanted(text, what):
    """Validate one argument given to the module; return its Arg or raise ArgError.

    ``what`` is ``present`` or ``absent`` (for the message). Accepted: ``key`` or
    ``key=value``; a value may hold spaces only inside double quotes.
    """
    if not isinstance(text, str) or not text.strip():
        raise ArgError("%s entry %r is not valid: give a non-empty string such as iommu=pt" % (what, text))
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise ArgError("%s entry %r is not valid: control characters (newline, tab) are not allowed" % (what, text))
    if text.count('"') % 2:
        raise ArgError("%s entry %r is not valid: unbalanced double quote" % (what, text))
    tokens = split(text)
    if tokens != [text]:
        raise ArgError("%s entry %r is not valid: one argument per entry (a value with spaces must "
                       "be quoted, as in foo=\"a b\")" % (what, text))
    if text == INIT_SEPARATOR:
        raise ArgError("%s entry '--' is not valid: it separates init's arguments and is not managed" % what)
    if "'" in text or "\\" in text or "$" in text or "`" in text:
        raise ArgError("%s entry %r is not valid: single quotes, backslashes, '$' and backticks are "
                       "refused (boot loader configuration files are shell or grub script)" % (what, text))
    arg = Arg(text)
    if not _KEY_RE.match(arg.name):
        raise ArgError("%s entry %r is not valid: the parameter name %r must be letters, digits, '_', '-' "
                       "and '.'" % (what, text, arg.name))
    if arg.value is not None and '"' in arg.value:
        raise ArgError("%s entry %r is not valid: a double quote may only enclose the whole value" % (what, text))
    return arg


def parse_wanted_lists(present, absent):
    """Validate both lists together; return (present Args, absent Args), duplicates dropped.

    Refused: a key twice in ``present`` with different values, an argument both present and
    absent, a bare key in ``absent`` that ``present`` sets, and list-valued keys in ``present``.
    """
    errors = []
    wanted = []
    seen = {}
    for text in present or []:
        try:
            arg = parse_wanted(text, "present")
        except ArgError as exc:
            errors.append(str(exc))
            continue
        if arg.key in MULTI_VALUED:
            errors.append("present entry %r is refused: the kernel reads %s= as a list (it may be given "
                          "several times) and this module keeps one value per key" % (text, arg.name))
            continue
        if arg.key in seen:
            if seen[arg.key].value != arg.value:
                errors.append("present lists %s twice with different values (%r and %r): give one"
                              % (arg.name, seen[arg.key].raw, text))
            continue
        seen[arg.key] = arg
        wanted.append(arg)
    removed = []
    removed_ids = set()
    for text in absent or []:
        try:
            arg = parse_wanted(text, "absent")
        except ArgError as exc:
            errors.append(str(exc))
            continue
        if arg.key in seen and (arg.value is None or seen[arg.key].value == arg.value):
            errors.append("%r is both present (%r) and absent (%r)" % (arg.name, seen[arg.key].raw, text))
            continue
        if arg.ident in removed_ids:
            continue
        removed_ids.add(arg.ident)
        removed.append(arg)
    if errors:
        raise ArgError("; ".join(errors))
    return wanted, removed


def matches_absent(arg, absent):
    """True when ``arg`` is removed by the ``absent`` entry (a bare key removes every value)."""
    if arg.key != absent.key:
        return False
    return absent.value is None or arg.value == absent.value


def plan(segments, present, absent, primary, read_only=()):
    """Edit token lists so ``present`` and ``absent`` hold; return the new lists.

    ``segments`` are token lists in the order the kernel sees them (GRUB: GRUB_CMDLINE_LINUX,
    then GRUB_CMDLINE_LINUX_DEFAULT, then what later files append); ``primary`` is the index of
    the one new arguments go to; segments whose index is in ``read_only`` are never changed,
    but an exact match there counts as present (the caller checks the result as a whole).
    Tokens from a ``--`` on (in any segment, and every later segment) are init arguments and
    stay as they are. A value that replaces another takes the old one's place when that was in
    the primary segment; otherwise it is appended (before any ``--``). Duplicates of a managed
    argument are dropped, the first one kept.
    Raises ArgError when an argument would have to be added after a ``--``.
    """
    new = [list(seg) for seg in segments]

    def first_separator():
        for si, seg in enumerate(new):
            for ti, tok in enumerate(seg):
                if tok == INIT_SEPARATOR:
                    return (si, ti)
        return None

    def editable(si, ti, stop):
        return si not in read_only and (stop is None or (si, ti) < stop)

    def is_kernel(si, ti, stop):
        return stop is None or (si, ti) < stop

    for want in present:
        stop = first_separator()
        kept = False
        insert_at = None
        for si, seg in enumerate(new):
            out = []
            for ti, tok in enumerate(seg):
                if not is_kernel(si, ti, stop):
                    out.append(tok)
                    continue
                arg = Arg(tok)
                if arg.key != want.key:
                    out.append(tok)
                    continue
                if arg.value == want.value and not kept:
                    kept = True
                    out.append(tok)
                    continue
                if not editable(si, ti, stop):
                    out.append(tok)
                    continue
                if si == primary and insert_at is None and not kept:
                    insert_at = len(out)
            new[si] = out
        if kept:
            continue
        stop = first_separator()
        if stop is not None and stop[0] < primary:
            raise ArgError("cannot add %s: an earlier part of the command line holds '--', so everything "
                           "after it goes to init, not to the kernel" % want.raw)
        seg = new[primary]
        limit = stop[1] if stop is not None and stop[0] == primary else len(seg)
        if insert_at is None or insert_at > limit:
            insert_at = limit
        seg.insert(insert_at, want.raw)

    for gone in absent:
        stop = first_separator()
        for si, seg in enumerate(new):
            new[si] = [tok for ti, tok in enumerate(seg)
                       if not editable(si, ti, stop) or not matches_absent(Arg(tok), gone)]
    return new


def unsatisfied(tokens, present, absent):
    """What does not hold on a whole command line: a list of (Arg wanted, 'present'|'absent', found).

    ``found`` lists the raw arguments with the same key (kernel part only).
    """
    args = [Arg(tok) for tok in kernel_part(tokens)]
    problems = []
    for want in present:
        same = [a for a in args if a.key == want.key]
        if not same or any(a.value != want.value for a in same):
            problems.append((want, "present", [a.raw for a in same]))
    for gone in absent:
        hits = [a for a in args if matches_absent(a, gone)]
        if hits:
            problems.append((gone, "absent", [a.raw for a in hits]))
    return problems


def describe(problem, where):
    """A short line for one entry of unsatisfied(): what is wanted and what ``where`` has."""
    want, kind, found = problem
    if kind == "present":
        return "%s (%s: %s)" % (want.raw, where, " ".join(found) if found else "not set")
    return "remove %s (%s: %s)" % (want.raw, where, " ".join(found))


def forces_identity_iommu(arg):
    """True when ``arg`` makes the kernel give devices identity (passthrough) IOMMU domains.

    ``iommu=`` (x86, arch/x86/kernel/pci-dma.c) is a comma-separated list and the kernel takes
    any item starting with ``pt`` as passthrough (``nopt`` turns it off). ``iommu.passthrough=``
    (drivers/iommu/iommu.c, every architecture) is a boolean read with kstrtobool: true when it
    starts with y, t or 1, or is "on". ``intel_iommu=`` and ``amd_iommu=`` have no passthrough
    value (``iommu=pt`` is how it is asked for there too): they are not matched.
    """
    if arg.value is None:
        return False
    if arg.key == "iommu":
        return any(item.startswith("pt") for item in arg.value.split(","))
    if arg.key == "iommu.passthrough":
        value = arg.value
        return value[:1] in ("y", "Y", "t", "T", "1") or value[:2].lower() == "on"
    return False
