# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Prometheus text exposition format, version 0.0.4: rendered, checked and read back.

What node_exporter's textfile collector reads (``*.prom`` files in its
``--collector.textfile.directory``), and what it refuses, so that a file this collection writes
is never one node_exporter drops (it drops the whole file and only raises
``node_textfile_scrape_error``):

- ``# HELP name text``: the text with ``\\`` written ``\\\\`` and a line feed ``\\n``;
- ``# TYPE name gauge|counter|untyped`` (the simple types; histograms and summaries need
  their ``_bucket``/``_sum``/``_count`` series and are not rendered here);
- one line per sample, ``name{label="value",...} value``: label values with ``\\``, ``"`` and
  a line feed escaped; labels sorted by name; no timestamp (the textfile collector refuses
  client-side timestamps);
- metric names ``[a-zA-Z_:][a-zA-Z0-9_:]*``; label names ``[a-zA-Z_][a-zA-Z0-9_]*`` and not
  starting with ``__`` (reserved for Prometheus' own labels);
- values as Go writes a float64 (strconv.FormatFloat(v, 'g', -1, 64), as client_golang's
  expfmt does): ``1``, ``0.5``, ``1e+06``, ``+Inf``, ``-Inf``, ``NaN``; a Python int is written
  as its digits (``1767225600``, never ``1767225600.0``);
- every sample of a metric under that metric's one HELP/TYPE pair, metrics in the order given,
  samples sorted by their labels, no (name, labels) pair twice.

Everything else in the file is a comment (a ``#`` line whose second word is neither HELP nor
TYPE), which node_exporter ignores: the collection's marker lives there.

``parse`` reads a file back as (name, labels, value text) triples, for comparing a file on disk
with the one a run would write; ``masked`` blanks the values of some metrics so two texts can be
compared without them (heartbeat timestamps). Errors are ValueError naming the bad name, label,
value or line.
"""

from __future__ import annotations

import decimal
import math
import re

TYPES = ("gauge", "counter", "untyped")
# Types parse() accepts in a file written by another program (version 0.0.4 knows them all).
_READ_TYPES = TYPES + ("histogram", "summary")

METRIC_NAME_RE = re.compile(r"\A[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL_NAME_RE = re.compile(r"\A[a-zA-Z_][a-zA-Z0-9_]*\Z")
# A number as Go's strconv.ParseFloat reads it in decimal (hex floats and underscores aside).
_NUMBER_RE = re.compile(r"\A[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_INTEGER_RE = re.compile(r"\A[+-]?[0-9]+\Z")
_SPECIAL = {"+inf": "+Inf", "inf": "+Inf", "+infinity": "+Inf", "infinity": "+Inf",
            "-inf": "-Inf", "-infinity": "-Inf", "nan": "NaN", "+nan": "NaN", "-nan": "NaN"}
_METRIC_START = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:"
_METRIC_CHARS = _METRIC_START + "0123456789"
_BLANKS = " \t"

METRIC_NAME_RULE = "[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL_NAME_RULE = "[a-zA-Z_][a-zA-Z0-9_]*, not starting with __"


# ------------------------------------------------------------------------------ names and values

def metric_name(name):
    """``name`` when it is a metric name; ValueError naming it otherwise."""
    if not isinstance(name, str) or not METRIC_NAME_RE.match(name):
        raise ValueError("metric name %r is not valid (%s)" % (name, METRIC_NAME_RULE))
    return name


def label_name(name):
    """``name`` when it is a label name a sample may carry; ValueError naming it otherwise."""
    if not isinstance(name, str) or not LABEL_NAME_RE.match(name) or name.startswith("__"):
        raise ValueError("label name %r is not valid (%s)" % (name, LABEL_NAME_RULE))
    return name


def _check_text(text, what):
    """``text`` when it is a str that encodes as UTF-8; ValueError naming ``what`` otherwise."""
    if not isinstance(text, str):
        raise ValueError("%s %r is not text" % (what, text))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("%s %r is not valid UTF-8 text" % (what, text))
    return text


def label_value(value, name="?"):
    """A label's value as text: a str as it is, an int or a float as its digits; ValueError
    naming the label for anything else (a bool, None, a list or a dict)."""
    if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
        raise ValueError("label %s=%r: a label value is text or a number" % (name, value))
    return _check_text(value if isinstance(value, str) else str(value), "label %s value" % name)


def go_float(number):
    """A float as Go's strconv.FormatFloat(number, 'g', -1, 64) writes it (as expfmt does)."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    if number == 0:
        return "-0" if math.copysign(1.0, number) < 0 else "0"
    sign = "-" if number < 0 else ""
    # repr() is the shortest text that reads back as the same float64, as Go's shortest is.
    _sign, digits, exponent = decimal.Decimal(repr(abs(number))).as_tuple()
    digits = list(digits)
    while len(digits) > 1 and digits[-1] == 0:
        digits.pop()
        exponent += 1
    text = "".join(str(d) for d in digits)
    count = len(text)
    point = count + exponent          # where the decimal point goes, counted from the left
    exp = point - 1
    if exp < -4 or exp >= 6:          # Go uses %e outside that range when precision is shortest
        mantissa = text[0] + ("." + text[1:] if count > 1 else "")
        return "%s%se%s%02d" % (sign, mantissa, "-" if exp < 0 else "+", abs(exp))
    if point <= 0:
        return "%s0.%s%s" % (sign, "0" * -point, text)
    if point >= count:
        return sign + text + "0" * (point - count)
    return "%s%s.%s" % (sign, text[:point], text[point:])


def sample_value(value):
    """A sample's value as the file writes it; ValueError naming the value when it is no number.

    An int is written as its digits; a float as Go writes it; a text as the number it spells
    (``"3"``, ``"0.25"``, ``"1e3"``, ``"+Inf"``, ``"NaN"``: templated values often arrive as
    text). A bool is refused (write 1 or 0), as are None, lists and dicts.
    """
    if isinstance(value, bool) or value is None:
        raise ValueError("value %r is not a number (write 1 or 0 for a flag)" % (value,))
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            raise ValueError("value %r is too large for a float64" % (value,))
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        text = value.strip()
        special = _SPECIAL.get(text.lower())
        if special is not None:
            return special
        if _INTEGER_RE.match(text):
            return sample_value(int(text))
        if _NUMBER_RE.match(text):
            number = float(text)
            if math.isinf(number):
                raise ValueError("value %r is too large for a float64" % (value,))
            return go_float(number)
        raise ValueError("value %r is not a number (an int, a float, +Inf, -Inf or NaN)" % (value,))
    raise ValueError("value %r (%s) is not a number" % (value, type(value).__name__))


# ------------------------------------------------------------------------------ escaping

def escape_help(text):
    """HELP text: ``\\`` and line feeds escaped, nothing else (version 0.0.4)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def escape_label_value(text):
    """A label value: ``\\``, ``"`` and line feeds escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _unescape(text, quotes):
    out = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            nxt = text[index + 1]
            if nxt == "n":
                out.append("\n")
                index += 2
                continue
            if nxt == "\\" or (quotes and nxt == '"'):
                out.append(nxt)
                index += 2
                continue
        out.append(char)
        index += 1
    return "".join(out)


def labels_text(labels):
    """``{a="x",b="y"}`` with the labels sorted by name, or ``""`` for none."""
    if not labels:
        return ""
    return "{%s}" % ",".join('%s="%s"' % (name, escape_label_value(labels[name])) for name in sorted(labels))


def sample_key(name, labels):
    """A sample's identity as one text: ``name{a="x"}`` (``name`` alone when it has no labels)."""
    return name + labels_text(labels)


# ------------------------------------------------------------------------------ render

def check_labels(labels):
    """A sample's labels checked and as text: ``{name: text}``; ValueError naming the bad one."""
    if labels is None:
        return {}
    if not isinstance(labels, dict):
        raise ValueError("labels %r are not a mapping of label names to values" % (labels,))
    checked = {}
    for name, value in labels.items():
        checked[label_name(name)] = label_value(value, name)
    return checked


def check_metrics(metrics):
    """``metrics`` checked and normalised: a list of dicts ``name``, ``help`` (text, may be
    empty), ``type``, ``samples`` (``[{labels: {name: text}, value: text}]``, sorted by their
    labels). ValueError naming the metric, the sample and what is wrong with it."""
    if not isinstance(metrics, (list, tuple)):
        raise ValueError("metrics %r are not a list" % (metrics,))
    seen = {}
    out = []
    for index, metric in enumerate(metrics):
        where = "metrics[%d]" % index
        if not isinstance(metric, dict):
            raise ValueError("%s=%r is not a mapping (name, help, type, samples)" % (where, metric))
        unknown = sorted(str(key) for key in metric if key not in ("name", "help", "type", "samples"))
        if unknown:
            raise ValueError("%s: unknown key %s (a metric has name, help, type and samples)" % (where, ", ".join(unknown)))
        name = metric.get("name")
        try:
            metric_name(name)
        except ValueError as exc:
            raise ValueError("%s: %s" % (where, exc))
        where = "%s (%s)" % (where, name)
        if name in seen:
            raise ValueError("%s: metric %s is given twice (also metrics[%d]); give all its samples in one entry"
                             % (where, name, seen[name]))
        seen[name] = index
        kind = metric.get("type") or "gauge"
        if kind not in TYPES:
            raise ValueError("%s: type %r is not one of %s" % (where, kind, ", ".join(TYPES)))
        text = metric.get("help")
        try:
            text = "" if text is None else _check_text(text, "help")
        except ValueError as exc:
            raise ValueError("%s: %s" % (where, exc))
        samples = metric.get("samples")
        if samples is None:
            samples = []
        if not isinstance(samples, (list, tuple)):
            raise ValueError("%s: samples %r are not a list" % (where, samples))
        keyed = {}
        for number, sample in enumerate(samples):
            at = "%s: samples[%d]" % (where, number)
            if not isinstance(sample, dict):
                raise ValueError("%s=%r is not a mapping (labels, value)" % (at, sample))
            unknown = sorted(str(key) for key in sample if key not in ("labels", "value"))
            if unknown:
                raise ValueError("%s: unknown key %s (a sample has labels and value)" % (at, ", ".join(unknown)))
            if "value" not in sample:
                raise ValueError("%s: no value" % at)
            try:
                labels = check_labels(sample.get("labels"))
                value = sample_value(sample["value"])
            except ValueError as exc:
                raise ValueError("%s: %s" % (at, exc))
            key = tuple(sorted(labels.items()))
            if key in keyed:
                raise ValueError("%s repeats the labels of samples[%d]: %s" % (at, keyed[key][0], sample_key(name, labels)))
            keyed[key] = (number, {"labels": labels, "value": value})
        out.append({"name": name, "help": text, "type": kind,
                    "samples": [keyed[key][1] for key in sorted(keyed)]})
    return out


def render(metrics, comments=()):
    """The exposition text of ``metrics`` (see check_metrics), ``comments`` first as ``# ``
    lines. ValueError naming the bad value; a comment may not look like HELP or TYPE."""
    lines = []
    for comment in comments:
        _check_text(comment, "comment")
        if "\n" in comment or "\r" in comment or comment.split(None, 1)[:1] in (["HELP"], ["TYPE"]):
            raise ValueError("comment %r holds a line break or reads as a HELP or TYPE line" % (comment,))
        lines.append("# " + comment if comment else "#")
    for metric in check_metrics(metrics):
        name = metric["name"]
        if metric["help"]:
            lines.append("# HELP %s %s" % (name, escape_help(metric["help"])))
        lines.append("# TYPE %s %s" % (name, metric["type"]))
        for sample in metric["samples"]:
            lines.append("%s %s" % (sample_key(name, sample["labels"]), sample["value"]))
    return "\n".join(lines) + "\n" if lines else ""


# ------------------------------------------------------------------------------ parse

def _skip_blanks(line, index):
    while index < len(line) and line[index] in _BLANKS:
        index += 1
    return index


def _read_name(line, index, start, chars):
    begin = index
    if index < len(line) and line[index] in start:
        index += 1
        while index < len(line) and line[index] in chars:
            index += 1
    return line[begin:index], index


def _read_labels(line, index, number):
    """The labels of a sample line from its ``{``; returns (labels, index after ``}``)."""
    labels = {}
    index += 1
    while True:
        index = _skip_blanks(line, index)
        if index < len(line) and line[index] == "}":
            return labels, index + 1
        name, index = _read_name(line, index, _METRIC_START.replace(":", ""), _METRIC_CHARS.replace(":", ""))
        if not name:
            raise ValueError("line %d: a label name is expected at column %d: %r" % (number, index + 1, line))
        try:
            label_name(name)
        except ValueError as exc:
            raise ValueError("line %d: %s" % (number, exc))
        if name in labels:
            raise ValueError("line %d: label %s is given twice: %r" % (number, name, line))
        index = _skip_blanks(line, index)
        if line[index:index + 1] != "=":
            raise ValueError("line %d: '=' is expected after label %s: %r" % (number, name, line))
        index = _skip_blanks(line, index + 1)
        if line[index:index + 1] != '"':
            raise ValueError("line %d: the value of label %s is not quoted: %r" % (number, name, line))
        index += 1
        begin = index
        while index < len(line) and line[index] != '"':
            index += 2 if line[index] == "\\" else 1
        if index >= len(line):
            raise ValueError("line %d: the value of label %s has no closing quote: %r" % (number, name, line))
        labels[name] = _unescape(line[begin:index], True)
        index = _skip_blanks(line, index + 1)
        if line[index:index + 1] == ",":
            index += 1
        elif line[index:index + 1] != "}":
            raise ValueError("line %d: ',' or '}' is expected after label %s: %r" % (number, name, line))


def _sample_line(line, number):
    """(name, labels, value text, start and end of the value in ``line``) of a sample line."""
    index = _skip_blanks(line, 0)
    name, index = _read_name(line, index, _METRIC_START, _METRIC_CHARS)
    if not name:
        raise ValueError("line %d: not a sample, a comment or blank: %r" % (number, line))
    probe = _skip_blanks(line, index)
    labels = {}
    if line[probe:probe + 1] == "{":
        labels, index = _read_labels(line, probe, number)
    start = _skip_blanks(line, index)
    if start == index and start < len(line):
        raise ValueError("line %d: a blank is expected before the value: %r" % (number, line))
    end = start
    while end < len(line) and line[end] not in _BLANKS:
        end += 1
    value = line[start:end]
    if not value:
        raise ValueError("line %d: sample %s has no value" % (number, sample_key(name, labels)))
    if value.lower() not in _SPECIAL and not _NUMBER_RE.match(value):
        raise ValueError("line %d: sample %s has the value %r, not a number" % (number, sample_key(name, labels), value))
    rest = line[end:].strip(_BLANKS)
    if rest and not _INTEGER_RE.match(rest):  # an optional timestamp in milliseconds
        raise ValueError("line %d: %r after the value of %s is not a timestamp" % (number, rest, sample_key(name, labels)))
    return name, labels, value, start, end


def _directive(line):
    """('HELP' or 'TYPE', the rest split once) of a comment line, or (None, None)."""
    words = line.lstrip(_BLANKS)[1:].lstrip(_BLANKS)
    for word in ("HELP", "TYPE"):
        if words.startswith(word) and (len(words) == len(word) or words[len(word)] in _BLANKS):
            return word, words[len(word):].lstrip(_BLANKS)
    return None, None


def parse(text):
    """Every sample of an exposition text as ``(name, labels, value text)``, in file order.

    HELP and TYPE lines are checked (a valid name, a known type, at most one of each per
    metric, before its samples); comments and blank lines are skipped; a timestamp is read
    and dropped. ValueError naming the line for anything the format does not allow, and for a
    (name, labels) pair given twice.
    """
    samples = []
    seen = set()
    helped, typed, sampled = set(), set(), set()
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip(_BLANKS):
            continue
        if line.lstrip(_BLANKS).startswith("#"):
            word, rest = _directive(line)
            if word is None:
                continue
            name, end = _read_name(rest, 0, _METRIC_START, _METRIC_CHARS)
            if not name or (end < len(rest) and rest[end] not in _BLANKS):
                raise ValueError("line %d: # %s names no valid metric: %r" % (number, word, line))
            if word == "HELP":
                if name in helped:
                    raise ValueError("line %d: a second # HELP for %s" % (number, name))
                helped.add(name)
            else:
                kind = rest[end:].strip(_BLANKS)
                if kind not in _READ_TYPES:
                    raise ValueError("line %d: # TYPE %s %r is not a type (%s)" % (number, name, kind, ", ".join(_READ_TYPES)))
                if name in typed:
                    raise ValueError("line %d: a second # TYPE for %s" % (number, name))
                if name in sampled:
                    raise ValueError("line %d: # TYPE %s comes after its samples" % (number, name))
                typed.add(name)
            continue
        name, labels, value, _start, _end = _sample_line(line, number)
        key = sample_key(name, labels)
        if key in seen:
            raise ValueError("line %d: sample %s is given twice" % (number, key))
        seen.add(key)
        sampled.add(name)
        samples.append((name, labels, value))
    return samples


def masked(text, names):
    """``text`` with the value of every sample of the metrics ``names`` replaced by ``_``, so
    two files can be compared without those values. Lines that do not parse stay as they are."""
    names = set(names or ())
    if not names:
        return text
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.lstrip(_BLANKS)
        if stripped and not stripped.startswith("#"):
            try:
                name, _labels, _value, start, end = _sample_line(line, number)
            except ValueError:
                name = None
            if name in names:
                line = line[:start] + "_" + line[end:]
        out.append(line)
    return "\n".join(out)
