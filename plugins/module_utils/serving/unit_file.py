# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A systemd service unit read the way systemd merges it: fragment, drop-ins, ExecStart, environment.

Why not ``systemctl show``: it needs a running systemd on D-Bus (absent in chroots, some
containers and every test tree), it prints ExecStart= as display text that cannot be split back
exactly, and it does not say which drop-in set what. Reading the files with systemd's own rules
gives the argv word for word, tells the collection's drop-in from the vendor's, and works under
any root. The rules below follow systemd's sources (src/shared/conf-parser.c, dropin.c,
src/core/load-fragment.c, src/basic/extract-word.c, env-util.c, env-file.c):

- unit files (systemd.syntax(7)): a line whose first non-blank is ``#`` or ``;`` is a comment,
  inside a continuation too; an odd run of backslashes at a line's end continues it (the
  backslash becomes a space); an empty line ends a continuation; ``[Section]``, ``Key=Value``
  with blanks stripped round both;
- the fragment is the first file named for the unit along the search path (an instance falls
  back to its template); a link is followed inside the root; a link to /dev/null or an empty
  file is a masked unit;
- drop-ins: every ``*.conf`` of ``NAME.d/`` for the unit's names, the template's
  ``foo@.service.d/``, each dash prefix ``foo-.service.d/`` and ``service.d/``, in every search
  directory; a file name seen in an earlier directory hides the same name later; all applied in
  file-name order;
- ExecStart= (systemd.service(5) "Command lines"): words split on blanks, single and double
  quotes anywhere in a word, C escapes (an unknown one is kept as written, as systemd does with a
  warning), a lone ``;`` separates commands and ``\\;`` is a literal ``;``, specifiers, the
  prefixes ``-@:+!`` of the first word; an empty assignment resets the list;
- ``$NAME`` as a whole word becomes the variable's value split into words (dropped when unset),
  ``${NAME}`` inside a word its value as is, ``$$`` a ``$``; the program itself is never expanded,
  and the ``:`` prefix turns expansion off;
- the environment for that expansion is Environment= (in order, later wins, empty resets) and
  then the EnvironmentFile= files, which override it (systemd.exec(5)). Variables the service
  manager adds itself (HOME, USER, MAINPID, ...) are not known here and read as unset.

Paths in results are as on the target (``/etc/systemd/system/x.service``); ``root`` only says
where that tree is. Everything is stdlib, since it runs on the target.
"""

from __future__ import annotations

import glob
import os
import re
import stat

# systemd's system unit search path, highest priority first (systemd.unit(5), "Unit File Load Path").
SEARCH_PATH = (
    "/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient",
    "/run/systemd/generator.early", "/etc/systemd/system", "/etc/systemd/system.attached",
    "/run/systemd/system", "/run/systemd/system.attached", "/run/systemd/generator",
    "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system",
    "/run/systemd/generator.late",
)

WHITESPACE = " \t\n\r"
COMMENTS = "#;"
PREFIX_CHARS = "-@:+!"
SUFFIX = ".service"
# systemd's unit name rules (unit-name.c): ASCII letters, digits and ":-_.\", an optional "@instance".
SERVICE_NAME = re.compile(r"\A[A-Za-z0-9:_.\\-]+(@[A-Za-z0-9:_.\\@-]*)?\.service\Z")
ENV_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
_LINES = re.compile(r"\r\n|\r|\n")
_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8, decoded with surrogateescape
_MAX_LINKS = 32
# Specifiers that are constant for the system service manager (systemd.unit(5), "Specifiers").
_FIXED = {"t": "/run", "S": "/var/lib", "C": "/var/cache", "L": "/var/log", "E": "/etc", "T": "/tmp",
          "V": "/var/tmp"}
_SIMPLE_ESCAPES = {"a": b"\a", "b": b"\b", "f": b"\f", "n": b"\n", "r": b"\r", "t": b"\t", "v": b"\v",
                   "\\": b"\\", '"': b'"', "'": b"'", "s": b" "}


class UnitFileError(ValueError):
    """A unit systemd would not load or run as read; names the file and line when there is one."""

    def __init__(self, message, path=None, line=None):
        self.reason, self.path, self.line = message, path, line
        where = ("%s:%d: " % (path, line) if line else "%s: " % path) if path else ""
        ValueError.__init__(self, where + message)


class UnitNotFound(UnitFileError):
    """No file for the unit anywhere on the search path; ``looked`` lists the directories."""

    def __init__(self, name, looked):
        self.looked = list(looked)
        UnitFileError.__init__(self, "no unit file %s in %s" % (name, ", ".join(self.looked)))


class UnitMasked(UnitFileError):
    """The unit is masked (its file links to /dev/null or is empty): systemd will not start it."""


class _Bad(Exception):
    """A word that does not split (unbalanced quotes, a bad escape where no relaxing applies)."""


# ------------------------------------------------------------------------------ paths under a root

def host_path(root, path):
    """Where the target's ``path`` is on this machine, for a tree at ``root``."""
    if root in ("", "/"):
        return path
    return os.path.join(root, path.lstrip("/"))


