# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The audit's rules, evaluated on a node's facts: what is wrong, what is already right, what
cannot be told and why.

A rule is data (roles/audit/files/rules.yml, or a user's inventory): JMESPath expressions and
message templates, never code. The convention is "``when`` is true when the problem exists":
a rule whose ``when`` holds is a finding, one whose ``when`` does not hold puts the item on the
"already optimal" list, one whose ``applies`` does not hold is "not applicable".

Facts are envelopes (docs/facts.md): ``{value, source}``, or ``{value: null, source,
unknown: reason}``. Rules never see an envelope. Each rule declares the facts it reads
(``facts``: name -> JMESPath over the facts), and those are resolved on a view of the facts
where every known envelope is replaced by its value and every unknown one by a marker that
carries its reason. A declared fact is unknown when a path it reads meets such a marker or a
key the facts lack; ``applies``, ``when`` and the derived ``values`` are evaluated on the
known values only, and a condition that names an unknown fact makes the rule "unknown", with
the facts' reasons: an unreadable fact never becomes a finding, nor "optimal". An envelope
whose value is the string ``unknown`` (as ``relation``, ``link`` or ``peer_access`` can be)
counts as unknown too.

Errors in a rule (a malformed expression, an unknown function, a placeholder that names no
fact, a missing key) are AnsibleFilterError naming the rule, before any rule is evaluated.

Used by the action audit_judge (each host's audit, judged on the controller) and the filter
audit_rules (plugins/filter/audit.py), a thin wrapper; neither imports the other.
"""

from __future__ import annotations

import copy
import re

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import rlimit

try:
    import jmespath
    from jmespath import functions as jmespath_functions
    from jmespath.exceptions import JMESPathError
except ImportError:  # reported when the filter is used (jmespath is a controller requirement)
    jmespath = None
    jmespath_functions = None
    JMESPathError = Exception

# H: the node's health (hardware, driver, fabric), ahead of every tuning finding; a health rule
# carries the action an operator or a scheduler takes (ACTIONS, mildest first).
SEVERITIES = ("H", "P0", "P1", "P2")
HEALTH = "H"
ACTIONS = ("monitor", "reset_gpu", "reboot", "drain", "rma")
FIX_CLASSES = ("runtime", "reboot_required", "manual")
FIX_TAGS = ("runtime", "reboot_required")
REQUIRED = ("id", "severity", "title", "when", "message", "fix", "rationale")
OPTIONAL = ("facts", "values", "applies", "per", "label", "ok", "action", "blocking")
FIX_KEYS = ("class", "module", "tag", "steps")
CONTEXT = ("item", "params", "plan")
_ID = re.compile(r"^[a-z0-9][a-z0-9_]*\Z")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_TEMPLATE_PART = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_ONE_PLACEHOLDER = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}\Z")


class Unknown(dict):
    """Stands for an unknown fact in the view the expressions read; carries the reason."""

    __slots__ = ("reason",)

    def __init__(self, reason):
        super().__init__()
        self.reason = reason


def _functions():
    """The JMESPath functions the rules may call: the standard ones and a few for facts."""

    class Functions(jmespath_functions.Functions):
        @jmespath_functions.signature({"types": ["string"]})
        def _func_words(self, text):
            return text.split()

        @jmespath_functions.signature({"types": ["string"]})
        def _func_lower(self, text):
            return text.lower()

        @jmespath_functions.signature({"types": ["object"]})
        def _func_items(self, obj):
            return [[key, obj[key]] for key in sorted(obj, key=str)]

        @jmespath_functions.signature({"types": ["object"]}, {"types": ["string"]})
        def _func_get(self, obj, key):
            return obj.get(key)

        @jmespath_functions.signature({"types": ["string", "array", "null"]})
        def _func_cpu_count(self, cpus):
            return cpu_count(cpus)

        @jmespath_functions.signature({"types": ["string", "number", "null"]})
        def _func_limit(self, text):
            pair = limit_pair(text)
            return text if pair is None else rlimit.format_pair(pair)

        @jmespath_functions.signature({"types": ["string", "number", "null"]})
        def _func_limit_hard(self, text):
            pair = limit_pair(text)
            return None if pair is None else pair[1]

    return Functions()


def limit_pair(text):
    """A resource limit as (soft, hard) numbers, RLIM_INFINITY for unlimited, whatever its
    spelling (``unlimited``, ``infinity``, bytes, ``SOFT:HARD``); None when it is not a limit."""
    if text is None or isinstance(text, bool):
        return None
    if isinstance(text, float):
        if not text.is_integer():
            return None
        text = int(text)
    soft, sep, hard = str(text).partition(":")
    try:
        pair = (rlimit.parse_value(soft), rlimit.parse_value(hard if sep else soft))
    except rlimit.LimitError:
        return None
    return pair


def cpu_count(cpus):
    """The number of CPUs in a kernel CPU list (``0-3,8``), a list, or null/empty/none (0)."""
    if cpus is None:
        return 0
    if isinstance(cpus, list):
        return len(cpus)
    text = cpus.strip()
    if text in ("", "none"):
        return 0
    total = 0
    for part in text.split(","):
        first, sep, last = part.strip().partition("-")
        if not first.isdigit() or (sep and not last.isdigit()):
            raise ValueError("%r is not a CPU list (like 0-3,8)" % cpus)
        total += (int(last) - int(first) + 1) if sep else 1
    return total


# ------------------------------------------------------------------------------ the view

def plain(node):
    """``node`` as plain Python types. Ansible hands filters its own subclasses of dict, list,
    str, int and float, which JMESPath's type checks do not know ("unknown" type)."""
    if isinstance(node, Mapping):
        return dict((plain(key), plain(item)) for key, item in node.items())
    if isinstance(node, (list, tuple)):
        return [plain(item) for item in node]
    if isinstance(node, bool) or node is None:
        return node
    # Each gives the value itself for the plain type, an exact copy for a subclass.
    if isinstance(node, str):
        return str.__str__(node)
    if isinstance(node, int):
        return int.__index__(node)
    if isinstance(node, float):
        return float.__float__(node)
    return node


def _is_envelope(node):
    return isinstance(node, dict) and "value" in node and "source" in node and set(node) <= {"value", "source", "unknown"}


def view(node):
    """The facts as the rules read them: each envelope replaced by its value, or by Unknown."""
    if _is_envelope(node):
        if "unknown" in node:
            return Unknown("%s: %s" % (node["source"], node["unknown"]))
        if node["value"] == "unknown":
            return Unknown("%s: reported as unknown" % node["source"])
        return view(node["value"])
    if isinstance(node, dict):
        return dict((key, view(item)) for key, item in node.items())
    if isinstance(node, list):
        return [view(item) for item in node]
    return node


def _sentinels(node, found=None):
    """Every Unknown in ``node``, in order."""
    found = [] if found is None else found
    if isinstance(node, Unknown):
        found.append(node)
    elif isinstance(node, dict):
        for item in node.values():
            _sentinels(item, found)
    elif isinstance(node, list):
        for item in node:
            _sentinels(item, found)
    return found


def _plan_view(plan):
    """plan.MODULE for the rules: the planned entry, or Unknown when it failed or did not run."""
    out = {}
    if not isinstance(plan, dict):
        return out
    for phase in plan.values():
        if not isinstance(phase, dict):
            continue
        for module, entry in phase.items():
            if not isinstance(entry, dict):
                continue
            if entry.get("status") in ("failed", "not_run"):
                out[module] = Unknown("gpufleet.tuning.%s in check mode: %s"
                                      % (module, entry.get("msg") or entry.get("status")))
            else:
                out[module] = entry
    return out


# ------------------------------------------------------------------------------ expressions

_LOSSY = ("function_expression", "comparator", "and_expression", "or_expression", "not_expression")


def _root_paths(node, lossy=False):
    """[(path, lossy)]: the paths an expression reads from the data it is applied to.

    ``lossy``: what the path leads to is consumed where an unknown inside it could vanish (a
    function, a comparison, a filter), so all of it is checked for unknowns, not just what
    comes out."""
    kind = node.get("type")
    kids = node.get("children") or []
    if kind == "field":
        return [((node["value"],), lossy)]
    if kind == "subexpression":
        head = _root_paths(kids[0], lossy)
        if kids[0].get("type") != "field" or len(head) != 1:
            return head
        path = list(head[0][0])
        for child in kids[1:]:
            if child.get("type") == "field":
                path.append(child["value"])
                continue
            spine = _root_paths(child)
            if child.get("type") in ("index_expression", "projection", "flatten", "filter_projection") and spine:
                path.extend(spine[0][0])
                lossy = lossy or child.get("type") == "filter_projection" or spine[0][1]
            return [(tuple(path), lossy)]
        return [(tuple(path), lossy)]
    if kind in ("index_expression", "projection", "flatten", "value_projection"):
        return _root_paths(kids[0], lossy)
    if kind == "filter_projection":
        return _root_paths(kids[0], True)
    if kind == "pipe":
        return _root_paths(kids[0], True)
    if kind in _LOSSY:
        return [path for child in kids for path in _root_paths(child, True)]
    if kind in ("multi_select_dict", "multi_select_list", "key_val_pair"):
        return [path for child in kids for path in _root_paths(child, lossy)]
    return []


def _plain(node):
    """True when the expression is nothing but a path (a.b.c)."""
    if node.get("type") == "field":
        return True
    return node.get("type") == "subexpression" and all(c.get("type") == "field" for c in node.get("children") or [])


def _functions_called(node):
    found = set()
    if node.get("type") == "function_expression":
        found.add(node["value"])
    for child in node.get("children") or []:
        found |= _functions_called(child)
    return found


class _Expr:
    """One compiled expression of a rule, with what it reads."""

    def __init__(self, rule, key, text, functions):
        where = "audit rule %r: %s" % (rule, key)
        if not isinstance(text, str) or not text.strip():
            raise AnsibleFilterError("%s must be a JMESPath expression (a non-empty string), got %r" % (where, text))
        try:
            self.compiled = jmespath.compile(text)
        except JMESPathError as exc:
            raise AnsibleFilterError("%s: %r is not a valid JMESPath expression: %s" % (where, text, _one_line(exc)))
        unknown = sorted(_functions_called(self.compiled.parsed) - set(functions.FUNCTION_TABLE))
        if unknown:
            raise AnsibleFilterError("%s: %r calls %s, which no JMESPath function of the audit is (see the "
                                     "audit_rules filter's documentation)" % (where, text, ", ".join(u + "()" for u in unknown)))
        self.where = where
        self.text = text
        self.paths = _root_paths(self.compiled.parsed)
        self.plain = _plain(self.compiled.parsed)
        self.names = set(path[0] for path, lossy in self.paths)

    def search(self, data, options, item_label):
        try:
            return self.compiled.search(data, options)
        except (JMESPathError, ValueError, TypeError) as exc:
            raise AnsibleFilterError("%s%s: %r cannot be evaluated: %s"
                                     % (self.where, " (%s)" % item_label if item_label else "", self.text, _one_line(exc)))


def _one_line(exc):
    return " ".join(str(exc).split())


# ------------------------------------------------------------------------------ templates

def _template_names(rule, key, text):
    """The placeholders of a template; AnsibleFilterError for a malformed one."""
    if not isinstance(text, str) or not text.strip():
        raise AnsibleFilterError("audit rule %r: %s must be a non-empty string, got %r" % (rule, key, text))
    names = []
    for match in _TEMPLATE_PART.finditer(text):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        name = match.group(1)
        if name is None or not _NAME.match(name.strip()) or name != name.strip():
            raise AnsibleFilterError("audit rule %r: %s: %r is not a placeholder; write {name} for a named fact or "
                                     "value, {{ and }} for literal braces" % (rule, key, token))
        names.append(name)
    return names


def text_of(value):
    """How a value reads in a message."""
    if isinstance(value, Unknown):
        return "unknown"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else ("%.3f" % value).rstrip("0").rstrip(".")
    if isinstance(value, (list, tuple)):
        return ", ".join(text_of(item) for item in value) if value else "none"
    if isinstance(value, dict):
        return ", ".join("%s: %s" % (key, text_of(item)) for key, item in value.items()) if value else "none"
    return str(value)


def render(text, values):
    """Substitute {name}; {{ and }} are braces. ``values`` maps every placeholder's name."""
    def substitute(match):
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return text_of(values.get(match.group(1), Unknown("")))
    return _TEMPLATE_PART.sub(substitute, text)


# ------------------------------------------------------------------------------ rules

class Rule:
    """A validated rule."""

    def __init__(self, data, functions, origin):
        if not isinstance(data, dict):
            raise AnsibleFilterError("audit rule (%s) must be a dict, got %r" % (origin, data))
        rule_id = data.get("id")
        if not isinstance(rule_id, str) or not _ID.match(rule_id):
            raise AnsibleFilterError("audit rule (%s): id must be lower-case letters, digits and _, got %r"
                                     % (origin, rule_id))
        self.id = rule_id
        missing = [key for key in REQUIRED if key not in data]
        if missing:
            raise AnsibleFilterError("audit rule %r (%s) lacks %s" % (rule_id, origin, ", ".join(missing)))
        extra = sorted(set(data) - set(REQUIRED) - set(OPTIONAL))
        if extra:
            raise AnsibleFilterError("audit rule %r (%s): unknown keys %s; a rule has %s"
                                     % (rule_id, origin, ", ".join(extra), ", ".join(REQUIRED + OPTIONAL)))
        if data["severity"] not in SEVERITIES:
            raise AnsibleFilterError("audit rule %r: severity must be one of %s, got %r"
                                     % (rule_id, ", ".join(SEVERITIES), data["severity"]))
        self.severity = data["severity"]
        for key in ("title", "rationale"):
            if not isinstance(data[key], str) or not data[key].strip():
                raise AnsibleFilterError("audit rule %r: %s must be a non-empty string" % (rule_id, key))
        self.title = " ".join(data["title"].split())
        self.rationale = " ".join(data["rationale"].split())
        self.fix = self._fix(data["fix"])
        self.action, self.blocking = self._action(data)

        facts = data.get("facts") or {}
        derived = data.get("values") or {}
        for key, table in (("facts", facts), ("values", derived)):
            if not isinstance(table, dict):
                raise AnsibleFilterError("audit rule %r: %s must map names to JMESPath expressions" % (rule_id, key))
            for name in table:
                if not isinstance(name, str) or not _NAME.match(name):
                    raise AnsibleFilterError("audit rule %r: %s name %r is not a name (letters, digits, _)"
                                             % (rule_id, key, name))
        both = sorted(set(facts) & set(derived))
        if both:
            raise AnsibleFilterError("audit rule %r: %s named both in facts and in values" % (rule_id, ", ".join(both)))
        self.facts = [(name, _Expr(rule_id, "facts.%s" % name, text, functions)) for name, text in facts.items()]
        self.values = [(name, _Expr(rule_id, "values.%s" % name, text, functions)) for name, text in derived.items()]
        self.per = _Expr(rule_id, "per", data["per"], functions) if data.get("per") is not None else None
        self.applies = _Expr(rule_id, "applies", data["applies"], functions) if data.get("applies") is not None else None
        self.when = _Expr(rule_id, "when", data["when"], functions)
        if self.per is not None and not data.get("label"):
            raise AnsibleFilterError("audit rule %r: a rule with per needs a label (a template naming the item)" % rule_id)
        if self.per is None and data.get("label"):
            raise AnsibleFilterError("audit rule %r: label names the items of per, and the rule has no per" % rule_id)
        known = set(facts) | set(derived)
        self.templates = {}
        for key in ("message", "label", "ok"):
            if data.get(key) is None:
                continue
            names = _template_names(rule_id, key, data[key])
            unnamed = sorted(set(names) - known)
            if unnamed:
                raise AnsibleFilterError("audit rule %r: %s uses {%s}, which no fact or value of the rule is named "
                                         "(named: %s)" % (rule_id, key, "}, {".join(unnamed), ", ".join(sorted(known)) or "none"))
            self.templates[key] = " ".join(data[key].split())
        if self.action is not None and self.action.startswith("{") and self.action[1:-1] not in known:
            raise AnsibleFilterError("audit rule %r: action %r names no fact or value of the rule (named: %s)"
                                     % (rule_id, self.action, ", ".join(sorted(known)) or "none"))
        if self.per is None:
            for name, expr in self.facts:
                if "item" in expr.names:
                    raise AnsibleFilterError("%s: %r reads item, and the rule has no per" % (expr.where, expr.text))
        readable = set(facts)
        checks = []
        for name, expr in self.values:
            checks.append((expr, set(readable)))
            readable.add(name)
        checks.extend((expr, known) for expr in (self.applies, self.when) if expr is not None)
        for expr, names in checks:
            for name in sorted(expr.names - names):
                raise AnsibleFilterError("%s: %r reads %r, which is not a fact or an earlier value of the rule "
                                         "(it can read: %s)" % (expr.where, expr.text, name, ", ".join(sorted(names)) or "nothing"))

    def _action(self, data):
        """(action, blocking) of a health rule: the action a word of ACTIONS or ``{name}`` (a fact
        or value of the rule giving one, as an XID code's catalog entry does); blocking True, False
        or None (then: every action but monitor blocks). (None, None) for the other severities."""
        action, blocking = data.get("action"), data.get("blocking")
        if self.severity != HEALTH:
            if action is not None or blocking is not None:
                raise AnsibleFilterError("audit rule %r: only a health rule (severity %s) has an action or blocking"
                                         % (self.id, HEALTH))
            return None, None
        if not isinstance(action, str) or not (action in ACTIONS or _ONE_PLACEHOLDER.match(action)):
            raise AnsibleFilterError("audit rule %r: a health rule needs an action, one of %s or {name} of a fact or "
                                     "value giving one, got %r" % (self.id, ", ".join(ACTIONS), action))
        if blocking is not None and not isinstance(blocking, bool):
            raise AnsibleFilterError("audit rule %r: blocking must be true or false, got %r" % (self.id, blocking))
        return action, blocking

    def _fix(self, fix):
        if not isinstance(fix, dict):
            raise AnsibleFilterError("audit rule %r: fix must be a dict with class and module/tag or steps" % self.id)
        extra = sorted(set(fix) - set(FIX_KEYS))
        if extra:
            raise AnsibleFilterError("audit rule %r: fix has unknown keys %s; it has %s"
                                     % (self.id, ", ".join(extra), ", ".join(FIX_KEYS)))
        if fix.get("class") not in FIX_CLASSES:
            raise AnsibleFilterError("audit rule %r: fix.class must be one of %s, got %r"
                                     % (self.id, ", ".join(FIX_CLASSES), fix.get("class")))
        if fix["class"] == "manual":
            if not isinstance(fix.get("steps"), str) or not fix["steps"].strip():
                raise AnsibleFilterError("audit rule %r: a manual fix needs steps (what to do by hand)" % self.id)
        else:
            if not isinstance(fix.get("module"), str) or not fix["module"].strip():
                raise AnsibleFilterError("audit rule %r: a %s fix needs the module that applies it" % (self.id, fix["class"]))
            if fix.get("tag") not in FIX_TAGS:
                raise AnsibleFilterError("audit rule %r: a %s fix needs tag %s, got %r"
                                         % (self.id, fix["class"], " or ".join(FIX_TAGS), fix.get("tag")))
        out = {"class": fix["class"]}
        for key in ("module", "tag", "steps"):
            if fix.get(key) is not None:
                if not isinstance(fix[key], str):
                    raise AnsibleFilterError("audit rule %r: fix.%s must be a string" % (self.id, key))
                out[key] = " ".join(fix[key].split())
        return out


def load_rules(rules, extra=None, disabled=None):
    """The validated rules in order, and what was disabled, overridden and added."""
    if jmespath is None:
        raise AnsibleFilterError("audit_rules needs the jmespath Python package on the controller "
                                 "(requirements/controller.txt pins it)")
    if isinstance(rules, dict) and "rules" in rules:
        rules = rules["rules"]
    if not isinstance(rules, list):
        raise AnsibleFilterError("audit_rules: rules must be a list of rules (or a dict with a rules list), got %s"
                                 % type(rules).__name__)
    extra = [] if extra is None else extra
    disabled = [] if disabled is None else disabled
    if not isinstance(extra, list):
        raise AnsibleFilterError("audit_rules: extra (audit_rules_extra) must be a list of rules, got %s" % type(extra).__name__)
    if isinstance(disabled, str) or not isinstance(disabled, list):
        raise AnsibleFilterError("audit_rules: disabled (audit_rules_disabled) must be a list of rule ids, got %r" % (disabled,))
    merged, origin, order = {}, {}, []
    for index, data in enumerate(rules):
        rule_id = data.get("id") if isinstance(data, dict) else None
        if rule_id in merged:
            raise AnsibleFilterError("audit rule %r is defined twice in the shipped rules" % rule_id)
        merged[rule_id] = copy.deepcopy(data)
        origin[rule_id] = "shipped rule %d" % (index + 1)
        order.append(rule_id)
    overridden, added = [], []
    for index, data in enumerate(extra):
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            raise AnsibleFilterError("audit_rules_extra item %d must be a dict with an id, got %r" % (index + 1, data))
        rule_id = data["id"]
        if rule_id in merged and rule_id not in added:
            merged[rule_id] = dict(merged[rule_id], **copy.deepcopy(data))
            origin[rule_id] += ", overridden by audit_rules_extra item %d" % (index + 1)
            overridden.append(rule_id)
        elif rule_id in merged:
            raise AnsibleFilterError("audit_rules_extra item %d: rule %r is added twice" % (index + 1, rule_id))
        else:
            merged[rule_id] = copy.deepcopy(data)
            origin[rule_id] = "audit_rules_extra item %d" % (index + 1)
            order.append(rule_id)
            added.append(rule_id)
    unknown = [rule_id for rule_id in disabled if rule_id not in merged]
    if unknown:
        raise AnsibleFilterError("audit_rules_disabled names no rule: %s (rules: %s)"
                                 % (", ".join(map(str, unknown)), ", ".join(map(str, order))))
    functions = _functions()
    out = [Rule(merged[rule_id], functions, origin[rule_id]) for rule_id in order if rule_id not in disabled]
    return out, {"ids": [rule.id for rule in out], "disabled": list(disabled), "overridden": overridden, "added": added}


# ------------------------------------------------------------------------------ evaluation

def _walk(root, path):
    """('ok', node) | ('unknown', Unknown) | ('missing', path so far)."""
    node = root
    for index, key in enumerate(path):
        if isinstance(node, Unknown):
            return "unknown", node
        if node is None or not isinstance(node, dict):
            return "ok", None if node is None else node
        if key not in node:
            return "missing", path[:index + 1]
        node = node[key]
    if isinstance(node, Unknown):
        return "unknown", node
    return "ok", node


def _missing_reason(path):
    dotted = ".".join(path)
    if path[0] == "params":
        return "%s is not set" % dotted
    if path[0] == "plan":
        return "no check-mode result of gpufleet.tuning.%s" % path[1] if len(path) > 1 else "no check-mode results"
    return "%s is not in the facts" % dotted


def _resolve(expr, root, options, label, whole=True):
    """(value, reasons): reasons is empty when the value is known. ``whole``: an unknown
    anywhere in the value makes it unknown (a fact); else only an unknown value itself (the
    list of a per, whose elements are judged one by one)."""
    for path, lossy in expr.paths:
        state, node = _walk(root, path)
        if state == "unknown":
            return None, [node.reason]
        if state == "missing":
            return None, [_missing_reason(node)]
        if lossy:
            found = _sentinels(node)
            if found:
                return None, [item.reason for item in found]
    result = expr.search(root, options, label)
    found = _sentinels(result) if whole else ([result] if isinstance(result, Unknown) else [])
    if found:
        return None, [item.reason for item in found]
    if result is None and not expr.plain:
        return None, ["%s gives nothing on these facts" % expr.text]
    return result, []


def _truthy(value):
    """JMESPath's truth: false, null, empty string, list or object are false; numbers are true."""
    return not (value is None or value is False or value == "" or value == [] or value == {})


def _dedupe(items):
    out = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _source(raw, path):
    """The source of the envelope at ``path`` in the raw facts, or None."""
    node = raw
    for key in path:
        if _is_envelope(node):
            node = node["value"]
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node.get("source") if _is_envelope(node) else None


def _raw_items(rule, raw, count):
    """The raw elements the per expression's view elements come from, where they can be told."""
    if rule.per is None or not rule.per.plain:
        return [None] * count
    node = raw
    for key in rule.per.paths[0][0]:
        if _is_envelope(node):
            node = node["value"]
        if not isinstance(node, dict):
            return [None] * count
        node = node.get(key)
    if _is_envelope(node):
        node = node["value"]
    if not isinstance(node, list) or len(node) != count:
        return [None] * count
    return node


def _evaluate_item(rule, root, raw_root, options, label_hint):
    """One rule on one item: (status, entry fields)."""
    known, unknown, sources = {}, {}, {}
    for name, expr in rule.facts:
        value, reasons = _resolve(expr, root, options, label_hint)
        if reasons:
            unknown[name] = reasons
        else:
            known[name] = value
            if expr.plain:
                source = _source(raw_root, expr.paths[0][0])
                if source is not None:
                    sources[name] = source
    for name, expr in rule.values:
        blocked = [reason for ref in sorted(expr.names) for reason in unknown.get(ref, [])]
        if blocked:
            unknown[name] = blocked
        else:
            known[name] = expr.search(known, options, label_hint)
    shown = dict(known)
    shown.update((name, Unknown("")) for name in unknown)
    label = render(rule.templates["label"], shown) if "label" in rule.templates else None
    entry = {"rule": rule.id, "severity": rule.severity, "title": rule.title, "item": label}
    for expr, on_false in ((rule.applies, "not_applicable"), (rule.when, "optimal")):
        if expr is None:
            continue
        reasons = _dedupe([reason for ref in sorted(expr.names) for reason in unknown.get(ref, [])])
        if reasons:
            entry["reasons"] = reasons
            return "unknown", entry
        if not _truthy(expr.search(known, options, label)):
            if on_false == "optimal":
                entry["ok"] = render(rule.templates["ok"], shown) if "ok" in rule.templates else None
                entry["values"] = known
            return on_false, entry
    entry.update({"message": render(rule.templates["message"], shown), "fix": dict(rule.fix),
                  "rationale": rule.rationale, "values": known, "sources": sources})
    if rule.action is not None:
        entry["action"], entry["blocking"] = _health_action(rule, known, label)
    return "finding", entry


def _health_action(rule, known, label):
    """(action, blocking) of a health finding; a ``{name}`` action is that value, which must be
    one of ACTIONS (an XID catalog entry from the inventory with another word is refused)."""
    action = rule.action
    match = _ONE_PLACEHOLDER.match(action)
    if match:
        action = known.get(match.group(1))
        if action not in ACTIONS:
            raise AnsibleFilterError("audit rule %r%s: its action {%s} is %r, not one of %s"
                                     % (rule.id, " (%s)" % label if label else "", match.group(1), action,
                                        ", ".join(ACTIONS)))
    blocking = rule.blocking if rule.blocking is not None else action != "monitor"
    return action, blocking


def evaluate(facts, rules, params=None, plan=None):
    """Every rule on ``facts``: the four lists of the filter's result."""
    options = jmespath.Options(custom_functions=_functions(), dict_cls=dict)
    base = view(facts if isinstance(facts, dict) else {})
    if not isinstance(base, dict):
        base = {}
    raw_base = dict(facts) if isinstance(facts, dict) else {}
    base["params"] = params if isinstance(params, dict) else {}
    base["plan"] = _plan_view(plan)
    raw_base["params"] = base["params"]
    out = {"findings": [], "optimal": [], "unknown": [], "not_applicable": []}
    lists = {"finding": "findings", "optimal": "optimal", "unknown": "unknown", "not_applicable": "not_applicable"}
    for rule in rules:
        if rule.per is None:
            status, entry = _evaluate_item(rule, base, raw_base, options, None)
            out[lists[status]].append(entry)
            continue
        entry = {"rule": rule.id, "severity": rule.severity, "title": rule.title, "item": None}
        items, reasons = _resolve(rule.per, base, options, None, whole=False)
        if reasons:
            entry["reasons"] = _dedupe(reasons)
            out["unknown"].append(entry)
            continue
        if items is None or items == []:
            entry["why"] = "nothing to check: %s gives no item" % rule.per.text
            out["not_applicable"].append(entry)
            continue
        if not isinstance(items, list):
            raise AnsibleFilterError("%s: %r must give a list, it gives %s"
                                     % (rule.per.where, rule.per.text, type(items).__name__))
        raws = _raw_items(rule, raw_base, len(items))
        for index, item in enumerate(items):
            root = dict(base, item=item)
            raw_root = dict(raw_base, item=raws[index]) if raws[index] is not None else raw_base
            status, entry = _evaluate_item(rule, root, raw_root, options, "item %d of per" % index)
            out[lists[status]].append(entry)
    out["findings"].sort(key=lambda entry: SEVERITIES.index(entry["severity"]))
    counts = dict((severity, sum(1 for f in out["findings"] if f["severity"] == severity)) for severity in SEVERITIES)
    counts.update(optimal=len(out["optimal"]), unknown=len(out["unknown"]), not_applicable=len(out["not_applicable"]))
    out["counts"] = counts
    out["worst"] = out["findings"][0]["severity"] if out["findings"] else None
    return out


def audit_rules(facts, rules, extra=None, disabled=None, params=None, plan=None):
    if not isinstance(facts, Mapping):
        raise AnsibleFilterError("audit_rules expects the facts of gpufleet.tuning.node_facts (a dict), got %s"
                                 % type(facts).__name__)
    return evaluate_loaded(facts, load_rules(plain(rules), plain(extra), plain(disabled)), params, plan)


def evaluate_loaded(facts, loaded, params=None, plan=None):
    """audit_rules' result for rules already loaded (``loaded``: what load_rules returns)."""
    rules, summary = loaded
    result = evaluate(plain(facts), rules, plain(params), plain(plan))
    result["rules"] = dict((name, list(value)) for name, value in summary.items())
    return result
