# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A model server's command line as data: which server, where its own arguments start, one flag
read or set, and the ExecStart= text that gives back exactly that argv.

Why argv and not text: unit_file.py splits ExecStart= word for word as systemd does, flags are
edited here word by word, and render_exec() writes a line systemd splits back to the same words
(tested against unit_file.split_command). No regex over a joined command line, so a model path
with blanks, a JSON value or a ``$`` stays what it was.

What locate() recognises (anything else is ``generic``, its arguments starting after the
program, or after ``-m MODULE`` for Python):

- ``sglang``: ``python[3[.x]] [-u ...] -m sglang.launch_server``, ``sglang serve``;
- ``vllm``: ``vllm serve``, ``python -m vllm.entrypoints.openai.api_server``,
  ``python -m vllm.entrypoints.cli.main serve``;
- ``llama_cpp``: llama.cpp's own ``llama-server``;
- ``llama_cpp_python``: ``python -m llama_cpp.server`` (llama-cpp-python: other flags, with
  underscores, so it is a kind of its own);
- programs by base name, so any venv or prefix path works; before them these wrappers and their
  options: ``env [-i] [-u NAME] [-C DIR] [NAME=VALUE...]``, ``numactl``, ``taskset [-a] [-c]
  MASK``, ``nice``, ``ionice``, ``chrt [...] PRIORITY``, ``stdbuf``, ``prlimit``, ``runuser``,
  ``conda|mamba|micromamba run``, ``uv run``, ``exec``, nested, each optionally ending in ``--``.
  A wrapper that takes the command as one string (``sh -c``, ``env -S``, ``runuser -c``) or a
  container (``docker run``) is ``generic``: its flags are not words that can be edited.

Flags: long flags compare with ``-`` and ``_`` alike (vLLM and SGLang accept both spellings,
llama-cpp-python writes underscores). ``--flag=VALUE`` or ``--flag VALUE``, where the next word
is the value unless it looks like an option (starts with ``-`` and is not a negative number);
otherwise the flag is a bare boolean. ``--`` ends the flags. A server's boolean flag followed by
a positional argument reads as taking it as value: the servers here take their positionals
first (``vllm serve MODEL``), so that does not arise with them.
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import unit_file

KINDS = ("sglang", "vllm", "llama_cpp", "llama_cpp_python", "generic")

_PYTHON = re.compile(r"\Apython(\d+(\.\d+)*)?\Z")
_NUMBER = re.compile(r"\A-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\Z")
_FLAG = re.compile(r"\A(--[A-Za-z0-9][A-Za-z0-9_.-]*|-[A-Za-z0-9][A-Za-z0-9_.-]*)\Z")
_MODULES = {"sglang.launch_server": "sglang", "vllm.entrypoints.openai.api_server": "vllm",
            "llama_cpp.server": "llama_cpp_python"}
# Python's own options that take a value (python(1)); -c makes the program a string.
_PYTHON_VALUES = "WX"
_PYTHON_LONG_VALUES = ("check-hash-based-pycs",)

# wrapper base name -> (short options with a value, long options with a value, positional words
# before the command, options after which no command follows or it is one string)
_WRAPPERS = {
    "env": ("uC", ("unset", "chdir"), 0, ("S", "split-string")),
    "numactl": ("ipPmNCcwSfLoMI", ("interleave", "preferred", "preferred-many", "membind", "cpunodebind",
                                   "physcpubind", "cpubind", "weighted-interleave", "shm", "file", "length",
                                   "offset", "shmmode", "shmid"), 0, ("H", "s", "hardware", "show")),
    "taskset": ("", (), 1, ("p", "pid")),
    "nice": ("n", ("adjustment",), 0, ()),
    "ionice": ("cn", ("class", "classdata"), 0, ("p", "P", "u", "pid", "pgid", "uid")),
    "chrt": ("TPD", ("sched-runtime", "sched-period", "sched-deadline"), 1, ("p", "m", "pid", "max")),
    "stdbuf": ("ioe", ("input", "output", "error"), 0, ()),
    "prlimit": ("o", ("output",), 0, ("p", "pid")),
    "runuser": ("ugGsw", ("user", "group", "supp-group", "shell", "whitelist-environment"), 0, ("c", "command")),
    "exec": ("a", (), 0, ()),
}
# "<tool> run" wrappers: the options of their run command that take a value.
_RUNNERS = {
    "conda": ("npa", ("name", "prefix", "cwd"), 0, ()),
    "mamba": ("npa", ("name", "prefix", "cwd"), 0, ()),
    "micromamba": ("npra", ("name", "prefix", "root-prefix", "cwd", "attach", "env-var"), 0, ("e",)),
    "uv": ("pwf", ("python", "with", "with-editable", "with-requirements", "directory", "project", "package",
                   "env-file", "extra", "group", "index", "default-index", "index-url", "extra-index-url",
                   "find-links", "config-file", "cache-dir", "only-group", "no-group"), 0, ()),
}