def chase(root, path):
    """``path`` with its links followed as systemd's chase() does under a root: an absolute target
    stays inside ``root`` and ``..`` stops there. Returns the target's path, ``/dev/null`` for a
    link there, or None when something on the way does not exist."""
    todo = [part for part in path.split("/") if part]
    done = []
    links = 0
    while todo:
        part = todo.pop(0)
        if part == ".":
            continue
        if part == "..":
            done = done[:-1]
            continue
        candidate = "/" + "/".join(done + [part])
        if "/" + "/".join(done + [part] + todo) == "/dev/null":
            return "/dev/null"
        try:
            mode = os.lstat(host_path(root, candidate)).st_mode
        except OSError:
            return None
        if stat.S_ISLNK(mode):
            links += 1
            if links > _MAX_LINKS:
                raise UnitFileError("too many levels of symbolic links", candidate)
            target = os.readlink(host_path(root, candidate))
            if target.startswith("/"):
                done = []
            todo = [p for p in target.split("/") if p] + todo
            continue
        done.append(part)
    return "/" + "/".join(done)


def _null_or_empty(root, path):
    """systemd's null_or_empty(): /dev/null, a device, or an empty regular file."""
    if path == "/dev/null":
        return True
    info = os.stat(host_path(root, path))
    return stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) or (stat.S_ISREG(info.st_mode) and not info.st_size)


# ------------------------------------------------------------------------------ unit names and specifiers

def parts(name):
    """(prefix, instance, suffix) of a unit name; instance is None without "@", "" for a template."""
    stem, suffix = name[:name.rindex(".")], name[name.rindex("."):]
    prefix, at, instance = stem.partition("@")
    return prefix, (instance if at else None), suffix


def template_of(name):
    """``foo@.service`` for the instance ``foo@bar.service``; None for any other name."""
    prefix, instance, suffix = parts(name)
    return "%s@%s" % (prefix, suffix) if instance else None


def _unescape(text, name):
    """unit_name_unescape(): ``-`` is ``/``, ``\\xNN`` a byte."""
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "-":
            out += b"/"
        elif text[i] == "\\":
            if text[i + 1:i + 2] != "x" or not re.match(r"[0-9a-fA-F]{2}\Z", text[i + 2:i + 4]):
                raise UnitFileError("%s: bad escape in %r" % (name, text))
            out.append(int(text[i + 2:i + 4], 16))
            i += 3
        else:
            out += text[i].encode("utf-8", "surrogateescape")
        i += 1
    return out.decode("utf-8", "surrogateescape")


