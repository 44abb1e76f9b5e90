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

What an argument given to the module may hold (``parse_wanted``), and why: GRUB's
grub-mkconfig puts GRUB_CMDLINE_LINUX and GRUB_CMDLINE_LINUX_DEFAULT *unquoted* onto the
``linux`` line of grub.cfg, so GRUB's script lexer (grub-core/script/yylex.l) reads every
argument at every boot: ``;``, ``&``, ``|``, ``<``, ``>``, ``{``, ``}`` and a newline end or
redirect the ``linux`` command (``x=1;reboot`` runs ``reboot``, and grub-script-check accepts
it), ``#`` at the start of a word comments out the rest of the line, and ``$``, ``\\``, ``'``
and ``"`` expand, escape and quote. /etc/default/grub itself is shell, where ``(``, ``)`` and
the backtick are special too, and GRUB and the shell both may expand ``*``, ``?``, ``[`` and
``]`` to file names. So a name is letters, digits, ``_``, ``-`` and ``.``; a value is letters,
digits and ``_ . - , : / = + @ % ^ ~ !``; anything else, and every byte outside printable
ASCII, is refused: the kernel's isspace() (lib/ctype.c) also splits on byte 0xA0, so a
non-breaking space (or any character whose UTF-8 form holds that byte) silently makes two
arguments of one.

The one quoted form accepted is a double-quoted value or argument, ``foo="a b"`` or
``"foo=a b"``, with the same characters plus spaces inside. It survives GRUB: the lexer drops
the quotes and passes ``foo=a b`` as one word, and grub_create_loader_cmdline()
(grub-core/lib/cmdline.c) quotes a word holding a space again as ``"foo=a b"``, which the
kernel's next_arg() reads as the parameter ``foo`` with the value ``a b`` -- the same
argument (``Arg`` identifies both spellings alike).

