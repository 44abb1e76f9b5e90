# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GRUB's kernel command line in /etc/default/grub and /etc/default/grub.d/*.cfg.

These files are shell: grub-mkconfig sources /etc/default/grub, then every
/etc/default/grub.d/*.cfg in name order, and writes ``${GRUB_CMDLINE_LINUX}
${GRUB_CMDLINE_LINUX_DEFAULT}`` onto the normal boot entries. So the line that boots is the
result of all those files, and a grub.d file (Ubuntu's cloud images ship
50-cloudimg-settings.cfg) can override the one in /etc/default/grub, or append to it with
``GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT ..."``.

This reads the assignments of the two variables the way the shell would (double quotes with
backslash escapes, single quotes, unquoted words, ``$VAR``/``${VAR}``), evaluates them in order,
and finds for each variable its *base*: the last assignment that does not build on the
variable's previous value. Editing the base changes the effective line; a later assignment
that appends is layered on top and left alone. Only the base's value text is rewritten; every
other byte of its file stays as it was. A base that uses other expansions (``$(...)``,
```...```, ``${VAR:-x}``, other variables) cannot be rewritten without changing its meaning and
is reported as not editable.
"""

from __future__ import annotations

import os
import re

LINUX = "GRUB_CMDLINE_LINUX"
DEFAULT = "GRUB_CMDLINE_LINUX_DEFAULT"
VARIABLES = (LINUX, DEFAULT)

_ASSIGN_RE = re.compile(r"^[ \t]*(?:export[ \t]+)?(GRUB_CMDLINE_LINUX(?:_DEFAULT)?)=", re.M)
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD_END = " \t\n;&|<>()"
_DQ_SPECIAL = '\\"$`'


class GrubError(Exception):
    """A GRUB configuration this module cannot read or edit safely."""


class Assignment(object):
    """``NAME=value`` in one file: where the value text is, and what it is made of.

    ``parts`` is a list of ("lit", text) and ("var", name); ``complex`` is True when the value
    holds something this parser does not evaluate (command substitution, ``${VAR:-x}``...).
    ``style`` is the quote the value starts with: '"', "'" or "" (unquoted).
    """

    def __init__(self, path, name, start, end, parts, complex_, style, line):
        self.path = path
        self.name = name
        self.start = start
        self.end = end
        self.parts = parts
        self.complex = complex_
        self.style = style
        self.line = line

    @property
    def self_referencing(self):
        return any(kind == "var" and value == self.name for kind, value in self.parts)

    @property
    def literal(self):
        """True when the value is plain text (no expansion at all)."""
        return not self.complex and all(part[0] == "lit" for part in self.parts)

    def literal_text(self):
        return "".join(value for kind, value in self.parts if kind == "lit")

    def where(self):
        return "%s line %d" % (self.path, self.line)


def _parse_var(text, pos):
    """At ``text[pos] == '$'``: return (part or None, new pos, complex flag)."""
    nxt = text[pos + 1:pos + 2]
    if nxt == "{":
        close = text.find("}", pos + 2)
        if close < 0:
            return None, len(text), True
        inner = text[pos + 2:close]
        if _NAME_RE.fullmatch(inner):
            return ("var", inner), close + 1, False
        return None, close + 1, True
    match = _NAME_RE.match(text, pos + 1)
    if match:
        return ("var", match.group(0)), match.end(), False
    if nxt == "(":
        depth, end = 0, pos + 1
        while end < len(text):
            if text[end] == "(":
                depth += 1
            elif text[end] == ")":
                depth -= 1
                if depth == 0:
                    return None, end + 1, True
            end += 1
        return None, len(text), True
    if nxt and nxt in "0123456789@*#?$!-":
        return None, pos + 2, True
    return ("lit", "$"), pos + 1, False


def parse_word(text, pos):
    """Parse one shell word starting at ``pos``; return (parts, end, complex, style)."""
    parts = []
    buf = []
    complex_ = False
    style = text[pos:pos + 1] if text[pos:pos + 1] in ('"', "'") else ""
    n = len(text)

    def flush():
        if buf:
            parts.append(("lit", "".join(buf)))
            del buf[:]

    while pos < n:
        char = text[pos]
        if char in _WORD_END:
            break
        if char == "'":
            close = text.find("'", pos + 1)
            if close < 0:
                raise GrubError("unterminated single quote")
            buf.append(text[pos + 1:close])
            pos = close + 1
        elif char == '"':
            pos += 1
            while True:
                if pos >= n:
                    raise GrubError("unterminated double quote")
                char = text[pos]
                if char == '"':
                    pos += 1
                    break
                if char == "\\" and pos + 1 < n and text[pos + 1] in _DQ_SPECIAL + "\n":
                    if text[pos + 1] != "\n":
                        buf.append(text[pos + 1])
                    pos += 2
                elif char == "$":
                    part, pos, cplx = _parse_var(text, pos)
                    complex_ = complex_ or cplx
                    if part is not None and part[0] == "var":
                        flush()
                        parts.append(part)
                    elif part is not None:
                        buf.append(part[1])
                elif char == "`":
                    complex_ = True
                    close = text.find("`", pos + 1)
                    pos = n if close < 0 else close + 1
                else:
                    buf.append(char)
                    pos += 1
        elif char == "\\":
            if pos + 1 < n and text[pos + 1] != "\n":
                buf.append(text[pos + 1])
            pos += 2
        elif char == "$":
            part, pos, cplx = _parse_var(text, pos)
            complex_ = complex_ or cplx
            if part is not None and part[0] == "var":
                flush()
                parts.append(part)
            elif part is not None:
                buf.append(part[1])
        elif char == "`":
            complex_ = True
            close = text.find("`", pos + 1)
            pos = n if close < 0 else close + 1
        else:
            buf.append(char)
            pos += 1
    flush()
    return parts, pos, complex_, style


def parse_file(path, text):
    """Every assignment of GRUB_CMDLINE_LINUX / _DEFAULT in ``text``, in file order."""
    found = []
    pos = 0
    while True:
        match = _ASSIGN_RE.search(text, pos)
        if not match:
            return found
        start = match.end()
        line = text.count("\n", 0, match.start()) + 1
        try:
            parts, end, complex_, style = parse_word(text, start)
        except GrubError as exc:
            raise GrubError("%s line %d: cannot parse %s: %s" % (path, line, match.group(1), exc))
        found.append(Assignment(path, match.group(1), start, end, parts, complex_, style, line))
        pos = max(end, match.end())


def quote(value, style):
    """Render ``value`` as a shell word, keeping the file's quote style where it can."""
    if style == "'" and "'" not in value:
        return "'%s'" % value
    if style == "" and value and not any(ch in value for ch in " \t\n\"'\\$`;&|<>()#*?[]~{}"):
        return value
    escaped = "".join("\\" + ch if ch in _DQ_SPECIAL else ch for ch in value)
    return '"%s"' % escaped


class GrubConfig(object):
    """/etc/default/grub plus its grub.d overrides, read and evaluated."""

    def __init__(self, etc_root="/etc"):
        self.main_path = os.path.join(etc_root, "default", "grub")
        self.dropin_dir = os.path.join(etc_root, "default", "grub.d")
        self.texts = {}
        self.order = []
        self.assignments = []

    def load(self, read_text):
        """Read the files with ``read_text(path)`` (None for absent); raise GrubError when unusable."""
        main = read_text(self.main_path)
        if main is None:
            raise GrubError("%s does not exist" % self.main_path)
        texts = {self.main_path: main}
        order = [self.main_path]
        try:
            names = sorted(os.listdir(self.dropin_dir))
        except OSError:
            names = []
        for name in names:
            path = os.path.join(self.dropin_dir, name)
            if not name.endswith(".cfg") or not os.path.isfile(path):
                continue
            text = read_text(path)
            if text is not None:
                texts[path] = text
                order.append(path)
        return self.parse(order, texts)

    def parse(self, order, texts):
        """Take the files' texts (in the order grub-mkconfig sources them) and parse them."""
        self.order = list(order)
        self.texts = dict(texts)
        self.assignments = []
        for path in self.order:
            self.assignments.extend(parse_file(path, self.texts[path]))
        return self

    def with_changes(self, new_texts):
        """A new GrubConfig as it would read after ``{path: text}`` were written."""
        texts = dict(self.texts)
        texts.update(new_texts)
        other = GrubConfig.__new__(GrubConfig)
        other.main_path = self.main_path
        other.dropin_dir = self.dropin_dir
        return other.parse(self.order, texts)

    def base(self, name):
        """The assignment of ``name`` that later ones build on, or None when there is none."""
        found = None
        for assign in self.assignments:
            if assign.name == name and not assign.self_referencing:
                found = assign
        return found

    def layers(self, name):
        """Assignments of ``name`` after its base that append to it (read, not edited)."""
        base = self.base(name)
        after = False if base is not None else True
        out = []
        for assign in self.assignments:
            if assign is base:
                after = True
                continue
            if after and assign.name == name:
                out.append(assign)
        return out

    def overrides(self):
        """grub.d files that assign either variable: the operator should know they exist."""
        return sorted(set(a.path for a in self.assignments if a.path != self.main_path))

    def read_only(self):
        """Assignments this module reads but does not rewrite: appending layers, and bases
        whose value is not plain text."""
        out = []
        for name in VARIABLES:
            base = self.base(name)
            if base is not None and not base.literal:
                out.append(base)
            out.extend(self.layers(name))
        return out

    def evaluate(self):
        """The effective values of both variables, and notes.

        Returns (values dict, notes): notes name assignments that could not be evaluated
        exactly (unknown variables, command substitution).
        """
        env = {LINUX: "", DEFAULT: ""}
        notes = []
        for assign in self.assignments:
            if assign.complex:
                notes.append("%s: %s uses shell expansions this module does not evaluate"
                             % (assign.where(), assign.name))
            value = []
            for kind, text in assign.parts:
                if kind == "lit":
                    value.append(text)
                elif text in env:
                    value.append(env[text])
                else:
                    notes.append("%s: %s uses $%s, which this module does not know; read as empty"
                                 % (assign.where(), assign.name, text))
            env[assign.name] = "".join(value)
        return env, notes

    def effective_line(self):
        """(the line grub-mkconfig puts on the normal entries, notes)."""
        values, notes = self.evaluate()
        return ("%s %s" % (values[LINUX], values[DEFAULT])).strip(), notes

    def render(self, new_values):
        """New file texts for ``{name: new value}`` of the bases; returns {path: text}.

        A variable with no base gets a new line at the end of /etc/default/grub.
        """
        edits = {}
        appended = []
        for name in VARIABLES:
            if name not in new_values:
                continue
            base = self.base(name)
            if base is None:
                appended.append('%s=%s\n' % (name, quote(new_values[name], '"')))
                continue
            edits.setdefault(base.path, []).append((base.start, base.end, quote(new_values[name], base.style)))
        out = {}
        for path, changes in edits.items():
            text = self.texts[path]
            for start, end, word in sorted(changes, reverse=True):
                text = text[:start] + word + text[end:]
            out[path] = text
        if appended:
            text = out.get(self.main_path, self.texts[self.main_path])
            if text and not text.endswith("\n"):
                text += "\n"
            out[self.main_path] = text + "".join(appended)
        return out