class Specifiers:
    """Resolve ``%x`` specifiers: those that follow from the unit's name and fragment, and the
    system manager's fixed directories. Host facts (%H, %m, %b, %u, ...) are not known here."""

    def __init__(self, name=None, fragment_path=None):
        self.name, self.fragment_path = name, fragment_path

    def _value(self, letter):
        if letter in _FIXED:
            return _FIXED[letter]
        if letter in "yY" and self.fragment_path:
            return self.fragment_path if letter == "y" else os.path.dirname(self.fragment_path)
        if letter not in "nNpPiIjJf" or not self.name:
            return None
        prefix, instance, _suffix = parts(self.name)
        last = prefix.rsplit("-", 1)[-1] if "-" in prefix else prefix
        plain = {"n": self.name, "N": self.name[:self.name.rindex(".")], "p": prefix, "i": instance or "",
                 "j": last}
        if letter in plain:
            return plain[letter]
        if letter == "f":
            source = instance if instance else prefix
            return "/" if source == "-" else "/" + _unescape(source, self.name).strip("/")
        return _unescape({"P": prefix, "I": instance or "", "J": last}[letter], self.name)

    def resolve(self, text, strict=True):
        """``text`` with its specifiers replaced; ``%%`` is ``%``, a ``%`` before a character that
        is no specifier stays. An unknown or unresolvable specifier raises UnitFileError, or stays
        as written when ``strict`` is false."""
        out = []
        i = 0
        while i < len(text):
            if text[i] != "%" or i + 1 == len(text):
                out.append(text[i])
                i += 1
                continue
            letter = text[i + 1]
            i += 2
            value = "%" if letter == "%" else self._value(letter)
            if value is not None:
                out.append(value)
            elif not (letter.isascii() and letter.isalnum()) or not strict:
                out.append("%" + letter)
            else:
                raise UnitFileError("the specifier %%%s in %r cannot be resolved from the unit files alone"
                                    " (its name and fragment give %%n %%N %%p %%P %%i %%I %%j %%J %%f %%y %%Y, "
                                    "and %%t %%S %%C %%L %%E %%T %%V are fixed)" % (letter, text))
        return "".join(out)


# ------------------------------------------------------------------------------ words (extract_first_word)

def _cunescape_one(text, i):
    """(bytes, characters used) of the C escape whose letter is at ``text[i]``, or None."""
    letter = text[i]
    if letter in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[letter], 1
    if letter == "x" and re.match(r"[0-9a-fA-F]{2}\Z", text[i + 1:i + 3]):
        value = int(text[i + 1:i + 3], 16)
        return (bytes([value]), 3) if value else None
    if letter in "uU":
        width = 4 if letter == "u" else 8
        digits = text[i + 1:i + 1 + width]
        if not re.match(r"[0-9a-fA-F]{%d}\Z" % width, digits):
            return None
        code = int(digits, 16)
        if not code or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return None
        return chr(code).encode("utf-8"), width + 1
    if letter in "01234567" and re.match(r"[0-7]{3}\Z", text[i:i + 3]):
        value = int(text[i:i + 3], 8)
        return (bytes([value]), 3) if 0 < value <= 255 else None
    return None


def _next_word(text, i, cunescape=True, relax=False, keep_bad_escapes=False):
    """(word, index of the next word) from ``text[i:]`` as extract_first_word() with
    EXTRACT_UNQUOTE splits it; (None, len) when only blanks are left. ``keep_bad_escapes`` keeps
    an unknown escape or a trailing backslash as written (systemd's retry with
    EXTRACT_UNESCAPE_RELAX); ``relax`` tolerates unbalanced quotes and a trailing backslash."""
    n = len(text)
    while i < n and text[i] in WHITESPACE:
        i += 1
    if i >= n:
        return None, n
    out = bytearray()
    quote = None
    while i < n:
        char = text[i]
        if char == "\\":
            i += 1
            if i >= n:
                if keep_bad_escapes and (quote is None or relax):
                    out += b"\\"
                elif not relax:
                    raise _Bad("a trailing backslash")
                break
            decoded = _cunescape_one(text, i) if cunescape else None
            if decoded:
                out += decoded[0]
                i += decoded[1]
            elif cunescape and not keep_bad_escapes:
                raise _Bad("an unknown escape \\%s" % text[i])
            else:
                if cunescape:
                    out += b"\\"
                out += text[i].encode("utf-8", "surrogateescape")
                i += 1
            continue
        i += 1
        if quote:
            if char == quote:
                quote = None
            else:
                out += char.encode("utf-8", "surrogateescape")
        elif char in "'\"":
            quote = char
        elif char in WHITESPACE:
            break
        else:
            out += char.encode("utf-8", "surrogateescape")
    else:
        if quote and not relax:
            raise _Bad("unbalanced quoting")
    while i < n and text[i] in WHITESPACE:
        i += 1
    return out.decode("utf-8", "surrogateescape"), i