Arguments already in a configuration are not held to those rules (they are never rewritten),
but ``hazard`` names the ones that would change how their neighbours are read -- an unbalanced
quote that swallows the next argument, a GRUB separator that sends it to another command -- so
a caller can refuse to add arguments next to them.
"""

from __future__ import annotations

import re

INIT_SEPARATOR = "--"

# Keys the kernel accepts several times and reads as a list or as ordered pairs: collapsing
# them to one value would drop consoles or hugepage pools.
MULTI_VALUED = frozenset(["console", "hugepagesz", "hugepages", "memmap", "ip", "crashkernel"])

_KEY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")
# What the kernel's isspace() is true for (lib/ctype.c): \t \n \v \f \r, space, and 0xA0.
_KERNEL_SPACE = frozenset(b" \t\n\v\f\r\xa0")
_QUOTE = ord('"')

NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
VALUE_CHARS = NAME_CHARS | frozenset(",:/=+@%^~!")
ALLOWED_TEXT = "letters, digits and _ . - , : / = + @ % ^ ~ ! (spaces only inside double quotes, foo=\"a b\")"

# Why a character is refused, by class (the message names the character and the entry).
_GRUB_SEPARATORS = ";&|<>{}"
_WHY = (
    (_GRUB_SEPARATORS, "GRUB script metacharacters (; & | < > { }) end or redirect the 'linux' command, as "
                       "grub-mkconfig writes the arguments unquoted onto grub.cfg's 'linux' line (after ';' GRUB "
                       "runs the rest as a command at every boot)"),
    ("#", "'#' starts a comment in GRUB's script and in the shell that reads /etc/default/grub"),
    ("$`\\'", "single quotes, backslashes, '$' and backticks are expanded, escaped or quoted by GRUB's "
              "script and by the shell that reads /etc/default/grub"),
    ("()", "parentheses are shell metacharacters in /etc/default/grub"),
    ("*?[]", "glob characters (* ? [ ]) may be expanded to file names by GRUB and by the shell"),
)


class ArgError(Exception):
    """An argument given to the module that cannot be used; the message says why."""


def split(line):
    """Split a command line into raw argument strings, quotes kept, like the kernel does.

    Whitespace inside double quotes does not split; quotes may start anywhere in an argument.
    The split is made on the UTF-8 bytes, with the kernel's isspace() (which includes 0xA0),
    so a line holding a non-breaking space splits where the kernel splits it; a token cut
    inside a character carries the stray byte as a surrogate (``surrogateescape``).
    """
    if not line:
        return []
    data = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else bytes(line)
    tokens = []
    i = 0
    n = len(data)
    while i < n:
        while i < n and data[i] in _KERNEL_SPACE:
            i += 1
        if i >= n:
            break
        start = i
        in_quote = False
        while i < n:
            byte = data[i]
            if byte in _KERNEL_SPACE and not in_quote:
                break
            if byte == _QUOTE:
                in_quote = not in_quote
            i += 1
        tokens.append(data[start:i].decode("utf-8", "surrogateescape"))
    return tokens


def normalize_key(key):
    """The kernel compares parameter names with '-' and '_' as equal."""
    return key.replace("-", "_")


class Arg:
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


def _char_name(char):
    code = ord(char)
    if 32 < code < 127:
        return repr(char)
    return "%r (U+%04X)" % (char, code)


def _refused_char(char):
    """Why ``char`` may not appear in an argument given to the module."""
    code = ord(char)
    if code > 126:
        why = ("only printable ASCII is accepted: the kernel splits arguments on byte 0xA0 (non-breaking "
               "space), and GRUB and the shell read other bytes their own way")
    elif code < 32 or code == 127:
        why = ("control characters (newline, tab, ...) are not allowed: GRUB runs what follows a newline "
               "as a command and the kernel splits on whitespace")
    else:
        why = "this character is not accepted"
        for chars, text in _WHY:
            if char in chars:
                why = text
                break
    return "holds %s: %s; an argument may hold only %s" % (_char_name(char), why, ALLOWED_TEXT)


def check_syntax(text):
    """Why ``text`` is not an argument the module may write, or None when it is.

    Accepted: ``key``, ``key=value``, ``key="value"`` and ``"key=value"`` (a space only inside
    the double quotes), with the characters in NAME_CHARS / VALUE_CHARS (see the module doc).
    """
    if not isinstance(text, str) or not text.strip():
        return "give a non-empty string such as iommu=pt"
    for char in text:
        if char not in VALUE_CHARS and char not in ' "':
            return _refused_char(char)
    if text == INIT_SEPARATOR:
        return "'--' separates init's arguments and is not managed"
    if text.count('"') % 2:
        return "unbalanced double quote"
    one = "one argument per entry (a value with spaces must be quoted, as in foo=\"a b\")"
    if split(text) != [text]:
        return one
    whole = len(text) >= 2 and text.startswith('"') and text.endswith('"')
    body = text[1:-1] if whole else text
    name, _eq, value = body.partition("=")
    if not _KEY_RE.match(name):
        return "the parameter name %r must be letters, digits, '_', '-' and '.'" % name
    quoted = whole
    if not whole and len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
        quoted = True
    if '"' in value:
        return "a double quote may only enclose the whole value (foo=\"a b\") or the whole argument"
    if " " in value and not quoted:
        return one
    return None


def parse_wanted(text, what):
    """Validate one argument given to the module; return its Arg or raise ArgError.

    ``what`` is ``present`` or ``absent`` (for the message). See check_syntax.
    """
    why = check_syntax(text)
    if why is not None:
        raise ArgError("%s entry %r is not valid: %s" % (what, text, why))
    return Arg(text)


def hazard(token, grub=True):
    """Why an argument already in a configuration would change how its neighbours are read.

    Returns None for a token that is safe to keep next to arguments this module adds. Looked
    for: bytes outside printable ASCII (the kernel's split on 0xA0 differs from what the file
    shows), an unbalanced double quote (it takes in the arguments after it), and with ``grub``
    what GRUB's lexer reads outside double quotes as a separator, redirection, comment, escape,
    single quote or expansion (inside double quotes only ``$`` and ``\\`` are special there).
    """
    for char in token:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            return ("holds the byte 0x%02X left of a character that the kernel's split at byte 0xA0 cut in "
                    "two: it does not read this argument as the file shows it" % (code - 0xDC00))
        if code > 126 or code < 32 or code == 127:
            return ("holds %s: the kernel splits on byte 0xA0 and on control characters, so it does not "
                    "read this argument as the file shows it" % _char_name(char))
    if token.count('"') % 2:
        return "has an unbalanced double quote, which takes in the arguments after it"
    if not grub:
        return None
    in_quote = False
    for index, char in enumerate(token):
        if char == '"':
            in_quote = not in_quote
            continue
        if in_quote:
            if char in "$\\":
                return "holds %r inside double quotes, which GRUB's script expands or escapes" % char
            continue
        if char in _GRUB_SEPARATORS:
            return ("holds %r, which GRUB's script reads as a command separator or redirection: the "
                    "arguments after it would not reach the kernel" % char)
        if char == "#" and index == 0:
            return "starts with '#': GRUB reads the rest of the 'linux' line as a comment"
        if char in "$\\'":
            return "holds %r, which GRUB's script expands, escapes or quotes" % char
    return None


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


def by_key(tokens, keys):
    """``{key: arguments}`` for the ``keys`` (normalized) that the kernel part of ``tokens``
    sets: the raw arguments of each key in command-line order, joined by a space (``split``
    reads them back); keys not set are left out."""
    wanted = set(normalize_key(key) for key in keys)
    found = {}
    for tok in kernel_part(tokens):
        key = Arg(tok).key
        if key in wanted:
            found.setdefault(key, []).append(tok)
    return dict((key, " ".join(toks)) for key, toks in found.items())


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
