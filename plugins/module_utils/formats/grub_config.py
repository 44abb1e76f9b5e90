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

The files are read as shell, not line by line: a small tokenizer (quotes, escapes, comments,
operators, the keywords of compound commands) finds the assignments wherever the shell would
(``A=1; GRUB_CMDLINE_LINUX="..."`` on one line, two assignments in one command, ``export``),
and ``problems`` lists what could set either variable in a way this module does not evaluate:
an assignment inside ``if``/``case``/a loop/braces/a subshell or after ``&&``/``||`` that
replaces the value, an environment prefix (``GRUB_CMDLINE_LINUX=x cmd`` sets nothing),
``unset``, ``+=``, ``readonly``, ``eval``, ``.``/``source`` of another file, a here-document,
a function, unbalanced keywords. The caller refuses to edit while there are problems (an edit
could be overridden without anyone noticing), and only warns when nothing needs to change.
"""

from __future__ import annotations

import errno
import os
import re

LINUX = "GRUB_CMDLINE_LINUX"
DEFAULT = "GRUB_CMDLINE_LINUX_DEFAULT"
VARIABLES = (LINUX, DEFAULT)

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD_END = " \t\n;&|<>()"
_DQ_SPECIAL = '\\"$`'


class GrubError(Exception):
    """A GRUB configuration this module cannot read or edit safely."""


class Assignment:
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
        self.conditional = False

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


_ASSIGN_WORD_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_MENTION_RE = re.compile(r"GRUB_CMDLINE_LINUX(?:_DEFAULT)?(?![A-Za-z0-9_])")
# What may follow ``${NAME`` in an expansion that only reads the variable.
_READ_EXPANSION_RE = re.compile(r"\}|:?[-+]|#|%")
_OPERATORS = (";;", "&&", "||", "<<-", "<<", ">>", "<&", ">&", "<>", ">|", ";", "&", "|", "(", ")", "<", ">")
_OPENERS = ("if", "while", "until", "for", "case", "select")
_CLOSERS = {"fi": ("if",), "done": ("while", "until", "for", "select"), "esac": ("case",), "}": ("{",)}
_NEUTRAL = ("then", "else", "elif", "do", "!", "in")
_DECLARE = ("readonly", "local", "declare", "typeset")
_SOURCE = (".", "source", "eval")
_EARLY_END = ("return", "exit")


class _Word:
    __slots__ = ("text", "start", "end", "line")

    def __init__(self, text, start, end, line):
        self.text = text
        self.start = start
        self.end = end
        self.line = line


def _tokens(path, text):
    """The shell tokens of ``text``: ("word", _Word) and ("op", operator, line) pairs.

    Comments and blanks are dropped; a newline is the operator "\n". Words are delimited
    with parse_word, so quotes, escapes and ``$(...)`` are one word as the shell reads them.
    """
    out = []
    pos = 0
    n = len(text)
    while pos < n:
        char = text[pos]
        if char in " \t":
            pos += 1
            continue
        if char == "\\" and text[pos + 1:pos + 2] == "\n":
            pos += 2
            continue
        line = text.count("\n", 0, pos) + 1
        if char == "\n":
            out.append(("op", "\n", line))
            pos += 1
            continue
        if char == "#":
            end = text.find("\n", pos)
            pos = n if end < 0 else end
            continue
        for op in _OPERATORS:
            if text.startswith(op, pos):
                out.append(("op", op, line))
                pos += len(op)
                break
        else:
            try:
                _parts, end, _complex, _style = parse_word(text, pos)
            except GrubError as exc:
                match = _ASSIGN_WORD_RE.match(text, pos)
                what = match.group(1) if match else repr(text[pos:pos + 40].partition("\n")[0])
                raise GrubError("%s line %d: cannot parse %s: %s" % (path, line, what, exc))
            if end <= pos:  # a lone character parse_word does not take: keep going
                end = pos + 1
            out.append(("word", _Word(text[pos:end], pos, end, line)))
            pos = end
    return out


def _commands(tokens):
    """Group tokens into simple commands: (words, operator before, operator after)."""
    commands = []
    words = []
    before = "\n"
    for token in tokens:
        if token[0] == "word":
            words.append(token[1])
            continue
        op = token[1]
        commands.append((words, before, op, token[2]))
        words = []
        before = op
    commands.append((words, before, "\n", None))
    return commands


def parse_file(path, text):
    """Every assignment of GRUB_CMDLINE_LINUX / _DEFAULT in ``text``, in file order, and the
    problems found: constructs that could set either variable in a way this parser does not
    evaluate (a conditional or loop-bound assignment that replaces the value, an
    environment prefix, ``unset``, ``+=``, ``eval``, sourcing another file, a here-document,
    a function, unbalanced keywords). Returns (assignments, problems).

    An assignment that builds on the variable's own value (a layer) inside ``if``/``case``
    is kept, marked ``conditional``: editing the base under it stays right whether or not it
    applies.
    """
    found = []
    problems = []
    tokens = _tokens(path, text)
    stack = []
    accounted = set()

    def problem(line, what):
        problems.append("%s line %d: %s" % (path, line, what))

    for words, before, after, op_line in _commands(tokens):
        index = 0
        stop = False
        while index < len(words):
            word = words[index].text
            if word in _OPENERS:
                stack.append(word)
                index += 1
                if word in ("for", "case", "select"):
                    stop = True  # the rest is a word list or the case subject, not a command
                    break
                continue
            if word in _NEUTRAL:
                index += 1
                continue
            if word == "{":
                stack.append("{")
                index += 1
                continue
            if word in _CLOSERS:
                if stack and stack[-1] in _CLOSERS[word]:
                    stack.pop()
                else:
                    problem(words[index].line, "%r does not close anything" % word)
                index += 1
                continue
            if word == "function":
                problem(words[index].line, "a shell function, which this module does not evaluate")
                stop = True
            break
        rest = [] if stop else words[index:]
        conditional = bool(stack) or before in ("&&", "||", "|") or after in ("&&", "||", "|", "&")
        assigns = []
        command = None
        declare = None
        for word in rest:
            match = _ASSIGN_WORD_RE.match(word.text)
            if command is None and declare is None and match:
                assigns.append((word, match.group(1)))
                continue
            if command is None and declare is None and word.text in ("export",) + _DECLARE:
                declare = word.text
                continue
            if declare is not None and match:
                assigns.append((word, match.group(1)))
                continue
            if declare is not None:
                if word.text in VARIABLES and declare == "export":
                    accounted.add(word.start)
                continue
            command = word
            break
        if command is not None and command.text in _SOURCE:
            problem(command.line, "%r runs or sources other shell code, which this module does not read"
                    % command.text)
        if command is not None and command.text in _EARLY_END:
            problem(command.line, "%r can end the file early, so later assignments may not apply" % command.text)
        for word, name in assigns:
            if name not in VARIABLES:
                continue
            accounted.add(word.start)
            where = "%s=" % name
            if command is not None:
                problem(word.line, "%s is set only for the command %r (an environment prefix), not as a "
                                   "variable" % (where, command.text))
                continue
            if declare not in (None, "export"):
                problem(word.line, "%s is set with %r, which this module does not evaluate" % (where, declare))
                continue
            start = word.start + len(name) + 1
            parts, end, complex_, style = parse_word(text, start)
            assign = Assignment(path, name, start, end, parts, complex_, style, word.line)
            assign.conditional = conditional
            if conditional and not assign.self_referencing:
                problem(word.line, "%s is set conditionally (inside if/case/a loop/braces/a subshell/a function, "
                                   "or after && or ||), so this module cannot tell which value GRUB gets" % name)
                continue
            found.append(assign)
        for word in words:
            for match in _MENTION_RE.finditer(word.text):
                at = match.start()
                if at == 0 and word.start in accounted:
                    continue
                if word.text[max(0, at - 1):at] == "$":
                    continue  # $NAME: a read of the value
                if word.text[max(0, at - 2):at] == "${" and _READ_EXPANSION_RE.match(word.text, match.end()):
                    continue  # ${NAME}, ${NAME:-x}...: a read
                problem(word.line, "%s is used in %r, which this module does not evaluate (unset, +=, read, "
                                   "eval, ${%s:=...}, ...)" % (match.group(0), " ".join(w.text for w in words),
                                                               match.group(0)))
        if after in ("<<", "<<-"):
            problem(op_line, "a here-document, which this module does not parse")
        elif after == "(":
            stack.append("(")
        elif after == ")" and stack and stack[-1] == "(":
            stack.pop()  # (a ')' while a case is open ends a case pattern)
    if stack:
        problem(text.count("\n") + 1, "unterminated %s" % ", ".join(repr(s) for s in stack))
    return found, problems


def quote(value, style):
    """Render ``value`` as a shell word, keeping the file's quote style where it can."""
    if style == "'" and "'" not in value:
        return "'%s'" % value
    if style == "" and value and not any(ch in value for ch in " \t\n\"'\\$`;&|<>()#*?[]~{}"):
        return value
    escaped = "".join("\\" + ch if ch in _DQ_SPECIAL else ch for ch in value)
    return '"%s"' % escaped