def split_words(text, cunescape=True, relax=False):
    """Every word of ``text`` (see _next_word); raises ValueError on a word that does not split."""
    words = []
    i = 0
    while True:
        try:
            word, i = _next_word(text, i, cunescape, relax)
        except _Bad as exc:
            raise ValueError("%s in %r" % (exc, text))
        if word is None:
            return words
        words.append(word)


# ------------------------------------------------------------------------------ command lines

def strip_prefix(word):
    """(prefix, rest) of a command's first word: systemd's loop over ``-@:+!`` (``!!`` counts as
    one), each at most once and ``+``/``!`` exclusive, the way config_parse_exec reads them."""
    seen = ""
    i = 0
    while i < len(word):
        char = word[i]
        if char == "-" and "-" not in seen or char == "@" and "@" not in seen or char == ":" and ":" not in seen:
            seen += char
        elif char == "+" and not ("+" in seen or "!" in seen):
            seen += char
        elif char == "!" and not ("+" in seen or "!!" in seen):
            seen += char
        else:
            break
        i += 1
    return word[:i], word[i:]


def check_program(path, text):
    """config_parse_exec's checks of the executable: not empty, no control characters, quotes
    or backslashes, not a directory, an absolute path or a bare file name."""
    if not path:
        raise UnitFileError("empty program in command line %r" % text)
    if re.search(r"[\x00-\x1f\x7f\\\"']", path):
        raise UnitFileError("the program %r has special characters systemd refuses" % path)
    if path.endswith("/") or (not path.startswith("/") and "/" in path) or path in (".", ".."):
        raise UnitFileError("the program %r is neither an absolute path nor a file name" % path)


def split_commands(text, environment=None, unit_name=None, fragment_path=None):
    """Every command of one ExecStart= value as (argv, prefix): argv[0] is the program (with the
    ``@`` prefix, argv[1] is the name the program is shown as), specifiers resolved from
    ``unit_name``/``fragment_path``, and ``$`` expanded from ``environment`` unless it is None.
    A lone ``;`` separates commands. Raises UnitFileError on what systemd refuses."""
    specifiers = Specifiers(unit_name, fragment_path)
    commands = []
    i = 0
    try:
        while True:
            first, i = _next_word(text, i, keep_bad_escapes=True)
            if first is None:
                return commands
            if first == ";":
                continue
            prefix, program = strip_prefix(first)
            program = specifiers.resolve(program)
            check_program(program, text)
            argv = [program]
            while i < len(text):
                if text[i] == ";" and text[i + 1:i + 2] in ("",) + tuple(WHITESPACE):
                    i += 1
                    break
                if text[i:i + 2] == "\\;" and text[i + 2:i + 3] in ("",) + tuple(WHITESPACE):
                    argv.append(";")
                    i += 2
                    while i < len(text) and text[i] in WHITESPACE:
                        i += 1
                    continue
                word, i = _next_word(text, i, keep_bad_escapes=True)
                if word is None:
                    break
                argv.append(specifiers.resolve(word))
            if "@" in prefix and len(argv) < 2:
                raise UnitFileError("the @ prefix needs the name to show as argv[0] after the program: %r" % text)
            if environment is not None:
                argv = expand(argv, environment, prefix)[0]
            commands.append((argv, prefix))
    except _Bad as exc:
        raise UnitFileError("%s in command line %r" % (exc, text))


def split_command(text, environment=None, unit_name=None, fragment_path=None):
    """(argv, prefix) of a command line holding exactly one command; see split_commands. A lone
    ``;`` (several commands) is refused: that is a Type=oneshot list, not one server."""
    commands = split_commands(text, environment, unit_name, fragment_path)
    if len(commands) != 1:
        raise UnitFileError("%r holds %d commands, not one%s" % (
            text, len(commands), " (a lone ';' separates commands)" if commands else ""))
    return commands[0]