def _skip_options(argv, i, shorts, longs, stops):
    """Index of the first word after the getopt-style options from ``argv[i]`` (``--`` eaten);
    None when an option in ``stops`` says there is no command to find."""
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return i + 1
        if word.startswith("--"):
            name, equals, _value = word[2:].partition("=")
            if name in stops:
                return None
            i += 2 if name in longs and not equals else 1
            continue
        if word.startswith("-") and len(word) > 1:
            i += 1
            for position, letter in enumerate(word[1:], 1):
                if letter in stops:
                    return None
                if letter in shorts:
                    i += 1 if position == len(word) - 1 else 0
                    break
            continue
        return i
    return None


def _server(argv, i):
    """(kind, start) for the program at ``argv[i]``."""
    base = posixpath.basename(argv[i])
    following = argv[i + 1] if i + 1 < len(argv) else None
    if base in ("vllm", "sglang") and following == "serve":
        return base, i + 2
    if base == "llama-server":
        return "llama_cpp", i + 1
    if not _PYTHON.match(base):
        return "generic", i + 1
    j = i + 1
    while j < len(argv):
        word = argv[j]
        if word.startswith("--"):
            j += 2 if word[2:] in _PYTHON_LONG_VALUES else 1
            continue
        if not word.startswith("-") or word == "-":
            return "generic", i + 1  # a script or stdin: not a server recognised here
        for position, letter in enumerate(word[1:], 1):
            rest = word[position + 1:]
            if letter == "c":
                return "generic", i + 1
            if letter == "m":
                module, after = (rest, j + 1) if rest else ((argv[j + 1], j + 2) if j + 1 < len(argv) else (None, j + 1))
                if module == "vllm.entrypoints.cli.main" and after < len(argv) and argv[after] == "serve":
                    return "vllm", after + 1
                return _MODULES.get(module, "generic"), after
            if letter in _PYTHON_VALUES:
                j += 0 if rest else 1
                break
        j += 1
    return "generic", i + 1


def locate(argv):
    """(kind, start, program): the server kind (see KINDS), the index where the server's own
    arguments start, and the index of the program behind any wrappers (0 without one)."""
    argv = list(argv)
    i = 0
    for _depth in range(16):
        if i >= len(argv):
            return "generic", len(argv), min(i, max(len(argv) - 1, 0))
        base = posixpath.basename(argv[i])
        if base in _RUNNERS and i + 1 < len(argv) and argv[i + 1] == "run":
            shorts, longs, _count, stops = _RUNNERS[base]
            j = _skip_options(argv, i + 2, shorts, longs, stops)
        elif base in _WRAPPERS:
            shorts, longs, count, stops = _WRAPPERS[base]
            j = _skip_options(argv, i + 1, shorts, longs, stops)
            if j is not None and base == "env":
                while j < len(argv) and "=" in argv[j] and not argv[j].startswith("="):
                    j += 1
            j = None if j is None else j + count
        else:
            break
        if j is None or j >= len(argv):
            return "generic", i + 1, i
        i = j
    kind, start = _server(argv, i)
    return kind, start, i


def kind_of(argv):
    """(kind, start): which server ``argv`` runs and where its own arguments start."""
    kind, start, _program = locate(argv)
    return kind, start


def _key(flag):
    return flag.replace("_", "-") if flag.startswith("--") else flag


def _is_option(word):
    return word.startswith("-") and word != "-" and not _NUMBER.match(word)


def _occurrences(argv, flag, start):
    """[(index, words, spelling, value, style)] of ``flag`` in argv[start:] before ``--``; style
    is ``=``, `` `` or None for a bare boolean."""
    key, found, i = _key(flag), [], start
    while i < len(argv) and argv[i] != "--":
        word = argv[i]
        name, equals, value = word.partition("=") if flag.startswith("--") else (word, "", "")
        if name.startswith("-") and _key(name) == key:
            if equals:
                found.append((i, 1, name, value, "="))
            elif i + 1 < len(argv) and not _is_option(argv[i + 1]) and argv[i + 1] != "--":
                found.append((i, 2, name, argv[i + 1], " "))
                i += 1
            else:
                found.append((i, 1, name, True, None))
        i += 1
    return found


def _check(argv, flag, start):
    if not isinstance(flag, str) or not _FLAG.match(flag):
        raise ValueError("flag=%r is not an option name such as --max-num-seqs or -c" % (flag,))
    if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start <= len(argv):
        raise ValueError("start=%r is not an index into the %d words of the command" % (start, len(argv)))


def flag_value(argv, flag, start=1):
    """The value of ``flag`` in argv[start:]: its text, True for a bare boolean flag, None when
    absent. Given more than once, the last wins (as with argparse)."""
    _check(argv, flag, start)
    found = _occurrences(argv, flag, start)
    return found[-1][3] if found else None