class GrubConfig:
    """/etc/default/grub plus its grub.d overrides, read and evaluated."""

    def __init__(self, etc_root="/etc"):
        self.main_path = os.path.join(etc_root, "default", "grub")
        self.dropin_dir = os.path.join(etc_root, "default", "grub.d")
        self.texts = {}
        self.order = []
        self.assignments = []
        self.problems = []

    def load(self, read_text):
        """Read the files with ``read_text(path)`` (None for absent); raise GrubError when unusable.

        The drop-ins are what grub-mkconfig sources: every ``/etc/default/grub.d/*.cfg`` that
        exists (``[ -e ]``: a symlink is followed, a dangling one skipped; no dot files, as the
        shell glob leaves them out), in name order. An OSError from ``read_text`` or from
        listing the directory (other than its absence) is passed on to the caller, which names
        the path.
        """
        main = read_text(self.main_path)
        if main is None:
            raise GrubError("%s does not exist" % self.main_path)
        texts = {self.main_path: main}
        order = [self.main_path]
        for path in self.dropin_paths():
            text = read_text(path)
            if text is not None:
                texts[path] = text
                order.append(path)
        return self.parse(order, texts)

    def dropin_paths(self):
        """The grub.d files grub-mkconfig would source now, in order."""
        try:
            names = sorted(os.listdir(self.dropin_dir))
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return []
            if exc.filename is None:
                exc.filename = self.dropin_dir
            raise
        return [os.path.join(self.dropin_dir, name) for name in names
                if name.endswith(".cfg") and not name.startswith(".")
                and os.path.exists(os.path.join(self.dropin_dir, name))]

    def parse(self, order, texts):
        """Take the files' texts (in the order grub-mkconfig sources them) and parse them."""
        self.order = list(order)
        self.texts = dict(texts)
        self.assignments = []
        self.problems = []
        for path in self.order:
            found, problems = parse_file(path, self.texts[path])
            self.assignments.extend(found)
            self.problems.extend(problems)
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
            if assign.conditional:
                notes.append("%s: %s appends to itself only under a condition; read as if it applies"
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