def _replace_env(word, environment, unset):
    """replace_env() with no flags: ``${NAME}`` is the value as is (empty when unset), ``$$`` is
    ``$``, anything else (``$NAME`` inside a word, ``${A:-b}``) stays as written."""
    out = []
    i = 0
    while i < len(word):
        if word[i] != "$" or i + 1 == len(word):
            out.append(word[i])
            i += 1
        elif word[i + 1] == "$":
            out.append("$")
            i += 2
        elif word[i + 1] == "{":
            close = word.find("}", i + 2)
            colon = word.find(":", i + 2)
            if close < 0 or 0 <= colon < close:  # unterminated or unsupported syntax: literal
                out.append(word[i:i + 2])
                i += 2
                continue
            name = word[i + 2:close]
            if name not in environment or not ENV_NAME.match(name):
                unset.append(name)
            out.append(environment.get(name, "") if ENV_NAME.match(name) else "")
            i = close + 1
        else:
            out.append("$")
            i += 1
    return "".join(out)


def expand(argv, environment, prefix=""):
    """(argv, unset names) as systemd runs ``argv``: a whole word ``$NAME`` becomes the value split
    into words (quotes honoured, no escapes) or nothing when unset, ``${NAME}`` and ``$$`` inside
    words as replace_env(). argv[0], the program, is never expanded; the ``:`` prefix expands
    nothing."""
    argv = list(argv)
    if ":" in prefix or not argv:
        return argv, []
    out, unset = [argv[0]], []
    for word in argv[1:]:
        if word.startswith("$") and word[1:2] not in ("{", "$"):
            name = word[1:]
            if ENV_NAME.match(name) and name in environment:
                out.extend(split_words(environment[name], cunescape=False, relax=True))
            else:
                unset.append(name)
            continue
        out.append(_replace_env(word, environment, unset))
    return out, sorted(set(unset))


# ------------------------------------------------------------------------------ environment

def split_environment(text, unit_name=None, warnings=None):
    """The {NAME: value} one Environment= value sets: quoted, C-unescaped words ``NAME=value``,
    specifiers resolved. A line that does not split is ignored whole and a bad word alone, with
    a warning, as systemd does."""
    try:
        words = split_words(text)
    except ValueError as exc:
        _warn(warnings, "Environment=%s ignored: %s" % (text, exc))
        return {}
    found = {}
    specifiers = Specifiers(unit_name)
    for word in words:
        try:
            word = specifiers.resolve(word)
        except UnitFileError as exc:
            _warn(warnings, "Environment= word %r ignored: %s" % (word, exc.reason))
            continue
        name, equals, value = word.partition("=")
        if not equals or not ENV_NAME.match(name):
            _warn(warnings, "Environment= word %r ignored: not NAME=value" % word)
            continue
        found[name] = value
    return found


def read_environment_file(path, warnings=None):
    """{NAME: value} of an EnvironmentFile= file, read as systemd's parse_env_file_internal():
    blank and ``#``/``;`` lines skipped; ``NAME=value`` with blanks round the name and value
    dropped; an unquoted value keeps inner blanks and quotes after its start, a backslash keeps
    the next character and joins lines; ``'...'`` is verbatim across lines; ``"..."`` unescapes
    only ``"\\`$`` and joins lines at a backslash-newline. A name that is not a variable name
    (``export FOO``) is dropped with a warning. Invalid UTF-8 in a name or value fails the file,
    as in systemd."""
    with open(path, "rb") as handle:
        text = handle.read().decode("utf-8", "surrogateescape")
    found = {}
    for name, value in _env_file_pairs(text):
        if _NOT_UTF8.search(name + value):
            shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            raise UnitFileError("invalid UTF-8 in %r" % shown, path)
        if ENV_NAME.match(name):
            found[name] = value
        else:
            _warn(warnings, "%s: %r is not a variable name, ignored" % (path, name))
    return found