def with_flag(argv, flag, value, start=1):
    """A new argv with ``flag`` set to ``value`` in argv[start:] (nothing before ``start`` moves):
    the first occurrence rewritten in its own spelling and ``=``/space style, later ones removed;
    absent, ``flag value`` appended (before a ``--``). True writes a bare flag, None or False
    removes every occurrence and its value. A value starting with ``-`` is written
    ``--flag=value``."""
    argv = list(argv)
    _check(argv, flag, start)
    if value is None or value is False:
        text = None
    elif value is True:
        text = True
    elif isinstance(value, (str, int, float)):
        text = value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
    else:
        raise ValueError("value=%r for %s is not text, a number, true or null" % (value, flag))
    dashed = isinstance(text, str) and text.startswith("-")
    if dashed and not flag.startswith("--"):
        raise ValueError("%s=%r: a short option cannot take a value starting with '-'" % (flag, text))
    found = _occurrences(argv, flag, start)
    for index, words, _name, _value, _style in reversed(found[1:] if text is not None else found):
        del argv[index:index + words]
    if text is None:
        return argv
    spelling, style = (found[0][2], found[0][4]) if found else (flag, " ")
    if text is True:
        words = [spelling]
    elif dashed or style == "=":
        words = ["%s=%s" % (spelling, text)]
    else:
        words = [spelling, text]
    if found:
        index = found[0][0]
        argv[index:index + found[0][1]] = words
    else:
        index = argv.index("--", start) if "--" in argv[start:] else len(argv)
        argv[index:index] = words
    return argv


def flags_of(argv, start=1):
    """{--flag-with-dashes: value} of the long flags in argv[start:] before ``--``, in the order
    they first appear; a value as flag_value() gives it (the last one given)."""
    found = {}
    i = start
    while i < len(argv) and argv[i] != "--":
        word = argv[i]
        if word.startswith("--") and len(word) > 2:
            name, equals, value = word.partition("=")
            if not equals:
                if i + 1 < len(argv) and not _is_option(argv[i + 1]) and argv[i + 1] != "--":
                    value = argv[i + 1]
                    i += 1
                else:
                    value = True
            found[_key(name)] = value
        i += 1
    return found


# ------------------------------------------------------------------------------ rendering

_BARE = re.compile(r"\A[^\s\"'\\\x00-\x1f\x7f\x85\u2028\u2029\udc80-\udcff]+\Z")
_NAMED = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b",
          "\f": "\\f", "\v": "\\v"}


def _escaped(char):
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return "\\x%02x" % code
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, carried as a surrogate
        return "\\x%02x" % (code - 0xDC00)
    if char in "\x85\u2028\u2029":  # line breaks to some readers: keep the file one line each
        return "\\u%04x" % code
    if 0xD800 <= code <= 0xDFFF:
        raise ValueError("%r cannot be written in a unit file" % char)
    return char


def _word(word, dollars):
    """One word as systemd's command and Environment= parsers read it back: ``%%`` for ``%``,
    ``$$`` for ``$`` when ``dollars``, double quotes with C escapes when needed."""
    if not isinstance(word, str) or "\x00" in word:
        raise ValueError("%r is not a word systemd can pass (text without NUL)" % (word,))
    text = word.replace("%", "%%")
    if dollars:
        text = text.replace("$", "$$")
    if text and text != ";" and _BARE.match(text):
        return text
    return '"%s"' % "".join(_escaped(char) for char in text)


def render_exec(argv, prefix=""):
    """The text after ``ExecStart=`` that systemd splits back to exactly ``argv`` (its prefixes
    ``prefix`` in front): every word quoted when needed, ``%`` as ``%%``, ``$`` as ``$$``
    (except with the ``:`` prefix, which expands nothing). argv[0] must be a program systemd
    accepts: a file name or absolute path without quotes, backslashes or control characters,
    not starting with a prefix character, without ``${`` or ``$$``."""
    if not isinstance(argv, (list, tuple)) or not argv:
        raise ValueError("argv=%r is not a command (a list of words, the program first)" % (argv,))
    seen, rest = unit_file.strip_prefix(prefix + "/") if isinstance(prefix, str) else (None, None)
    if seen != prefix or rest != "/":
        raise ValueError("prefix=%r is not a combination of the ExecStart= prefixes - @ : + ! !!" % (prefix,))
    program = argv[0]
    if not isinstance(program, str) or program[:1] in unit_file.PREFIX_CHARS or "${" in program or "$$" in program:
        raise ValueError("argv[0]=%r cannot be written as a program" % (program,))
    try:
        unit_file.check_program(program, program)
    except unit_file.UnitFileError as exc:
        raise ValueError(exc.reason)
    if "@" in prefix and len(argv) < 2:
        raise ValueError("the @ prefix needs argv[1], the name the program is shown as")
    words = [prefix + _word(program, False)]
    words.extend(_word(word, ":" not in prefix) for word in argv[1:])
    return " ".join(words)


def render_environment(environment):
    """The text after ``Environment=`` that sets exactly ``environment`` ({NAME: value}): each
    ``NAME=value`` one word, quoted when needed, ``%`` as ``%%`` (Environment= resolves
    specifiers but never expands ``$``)."""
    words = []
    for name in environment:
        value = environment[name]
        if not isinstance(name, str) or not unit_file.ENV_NAME.match(name) or not isinstance(value, str):
            raise ValueError("%r=%r is not a variable name and text" % (name, value))
        words.append(_word("%s=%s" % (name, value), False))
    return " ".join(words)