def _env_file_pairs(text):
    """(name, value) pairs of an environment file, the state machine of env-file.c."""
    pairs = []
    state, key, value = "pre_key", [], []
    key_end = value_end = None
    for char in text:
        if state == "pre_key":
            if char in COMMENTS:
                state = "comment"
            elif char not in WHITESPACE:
                state, key, key_end = "key", [char], None
        elif state == "key":
            if char in "\n\r":
                state = "pre_key"
            elif char == "=":
                state, value, value_end = "pre_value", [], None
            else:
                key_end = (key_end if key_end is not None else len(key)) if char in WHITESPACE else None
                key.append(char)
        elif state == "pre_value":
            if char in "\n\r":
                pairs.append(("".join(key[:key_end]), "".join(value)))
                state = "pre_key"
            elif char in "'\"":
                state = "single" if char == "'" else "double"
            elif char == "\\":
                state = "value_escape"
            elif char not in WHITESPACE:
                state = "value"
                value.append(char)
        elif state == "value":
            if char in "\n\r":
                pairs.append(("".join(key[:key_end]), "".join(value[:value_end])))
                state = "pre_key"
            elif char == "\\":
                state, value_end = "value_escape", None
            else:
                value_end = (value_end if value_end is not None else len(value)) if char in WHITESPACE else None
                value.append(char)
        elif state == "value_escape":
            state = "value"
            if char not in "\n\r":
                value.append(char)
        elif state == "single":
            if char == "'":
                state = "pre_value"
            else:
                value.append(char)
        elif state == "double":
            if char == '"':
                state = "pre_value"
            elif char == "\\":
                state = "double_escape"
            else:
                value.append(char)
        elif state == "double_escape":
            state = "double"
            if char in '"\\`$':
                value.append(char)
            elif char != "\n":
                value.extend(("\\", char))
        elif state == "comment":
            if char == "\\":
                state = "comment_escape"
            elif char in "\n\r":
                state = "pre_key"
        elif state == "comment_escape":
            state = "pre_key" if char in "\n\r" else "comment"
    if state in ("pre_value", "value", "value_escape", "single", "double", "double_escape"):
        # The last line without a line break, or an unterminated quote: systemd keeps what it read.
        pairs.append(("".join(key[:key_end]), "".join(value[:value_end] if state == "value" else value)))
    return pairs


def _warn(warnings, text):
    if warnings is not None:
        warnings.append(text)


# ------------------------------------------------------------------------------ unit files

def parse(text, path, warnings=None):
    """[(section, key, value, line)] of a unit file's text, as config_parse() reads it."""
    found = []
    section = None
    pending, pending_line = None, None
    lines = _LINES.split(text[1:] if text.startswith("\ufeff") else text)
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, 1):
        blank = line.lstrip(WHITESPACE)
        if blank and blank[0] in COMMENTS:
            continue
        joined = pending + line if pending is not None else line
        backslashes = len(joined) - len(joined.rstrip("\\"))
        if backslashes % 2:
            pending = joined[:-1] + " "
            pending_line = pending_line or number
            continue
        section = _parse_line(joined, path, pending_line or number, section, found, warnings)
        pending, pending_line = None, None
    if pending is not None:
        _parse_line(pending, path, pending_line, section, found, warnings)
    return found


def _parse_line(text, path, number, section, found, warnings):
    """One logical line into ``found``; returns the section it leaves open."""
    text = text.strip(WHITESPACE)
    if not text:
        return section
    if _NOT_UTF8.search(text):
        _warn(warnings, "%s:%d: invalid UTF-8, line ignored" % (path, number))
        return section
    if text.startswith("["):
        if not text.endswith("]"):
            raise UnitFileError("invalid section header %r" % text, path, number)
        return text[1:-1]
    if section is None:
        _warn(warnings, "%s:%d: assignment outside of any section, ignored" % (path, number))
    elif "=" not in text or text.startswith("="):
        _warn(warnings, "%s:%d: no Key=Value, line ignored" % (path, number))
    else:
        key, value = text.split("=", 1)
        found.append((section, key.strip(WHITESPACE), value.strip(WHITESPACE), number))
    return section


class Unit:
    """What a service unit says once its fragment and drop-ins are merged (see load())."""

    def __init__(self, name, names, root, fragment_path, dropins):
        self.name, self.names, self.root = name, names, root
        self.fragment_path, self.dropins = fragment_path, dropins
        self.exec_start, self.exec_start_prefixes, self.exec_start_sources = [], [], []
        self.environment, self.environment_files = {}, []
        self.user = self.working_directory = self.configured_type = self.bus_name = None
        self.warnings = []

    @property
    def exec_start_prefix(self):
        """The prefixes of the last command, the one a simple service runs; None without one."""
        return self.exec_start_prefixes[-1] if self.exec_start_prefixes else None

    @property
    def type(self):
        """Type= as set, else systemd's default: oneshot without ExecStart=, dbus with BusName=,
        else simple."""
        if self.configured_type:
            return self.configured_type
        if not self.exec_start:
            return "oneshot"
        return "dbus" if self.bus_name else "simple"

    def apply(self, key, value, path, line):
        """One [Service] assignment, as systemd's parser for that key applies it."""
        specifiers = Specifiers(self.name, self.fragment_path)
        if key == "ExecStart":
            if not value:
                self.exec_start, self.exec_start_prefixes, self.exec_start_sources = [], [], []
                return
            try:
                commands = split_commands(value, None, self.name, self.fragment_path)
            except UnitFileError as exc:
                raise UnitFileError("ExecStart=: %s" % exc.reason, path, line)
            for argv, prefix in commands:
                self.exec_start.append(argv)
                self.exec_start_prefixes.append(prefix)
                self.exec_start_sources.append("%s:%d" % (path, line))
        elif key == "Environment":
            if not value:
                self.environment = {}
            self.environment.update(split_environment(value, self.name, self.warnings))
        elif key == "EnvironmentFile":
            if not value:
                self.environment_files = []
                return
            resolved = specifiers.resolve(value, strict=False)
            optional = resolved.startswith("-")
            file_path = resolved[1:] if optional else resolved
            if not file_path.startswith("/"):
                self.warnings.append("%s:%d: EnvironmentFile=%s is not an absolute path, ignored" % (path, line, value))
                return
            self.environment_files.append({"path": file_path, "optional": optional})
        elif key in ("User", "WorkingDirectory", "Type", "BusName"):
            attribute = {"User": "user", "WorkingDirectory": "working_directory", "Type": "configured_type",
                         "BusName": "bus_name"}[key]
            setattr(self, attribute, specifiers.resolve(value, strict=False) if value else None)

    def as_dict(self):
        return {"name": self.name, "names": list(self.names), "fragment_path": self.fragment_path,
                "dropins": list(self.dropins), "exec_start": [list(a) for a in self.exec_start],
                "exec_start_prefix": self.exec_start_prefix, "exec_start_sources": list(self.exec_start_sources),
                "environment": dict(self.environment), "environment_files": [dict(f) for f in self.environment_files],
                "user": self.user, "working_directory": self.working_directory, "type": self.type,
                "warnings": list(self.warnings)}


def find_fragment(name, root="/"):
    """(fragment path, the unit's own name): the first file for ``name`` along SEARCH_PATH, then
    for its template; links followed inside ``root``. A link to another unit name makes that
    name the unit's own (``name`` is then an alias). Raises UnitNotFound or UnitMasked."""
    candidates = [name] + [t for t in [template_of(name)] if t]
    for candidate in candidates:
        for directory in SEARCH_PATH:
            path = directory + "/" + candidate
            target = chase(root, path)
            if target is None:
                continue  # absent, or a dangling link, which systemd skips too
            if _null_or_empty(root, target):
                raise UnitMasked("%s is masked (%s %s): systemd will not start it; systemctl unmask %s" % (
                    name, path, "links to /dev/null" if target == "/dev/null" else "is empty", name), path)
            if not os.path.isfile(host_path(root, target)):
                raise UnitFileError("not a regular file", target)
            own = os.path.basename(target)
            if candidate != name or not SERVICE_NAME.match(own) or parts(own)[1] == "":
                own = name  # found as the template, or linked to one: not an alias
            return target, own
    raise UnitNotFound(name, SEARCH_PATH)


def _dir_names(name):
    """The drop-in directory names of one unit name, in unit_file_find_dirs()'s order: the name,
    its template's (recursively), then its dash prefix's (``foo-bar-baz`` -> ``foo-bar-``)."""
    found = [name]
    prefix, instance, suffix = parts(name)
    if instance:
        found += _dir_names(template_of(name))
    chopped = False
    while True:
        dash = prefix.rfind("-")
        if dash <= 0:
            return found
        if dash + 1 < len(prefix) or chopped:
            prefix = prefix[:dash + 1]
            break
        prefix, chopped = prefix[:dash], True
    built = prefix + ("@" + instance if instance else "") + suffix
    return found + _dir_names(built)


def find_dropins(names, root="/", exclude=()):
    """The drop-in files systemd applies for a unit called ``names`` (its own name first), in the
    order it applies them. A file name in an earlier directory hides the same name later; a
    drop-in linked to /dev/null or empty hides and adds nothing, so it is not listed.
    ``exclude`` leaves out files by path as if they were not there (what the unit does without
    them)."""
    directories = []
    for name in names:
        for base in SEARCH_PATH:
            directories.extend(base + "/" + d + ".d" for d in _dir_names(name))
    directories.extend(base + "/service.d" for base in SEARCH_PATH)
    excluded = set(exclude)
    seen_dirs, by_name = set(), {}
    for directory in directories:
        target = chase(root, directory)
        if target is None or target in seen_dirs or not os.path.isdir(host_path(root, target)):
            continue
        seen_dirs.add(target)
        for entry in sorted(os.listdir(host_path(root, target))):
            if not entry.endswith(".conf") or entry.startswith(".") or entry in by_name:
                continue
            full = host_path(root, target + "/" + entry)
            if os.path.isdir(full) and not os.path.islink(full):
                continue
            if directory + "/" + entry in excluded or target + "/" + entry in excluded:
                continue
            by_name[entry] = target + "/" + entry
    applied = []
    for entry in sorted(by_name):
        target = chase(root, by_name[entry])
        if target is None or _null_or_empty(root, target) or not os.path.isfile(host_path(root, target)):
            continue
        applied.append(by_name[entry])
    return applied


def _read_text(root, path):
    """A unit file's text, links followed inside ``root``; bytes that are not UTF-8 kept as
    surrogates (their lines are ignored)."""
    target = chase(root, path)
    if target is None:
        raise UnitFileError("vanished while being read", path)
    with open(host_path(root, target), "rb") as handle:
        return handle.read().decode("utf-8", "surrogateescape")


def load(name, root="/", exclude=()):
    """The service ``name`` (``foo.service``) as systemd merges it from the tree at ``root``:
    a Unit with name (its own, an alias's target), names, fragment_path, dropins, exec_start
    (argv lists, specifiers resolved, ``$`` not expanded), exec_start_prefixes,
    exec_start_sources, environment (Environment= only), environment_files, user,
    working_directory, type and warnings. ``exclude`` leaves drop-ins out (see find_dropins).
    Raises UnitNotFound, UnitMasked or UnitFileError naming the file and line."""
    if not SERVICE_NAME.match(name or "") or len(name) > 255:
        raise UnitFileError("%r is not a service unit name (letters, digits, ':-_.\\', one '@', "
                            "ending in .service)" % (name,))
    fragment, own = find_fragment(name, root)
    names = [own] + ([name] if own != name else [])
    unit = Unit(own, names, root, fragment, find_dropins(names, root, exclude))
    for path in [fragment] + unit.dropins:
        for section, key, value, line in parse(_read_text(root, path), path, unit.warnings):
            if section == "Service":
                unit.apply(key, value, path, line)
    return unit


def environment_of(unit, warnings=None):
    """The environment the unit's commands are expanded with: Environment= first, then every
    EnvironmentFile= (a glob, sorted matches) overriding it, as systemd.exec(5) says. A missing
    file without the ``-`` prefix raises UnitFileError: systemd would not start the service."""
    found = dict(unit.environment)
    for item in unit.environment_files:
        root = unit.root
        pattern = host_path(root, item["path"])
        if root not in ("", "/"):
            pattern = os.path.join(glob.escape(root), item["path"].lstrip("/"))
        matches = sorted(glob.glob(pattern))
        if not matches:
            if item["optional"]:
                continue
            raise UnitFileError("EnvironmentFile=%s does not exist: systemd would not start %s"
                                % (item["path"], unit.name))
        for match in matches:
            path = "/" + os.path.relpath(match, root) if root not in ("", "/") else match
            target = chase(root, path)
            try:
                if target is None:
                    raise OSError("a link to nowhere")
                found.update(read_environment_file(host_path(root, target), warnings))
            except (OSError, UnitFileError) as exc:
                if not item["optional"]:
                    raise UnitFileError("EnvironmentFile=%s cannot be read: %s" % (path, exc))
    return found
