# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read an artifacts folder into one model of the fleet, for the fleet page.

The files are the ones the collection already writes on the controller, read as their writers
shape them, never guessed:

- ``<host>/audit.json`` and ``system-improve.md`` (roles/audit/tasks/report.yml and fleet.yml:
  audit_rules' evaluation with ``host``, ``time``, ``planned``, ``facts`` and ``since`` from
  audit_since; the Markdown from audit_report, whose headings give the links, report/anchors);
- ``<host>/verify.json`` (roles/verify/tasks/report.yml: ``p2p`` as p2p_bandwidth returns it,
  ``p2p_staged``, ``drift``, ``recorded_drift``, ``failures``, ``comparison`` from p2p_compare);
- ``<host>/benchmark.json`` (benchmark_compare with ``host``) and ``benchmark-before.json`` /
  ``benchmark-after.json`` (inference_benchmark's result: levels with min/median/max per figure);
- ``<host>/experiments.json`` (the experiments role's record through experiment_summary:
  the launch flags tried one at a time, each kept or rolled back, issue 37);
- ``<host>/health.json`` (the action health_judge: plugin_utils/health_verdict.py's verdict,
  ``status`` healthy, degraded or quarantined, ``actions`` heaviest first, ``findings`` of
  severity H with their ``action`` and ``blocking``, ``gpus`` with each GPU's status);
- ``<host>/normal.json`` (the action node_normal: plugin_utils/node_normal.py's verdict, the host's
  ``profile``, its absolute ``checks`` against the profile's expectations, its ``figures``, the
  ``peers`` it saw and the ``settings`` it was judged with) and ``<host>/profile.json`` (the action
  profile_select: the profile's ``name``, ``reasons``, ``description``, ``pinned``). A host's
  peers are worked out again here over the whole fleet (normal_fleet): each normal.json was written
  when its host was judged, so its peers were only the hosts judged before it;
- ``fleet-audit.json`` (audit_fleet), ``fleet-drift.json`` (host: recorded drift) and
  ``rollout-<run id>.json`` (rollout_result: batches, batch_outcomes, hosts, verdict).

Every file is optional and every key is read with a default: a host without P2P, without a
benchmark, a failed host with some files only, a verify.json from before the link floors (the
thresholds per link type instead of a floor per pair), an unreadable or damaged file (a note
says which and why; the rest of the page is still made). Nothing is read by path: the folder
is opened once (plugin_utils/artifact_fs.py, never through a link, never when others may write
it without the sticky bit), each host folder relative to it with O_NOFOLLOW|O_DIRECTORY, and
each file relative to its folder's descriptor, checked as a regular file before it is opened
(O_NOFOLLOW|O_NONBLOCK) and again after, so a swap in a shared folder cannot send the reader
elsewhere. A link, FIFO, socket or device where a folder or a record should be is left out
with a note and never blocks the reader. Files are read up to MAX_FILE_BYTES.

``collect(root)`` does the reading (``root_fd``: a descriptor of the folder already opened, as
the fleet_report action passes the one it writes the page through); ``host_model``,
``p2p_model``, ``benchmark_model``, ``experiments_model``, ``health_model``, ``health_summary``,
``normal_fleet``, ``normal_model``, ``normal_summary`` and ``rollout_model`` are pure functions of
the loaded data,
so the tests give them shapes directly.
Nothing reads the clock: the same folder gives the same model.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import stat

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_fs, fact_envelope, node_normal
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.audit_rules import SEVERITIES
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.experiments_report import figure_value
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.health_verdict import STATUSES as HEALTH_STATUSES
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import anchors as anchors_mod
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import stats

MAX_FILE_BYTES = 64 << 20
HOST_FILES = ("health.json", "audit.json", "system-improve.md", "verify.json", "benchmark.json",
              "benchmark-before.json", "benchmark-after.json", "experiments.json", "normal.json", "profile.json")
# Files of a host's folder the page links to when they are there (the health first).
LINKED_FILES = ("health.json", "normal.json", "profile.json", "system-improve.md", "audit.json", "verify.json",
                "verify.previous.json", "benchmark.md", "benchmark.json", "experiments.md", "experiments.json")
ROLLOUT_FILE = re.compile(r"rollout-([A-Za-z0-9._-]+)\.json\Z")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")

# The four P2P matrices of a host: (key, p2p_bandwidth's field, pair kind, title).
MATRICES = (
    ("uni_peer", "unidirectional_p2p_gbps", "uni", "one way, peer access"),
    ("uni_staged", "unidirectional_staged_gbps", "uni", "one way, staged through the host"),
    ("bidi_peer", "bidirectional_p2p_gbps", "bidi", "both ways, peer access"),
    ("bidi_staged", "bidirectional_staged_gbps", "bidi", "both ways, staged through the host"),
)
# Shortfall metrics (p2p_plan.verdicts) that mark a pair's cell in a matrix.
_SHORT_MARKS = {
    "unidirectional_gbps": ("uni_peer",), "peer_access": ("uni_peer",), "data": ("uni_peer",),
    "error": ("uni_peer", "uni_staged"), "p2p_speedup": ("uni_peer",),
    "unidirectional_staged_gbps": ("uni_staged",), "bidirectional_gbps": ("bidi_peer",),
}
# The benchmark figures the page draws: (panel, figures, unit).
BENCH_PANELS = (
    ("decode", ("decode_tokens_per_s",), "tokens/s"),
    ("ttft", ("ttft_ms.p50", "ttft_ms.p90", "ttft_ms.p99"), "ms"),
    ("itl", ("itl_ms.p50", "itl_ms.p90", "itl_ms.p99"), "ms"),
)


# ------------------------------------------------------------------------------ reading

class Reader:
    """Reads files relative to one folder descriptor and its host folders' descriptors (opened
    once each), never by path and never through a link, noting what it could not read."""

    def __init__(self, root_fd):
        self.fd = root_fd
        self.folders = {}
        self.notes = []
        self.read = []

    def note(self, rel, why):
        line = "%s: %s" % (rel, why)
        if line not in self.notes:
            self.notes.append(line)

    def refused(self, rel, exc):
        self.note(rel, "a symbolic link, not followed" if exc.kind == "link" else exc.why)

    def close(self):
        for fd in self.folders.values():
            if fd is not None:
                os.close(fd)
        self.folders = {}

    def folder(self, name):
        """The descriptor of the root's folder ``name`` (O_NOFOLLOW|O_DIRECTORY), None when it
        cannot be opened (noted)."""
        if name not in self.folders:
            fd = None
            try:
                fd = artifact_fs.open_subdir(self.fd, name)
            except artifact_fs.Refused as exc:
                self.refused(name, exc)
            except OSError as exc:
                self.note(name, "cannot be opened (%s)" % (exc.strerror or exc))
            self.folders[name] = fd
        return self.folders[name]

    def _at(self, rel):
        """(folder descriptor or None, file name) of ``rel``: a root file or ``host/file``."""
        folder, name = os.path.split(rel)
        return (self.folder(folder) if folder else self.fd), name

    def text(self, rel):
        """The file's text, or None (absent, a link, not a regular file, too big, not UTF-8)."""
        fd, name = self._at(rel)
        if fd is None:
            return None
        try:
            data = artifact_fs.read_file(fd, name, MAX_FILE_BYTES)
        except artifact_fs.Refused as exc:
            self.refused(rel, exc)
            return None
        except OSError as exc:
            self.note(rel, "cannot be read (%s)" % (exc.strerror or exc))
            return None
        if data is None:
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.note(rel, "not UTF-8 text (byte %d)" % exc.start)
            return None
        self.read.append(rel)
        return text

    def json(self, rel, want=dict):
        """The file's JSON of type ``want``, or None (and a note when it is there but unusable)."""
        text = self.text(rel)
        if text is None:
            return None
        try:
            data = json.loads(text)
        except ValueError as exc:
            self.note(rel, "not JSON (%s)" % exc)
            return None
        if not isinstance(data, want):
            self.note(rel, "not the expected record (a %s)" % type(data).__name__)
            return None
        return data

    def _lstat(self, rel):
        fd, name = self._at(rel)
        if fd is None:
            return None
        try:
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return None

    def entries(self):
        """(name, kind) of the root's entries, sorted: kind dir, file, link or other."""
        try:
            names = sorted(os.listdir(self.fd))
        except OSError as exc:
            self.note(".", "cannot be listed (%s)" % (exc.strerror or exc))
            return []
        out = []
        for name in names:
            info = self._lstat(name)
            if info is None:
                continue
            mode = info.st_mode
            kind = ("link" if stat.S_ISLNK(mode) else "dir" if stat.S_ISDIR(mode)
                    else "file" if stat.S_ISREG(mode) else "other")
            out.append((name, kind))
        return out

    def is_file(self, rel):
        """A regular file (not a link) is there."""
        info = self._lstat(rel)
        return info is not None and stat.S_ISREG(info.st_mode)

    def has(self, rel):
        return self._lstat(rel) is not None


def decode_folder(name):
    """The inventory name a folder stands for (artifact_dir's %XX undone); a cut name (``~``
    and a digest) stays as it is."""
    if "~" in name:
        return name
    try:
        return _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), name).encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return name


def collect(root, root_fd=None):
    """The fleet model of the artifacts folder ``root`` (see the module docstring); ``root_fd``:
    the folder's descriptor when the caller holds one (not closed here)."""
    with contextlib.ExitStack() as stack:
        if root_fd is None:
            try:
                root_fd = stack.enter_context(artifact_fs.closing(artifact_fs.open_dir(root)))
            except artifact_fs.Refused as exc:
                return _unread(exc.why)
            except (OSError, ValueError) as exc:
                return _unread("cannot be opened (%s)" % (getattr(exc, "strerror", None) or exc))
        reader = Reader(root_fd)
        stack.callback(reader.close)
        return _collect(reader)


def _unread(why):
    model = fleet_model({})
    model["notes"] = [".: %s" % why]
    model["files_read"] = 0
    return model


def _collect(reader):
    hosts = {}
    rollouts = []
    for name, kind in reader.entries():
        if name.startswith("."):
            continue
        if kind == "link":
            reader.note(name, "a symbolic link, not followed")
            continue
        if kind == "dir":
            if not any(reader.has(os.path.join(name, f)) for f in HOST_FILES):
                continue
            loaded = {
                "health": reader.json(os.path.join(name, "health.json")),
                "audit": reader.json(os.path.join(name, "audit.json")),
                "report": reader.text(os.path.join(name, "system-improve.md")),
                "verify": reader.json(os.path.join(name, "verify.json")),
                "benchmark": reader.json(os.path.join(name, "benchmark.json")),
                "before": reader.json(os.path.join(name, "benchmark-before.json")),
                "after": reader.json(os.path.join(name, "benchmark-after.json")),
                "experiments": reader.json(os.path.join(name, "experiments.json")),
                "normal": reader.json(os.path.join(name, "normal.json")),
                "profile": reader.json(os.path.join(name, "profile.json")),
            }
            if loaded["experiments"] is not None and not isinstance(loaded["experiments"].get("candidates"), list):
                reader.note(os.path.join(name, "experiments.json"), "not an experiments record (no candidates list)")
                loaded["experiments"] = None
            if loaded["health"] is not None and not isinstance(loaded["health"].get("status"), str):
                reader.note(os.path.join(name, "health.json"), "not a health verdict (no status)")
                loaded["health"] = None
            if loaded["normal"] is not None and not isinstance(loaded["normal"].get("checks"), list) \
                    and not isinstance(loaded["normal"].get("figures"), list):
                reader.note(os.path.join(name, "normal.json"), "not a node_normal verdict (no checks or figures list)")
                loaded["normal"] = None
            if loaded["profile"] is not None and not isinstance(loaded["profile"].get("name"), str):
                reader.note(os.path.join(name, "profile.json"), "not a profile record (no name)")
                loaded["profile"] = None
            host = _host_name(name, loaded)
            links = [f for f in LINKED_FILES if reader.is_file(os.path.join(name, f))]
            hosts[host] = dict(loaded, folder=name, files=links)
        elif kind == "file" and ROLLOUT_FILE.match(name):
            data = reader.json(name)
            if data is not None:
                rollouts.append(dict(data, file=name))
    fleet_audit = reader.json("fleet-audit.json")
    fleet_drift = reader.json("fleet-drift.json")
    model = fleet_model(hosts, fleet_audit, fleet_drift, rollouts)
    model["notes"] = reader.notes
    model["files_read"] = len(reader.read)
    return model


def _host_name(folder, loaded):
    for key in ("health", "audit", "verify", "benchmark", "after", "before", "experiments", "normal", "profile"):
        name = (loaded.get(key) or {}).get("host")
        if isinstance(name, str) and name:
            return name
    return decode_folder(folder)


# ------------------------------------------------------------------------------ the fleet

def natural_key(name):
    """node2 before node10."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", str(name)) if part]


def fleet_model(hosts, fleet_audit=None, fleet_drift=None, rollouts=()):
    """The model from loaded records: ``hosts`` maps a name to {folder, health, audit, report,
    verify, benchmark, before, after, experiments, normal, profile} (any of them None)."""
    rollout = None
    older = []
    ordered = sorted((r for r in rollouts if isinstance(r, dict)), key=_rollout_key)
    if ordered:
        rollout = rollout_model(ordered[-1])
        older = [{"run_id": r.get("run_id"), "file": r.get("file"), "verdict": r.get("verdict"),
                  "status": r.get("status"), "started": r.get("started")} for r in reversed(ordered[:-1])]
    fleet_audit = fleet_audit if isinstance(fleet_audit, dict) else None
    drift_by_host = dict((str(k), v) for k, v in (fleet_drift or {}).items() if isinstance(v, list)) \
        if isinstance(fleet_drift, dict) else {}
    from_fleet_audit = dict((h.get("host"), h) for h in (fleet_audit or {}).get("hosts") or []
                            if isinstance(h, dict) and isinstance(h.get("host"), str))
    fleet_findings = _fleet_findings(fleet_audit)
    names = set(hosts) | set(drift_by_host) | set(from_fleet_audit)
    if rollout:
        names |= set(rollout["hosts"])
    peers_fleet = normal_fleet(hosts)
    models = []
    for name in sorted(names, key=natural_key):
        loaded = hosts.get(name) or {}
        model = host_model(name, loaded, fleet_drift=drift_by_host.get(name),
                           rollout=(rollout or {}).get("hosts", {}).get(name),
                           fleet_row=from_fleet_audit.get(name), fleet_findings=fleet_findings.get(name),
                           peers_fleet=peers_fleet)
        models.append(model)
    for number, model in enumerate(models, 1):
        model["id"] = "host-%d" % number
    times = sorted(t for m in models for t in m["times"] if isinstance(t, str))
    return {
        "hosts": models,
        "health": health_summary(models),
        "normal": normal_summary(models),
        "columns": finding_columns(models),
        "rollout": rollout,
        "older_rollouts": older,
        "fleet_audit": {"first": fleet_audit.get("first"), "last": fleet_audit.get("last"),
                        "hosts": len(from_fleet_audit)} if fleet_audit else None,
        "fleet_drift": fleet_drift is not None and isinstance(fleet_drift, dict),
        "as_of": times[-1] if times else None,
        "notes": [],
    }


def _rollout_key(record):
    return (str(record.get("started") or ""), str(record.get("run_id") or ""), str(record.get("file") or ""))


def _fleet_findings(fleet_audit):
    """{host: [finding]} from fleet-audit.json: for a host whose audit.json is missing."""
    out = {}
    for finding in (fleet_audit or {}).get("findings") or []:
        if not isinstance(finding, dict):
            continue
        for entry in finding.get("hosts") or []:
            if not isinstance(entry, dict) or not isinstance(entry.get("host"), str):
                continue
            items = entry.get("items") or [None]
            for item in items:
                out.setdefault(entry["host"], []).append({
                    "rule": finding.get("rule"), "severity": finding.get("severity"), "title": finding.get("title"),
                    "item": item, "message": ""})
    return out


def finding_columns(hosts):
    """The findings grid's columns: every rule found (or unknown) on some host, most severe
    first, then the rules found on most hosts, then by id."""
    columns = {}
    for host in hosts:
        audit = host.get("audit") or {}
        for kind in ("findings", "unknown"):
            for entry in audit.get(kind) or []:
                rule = entry["rule"]
                column = columns.setdefault(rule, {"rule": rule, "title": entry.get("title") or rule,
                                                   "severity": None, "hosts": set()})
                if kind == "findings":
                    sev = entry.get("severity")
                    if column["severity"] is None or _sev_rank(sev) < _sev_rank(column["severity"]):
                        column["severity"] = sev
                    column["hosts"].add(host["name"])
    out = sorted(columns.values(), key=lambda c: (_sev_rank(c["severity"]), -len(c["hosts"]), c["rule"]))
    return [{"rule": c["rule"], "title": c["title"], "severity": c["severity"], "count": len(c["hosts"])}
            for c in out]


def _sev_rank(severity):
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


# ------------------------------------------------------------------------------ one host

def host_model(name, loaded, fleet_drift=None, rollout=None, fleet_row=None, fleet_findings=None, peers_fleet=None):
    """One host of the page from its loaded records (each may be None); ``peers_fleet``:
    normal_fleet() of every host, for the host's peers (None: the peers its normal.json recorded)."""
    health = health_model(loaded.get("health"))
    normal = normal_model(name, loaded.get("normal"), loaded.get("profile"), peers_fleet)
    audit = audit_model(loaded.get("audit"), loaded.get("report"), fleet_row, fleet_findings)
    verify = verify_model(loaded.get("verify"))
    bench = benchmark_model(loaded.get("benchmark"), loaded.get("before"), loaded.get("after"))
    experiments = experiments_model(loaded.get("experiments"))
    drift = _drift(fleet_drift, verify)
    times = [t for t in ((health or {}).get("time"), (audit or {}).get("time"), (verify or {}).get("time"),
                         (bench or {}).get("after_time"), (bench or {}).get("before_time"),
                         (experiments or {}).get("time_finished"), (experiments or {}).get("time_started"),
                         normal["time"], normal["profile_time"]) if t]
    model = {
        "name": name,
        "folder": loaded.get("folder"),
        "files": list(loaded.get("files") or []),
        "health": health,
        "audit": audit,
        "verify": verify,
        "p2p": (verify or {}).get("p2p") or p2p_model(None, why="no verify.json" if verify is None else None),
        "benchmark": bench,
        "experiments": experiments,
        "normal": normal,
        "rollout": rollout,
        "drift": drift,
        "times": times,
    }
    model["attention"] = attention(model)
    return model


def audit_model(audit, report_text, fleet_row=None, fleet_findings=None):
    """The audit part of a host: counts, findings, unknown, since, and the report's anchors."""
    if not isinstance(audit, dict):
        if not fleet_row:
            return None
        counts = fleet_row.get("counts") if isinstance(fleet_row.get("counts"), dict) else {}
        return {"time": fleet_row.get("time"), "worst": fleet_row.get("worst"), "counts": counts,
                "findings": [f for f in fleet_findings or [] if isinstance(f.get("rule"), str)], "unknown": [],
                "since": None, "anchors": None, "report": False, "source": "fleet-audit.json", "gpus": None}
    findings = [_entry(f) for f in audit.get("findings") or [] if isinstance(f, dict) and isinstance(f.get("rule"), str)]
    unknown = [_entry(f) for f in audit.get("unknown") or [] if isinstance(f, dict) and isinstance(f.get("rule"), str)]
    counts = dict(audit.get("counts")) if isinstance(audit.get("counts"), dict) else {}
    for sev in SEVERITIES:
        counts.setdefault(sev, sum(1 for f in findings if f["severity"] == sev))
    counts.setdefault("unknown", len(unknown))
    worst = audit.get("worst")
    if worst is None:
        worst = next((sev for sev in SEVERITIES if counts.get(sev)), None)
    since = audit.get("since") if isinstance(audit.get("since"), dict) else None
    return {
        "time": audit.get("time") if isinstance(audit.get("time"), str) else None,
        "worst": worst,
        "counts": counts,
        "findings": findings,
        "unknown": unknown,
        "since": since,
        "anchors": anchors_mod.report_anchors(report_text) if report_text is not None else None,
        "report": report_text is not None,
        "source": "audit.json",
        "gpus": _gpus(audit.get("facts")),
    }


def _entry(entry):
    return {"rule": entry["rule"], "severity": entry.get("severity"), "title": entry.get("title") or entry["rule"],
            "item": entry.get("item"), "message": entry.get("message") or "",
            "reasons": [str(r) for r in entry.get("reasons") or []]}


def _gpus(facts):
    """``2 x NVIDIA H200`` from the audit's facts, or None."""
    gpus = fact_envelope.value((facts or {}).get("gpus")) if isinstance(facts, dict) else None
    if not isinstance(gpus, list) or not gpus:
        return None
    names = {}
    for gpu in gpus:
        label = fact_envelope.value(gpu.get("name")) if isinstance(gpu, dict) else None
        label = str(label or "GPU")
        names[label] = names.get(label, 0) + 1
    return ", ".join("%d x %s" % (count, label) for label, count in names.items())


def verify_model(verify):
    if not isinstance(verify, dict):
        return None
    drift = verify.get("drift") if isinstance(verify.get("drift"), dict) else {}
    comparison = verify.get("comparison") if isinstance(verify.get("comparison"), dict) else {}
    p2p = verify.get("p2p")
    return {
        "time": verify.get("time") if isinstance(verify.get("time"), str) else None,
        "failures": [str(f) for f in verify.get("failures") or []],
        "recorded_drift": [d for d in verify.get("recorded_drift") or [] if isinstance(d, dict)],
        "readback_drift": dict((module, len(records)) for module, records in sorted(drift.items())
                               if isinstance(records, list) and records),
        "comparison": {"previous_time": comparison.get("previous_time"),
                       "lines": [str(x) for x in comparison.get("lines") or []],
                       "regressions": [str(x) for x in comparison.get("regressions") or []]},
        "p2p": p2p_model(p2p if isinstance(p2p, dict) else None, staged=verify.get("p2p_staged")),
    }


def _drift(fleet_drift, verify):
    """Recorded drift of a host: verify.json's and fleet-drift.json's, each item once."""
    seen, out = set(), []
    for item in list((verify or {}).get("recorded_drift") or []) + list(fleet_drift or []):
        if not isinstance(item, dict):
            continue
        key = (str(item.get("key") or item.get("target")), str(item.get("current")))
        if key in seen:
            continue
        seen.add(key)
        out.append(item)
    return out


# ------------------------------------------------------------------------------ P2P

def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value) if math.isfinite(value) else None
    except OverflowError:  # an int too large for a float
        return None


def p2p_model(p2p, staged=None, why=None):
    """A host's P2P matrices with the floor of each pair and the pairs that fell short.

    ``status``: ``measured``, ``skipped`` (the module's reason in ``msg``: no driver, one GPU),
    or ``none`` (not measured: verify_p2p_enabled off, or no verify.json). Matrices are N x N
    lists (rows = source GPU, null where nothing was measured), keyed as in MATRICES; floors
    per matrix the same way; ``short`` the set of (matrix key, row, column) that fell short."""
    if not isinstance(p2p, dict) or not p2p:
        return {"status": "none", "msg": why or "not measured (the P2P check was off in this run)"}
    if p2p.get("skipped"):
        return {"status": "skipped", "msg": str(p2p.get("msg") or p2p.get("skip_reason") or "skipped")}
    pairs = [p for p in p2p.get("pairs") or [] if isinstance(p, dict) and isinstance(p.get("src"), int)
             and isinstance(p.get("dst"), int)]
    bidis = [b for b in p2p.get("bidirectional") or [] if isinstance(b, dict) and isinstance(b.get("a"), int)
             and isinstance(b.get("b"), int)]
    if not pairs and not bidis:
        return {"status": "none", "msg": str(p2p.get("msg") or "no pair was measured")}
    gpus = p2p.get("selected") or (p2p.get("matrices") or {}).get("gpus")
    if not isinstance(gpus, list) or not all(isinstance(g, int) for g in gpus):
        gpus = sorted(set([p["src"] for p in pairs] + [p["dst"] for p in pairs] + [b["a"] for b in bidis]
                          + [b["b"] for b in bidis]))
    pos = dict((g, n) for n, g in enumerate(gpus))
    size = len(gpus)
    matrices = dict((key, [[None] * size for _row in range(size)]) for key, _f, _k, _t in MATRICES)
    floors = dict((key, [[None] * size for _row in range(size)]) for key, _f, _k, _t in MATRICES)
    access = [[None] * size for _row in range(size)]
    thresholds = p2p.get("thresholds") if isinstance(p2p.get("thresholds"), dict) else {}
    rows, sources = [], set()
    for res in pairs:
        if res["src"] not in pos or res["dst"] not in pos:
            continue
        i, j = pos[res["src"]], pos[res["dst"]]
        link = str(res.get("link") or "unknown")
        floor, source = _floor(res, "floor_unidirectional_gbps", "min_unidirectional_gbps", link, thresholds)
        matrices["uni_peer"][i][j] = _number(res.get("unidirectional_p2p_gbps"))
        matrices["uni_staged"][i][j] = _number(res.get("unidirectional_staged_gbps"))
        floors["uni_peer"][i][j] = floor
        if isinstance(res.get("peer_access"), bool):
            access[i][j] = res["peer_access"] if access[i][j] is None else access[i][j] and res["peer_access"]
        if source:
            sources.add(source)
        rows.append({"pair": "%d->%d" % (res["src"], res["dst"]), "kind": "one way", "link": link,
                     "peer": matrices["uni_peer"][i][j], "staged": matrices["uni_staged"][i][j],
                     "peer_access": res.get("peer_access"), "floor": floor, "floor_source": source,
                     "error": res.get("error"), "latency_us": _number(res.get("latency_p2p_us"))})
    for res in bidis:
        if res["a"] not in pos or res["b"] not in pos:
            continue
        i, j = pos[res["a"]], pos[res["b"]]
        link = str(res.get("link") or "unknown")
        floor, source = _floor(res, "floor_bidirectional_gbps", "min_bidirectional_gbps", link, thresholds)
        for x, y in ((i, j), (j, i)):
            matrices["bidi_peer"][x][y] = _number(res.get("bidirectional_p2p_gbps"))
            matrices["bidi_staged"][x][y] = _number(res.get("bidirectional_staged_gbps"))
            floors["bidi_peer"][x][y] = floor
        if source:
            sources.add(source)
        both = [access[i][j], access[j][i]]
        rows.append({"pair": "%d<->%d" % (res["a"], res["b"]), "kind": "both ways", "link": link,
                     "peer": matrices["bidi_peer"][i][j], "staged": matrices["bidi_staged"][i][j],
                     "peer_access": False if False in both else True if both == [True, True] else None,
                     "floor": floor, "floor_source": source, "error": res.get("error"), "latency_us": None})
    short, reasons = _shortfalls(p2p.get("shortfalls"), pos, matrices, floors)
    for row in rows:
        row["short"] = reasons.get(row["pair"], [])
    staged_pairs = [s for s in (staged if isinstance(staged, list) else p2p.get("staged_pairs") or [])
                    if isinstance(s, dict)]
    names = dict((d.get("index"), str(d.get("name") or "")) for d in p2p.get("devices") or [] if isinstance(d, dict))
    return {
        "status": "measured",
        "gpus": list(gpus),
        "names": [names.get(g, "") for g in gpus],
        "matrices": matrices,
        "floors": floors,
        "access": access,
        "short": short,
        "pairs": rows,
        "floor_sources": sorted(sources),
        "staged_pairs": [{"pair": str(s.get("pair")), "causes": [str((c or {}).get("id")) for c in s.get("causes") or []
                                                                 if isinstance(c, dict)]} for s in staged_pairs],
        "no_peer_access": p2p.get("no_peer_access"),
        "elapsed_s": _number(p2p.get("elapsed_s")),
        "diagnosis": [{"pair": str(d.get("pair")), "why": [str(w) for w in d.get("why") or []],
                       "causes": [str((c or {}).get("id")) for c in d.get("causes") or [] if isinstance(c, dict)]}
                      for d in p2p.get("diagnosis") or [] if isinstance(d, dict)],
    }


def _floor(res, field, threshold, link, thresholds):
    """(floor GB/s, where it comes from) of one pair: its own (issue 18's link floors), else the
    threshold of its link type (older results), else none."""
    if field in res:
        value = _number(res.get(field))
        return value, (str(res.get("floor_source")) if value is not None and res.get("floor_source") else None)
    per_link = thresholds.get(threshold)
    if isinstance(per_link, dict):
        value = _number(per_link.get(link))
        if value is not None:
            return value, "%s.%s" % (threshold, link)
    return None, None


def _shortfalls(shortfalls, pos, matrices, floors):
    """The cells to mark: from p2p_bandwidth's shortfalls where the result has them, else the
    cells below their floor. Returns (set of (matrix, row, column), {pair name: [reason]})."""
    marks, reasons = set(), {}
    if isinstance(shortfalls, list):
        for entry in shortfalls:
            if not isinstance(entry, dict):
                continue
            name = str(entry.get("pair"))
            reasons.setdefault(name, []).append(str(entry.get("reason") or entry.get("metric")))
            cells = _pair_cells(name, pos)
            for key in _SHORT_MARKS.get(entry.get("metric"), ("uni_peer",)):
                for cell in cells:
                    if key.startswith("bidi") or "<->" not in name:
                        marks.add((key,) + cell)
        return marks, reasons
    for key in ("uni_peer", "bidi_peer"):
        for i, row in enumerate(matrices[key]):
            for j, value in enumerate(row):
                floor = floors[key][i][j]
                if value is not None and floor is not None and value < floor:
                    marks.add((key, i, j))
    return marks, reasons


def _pair_cells(name, pos):
    for sep in ("<->", "->"):
        if sep in name:
            left, right = name.split(sep, 1)
            try:
                a, b = pos[int(left)], pos[int(right)]
            except (KeyError, ValueError):
                return []
            return [(a, b), (b, a)] if sep == "<->" else [(a, b)]
    return []


# ------------------------------------------------------------------------------ benchmark

def _summary_of(result):
    """{concurrency: summary} of an inference_benchmark result."""
    out = {}
    for level in (result or {}).get("levels") or []:
        if isinstance(level, dict) and isinstance(level.get("concurrency"), int) and isinstance(level.get("summary"), dict):
            out[level["concurrency"]] = level["summary"]
    return out


def benchmark_model(comparison, before, after):
    """The before/after benchmark of a host: per concurrency level and figure the two medians,
    the change, the noise band and the verdict (benchmark_compare's, or worked out with the
    same stats.compare when only the two runs are there), with each run's min and max; the
    efficiency against the ceiling; the gate. None when there is no benchmark at all."""
    comparison = comparison if isinstance(comparison, dict) and isinstance(comparison.get("levels"), list) else None
    before = before if isinstance(before, dict) and isinstance(before.get("levels"), list) else None
    after = after if isinstance(after, dict) and isinstance(after.get("levels"), list) else None
    if comparison is None and before is None and after is None:
        return None
    spreads_before, spreads_after = _summary_of(before), _summary_of(after)
    figures = [path for _panel, paths, _unit in BENCH_PANELS for path in paths]
    levels = []
    if comparison is not None:
        for level in comparison["levels"]:
            if not isinstance(level, dict) or not isinstance(level.get("concurrency"), int):
                continue
            found = level.get("figures") if isinstance(level.get("figures"), dict) else {}
            levels.append({"concurrency": level["concurrency"], "figures": dict(
                (path, _figure(found.get(path), spreads_before.get(level["concurrency"], {}).get(path),
                               spreads_after.get(level["concurrency"], {}).get(path))) for path in figures)})
    else:
        for concurrency in sorted(set(spreads_before) | set(spreads_after)):
            old, new = spreads_before.get(concurrency, {}), spreads_after.get(concurrency, {})
            levels.append({"concurrency": concurrency, "figures": dict(
                (path, _figure(stats.compare(old.get(path) or {}, new.get(path) or {}, path) if old and new else
                               {"before": (old.get(path) or {}).get("median"), "after": (new.get(path) or {}).get("median"),
                                "delta_pct": None, "noise_pct": None, "verdict": "not compared"},
                               old.get(path), new.get(path))) for path in figures)})
    efficiency = (comparison or {}).get("efficiency") if isinstance((comparison or {}).get("efficiency"), dict) else {
        "before": (before or {}).get("efficiency"), "after": (after or {}).get("efficiency")}
    gate = (comparison or {}).get("gate") if isinstance((comparison or {}).get("gate"), dict) else None
    return {
        "source": "benchmark.json" if comparison is not None else "benchmark-before.json / benchmark-after.json",
        "model": (comparison or after or before or {}).get("model"),
        "before_time": (comparison or {}).get("before_time") or (before or {}).get("time"),
        "after_time": (comparison or {}).get("after_time") or (after or {}).get("time"),
        "has_before": bool((comparison or {}).get("before")) if comparison is not None else before is not None,
        "has_after": comparison is not None or after is not None,
        "comparable": (comparison or {}).get("comparable"),
        "differences": [str(d) for d in (comparison or {}).get("differences") or []],
        "levels": sorted(levels, key=lambda lv: lv["concurrency"]),
        "headline": (comparison or {}).get("headline") if isinstance((comparison or {}).get("headline"), dict) else None,
        "efficiency": {"before": _efficiency(efficiency.get("before")), "after": _efficiency(efficiency.get("after"))},
        "gate": {"failed": bool(gate.get("failed")), "reasons": [str(r) for r in gate.get("reasons") or []],
                 "max_regression_pct": _number(gate.get("max_regression_pct"))} if gate else None,
        "changes": len((comparison or {}).get("changes") or []),
    }


def _figure(found, spread_before, spread_after):
    found = found if isinstance(found, dict) else {}
    out = {key: _number(found.get(key)) for key in ("before", "after", "delta_pct", "noise_pct")}
    out["verdict"] = str(found.get("verdict") or "not measured")
    for side, spread in (("before", spread_before), ("after", spread_after)):
        spread = spread if isinstance(spread, dict) else {}
        out[side + "_range"] = (_number(spread.get("min")), _number(spread.get("max"))) \
            if _number(spread.get("min")) is not None and _number(spread.get("max")) is not None else None
    return out


def _efficiency(entry):
    if not isinstance(entry, dict):
        return None
    return {"ceiling": _number(entry.get("ceiling_tokens_per_s")), "decode": _number(entry.get("decode_tokens_per_s")),
            "percent": _number(entry.get("percent")), "formula": entry.get("formula"), "reason": entry.get("reason")}


# ------------------------------------------------------------------------------ experiments

# The statuses of a serving experiment's candidate (the serving_experiments role's), in the order
# the page counts them.
EXPERIMENT_STATUSES = ("kept", "rolled_back", "rejected_accuracy", "failed_start", "failed", "skipped")


def _text(value):
    """A string of a record, or None (a number or a word the writer gave; never a dict or list)."""
    if value is None or isinstance(value, (dict, list)):
        return None
    return value if isinstance(value, str) else str(value)


def _command(side):
    """The launch command of an experiments record's ``before``/``after``: its text, else its
    arguments joined, or None."""
    side = side if isinstance(side, dict) else {}
    if isinstance(side.get("command"), str) and side["command"]:
        return side["command"]
    argv = side.get("argv")
    if isinstance(argv, list) and argv:
        return " ".join(str(arg) for arg in argv)
    return None


def experiments_model(record):
    """A host's serving experiments (experiments.json) as the page shows them: the unit, the
    figure from the baseline to the kept state, the counts per status, the launch command before
    and after, and one row per candidate in the order tried. None when there is no record (or it
    has no candidates list)."""
    if not isinstance(record, dict) or not isinstance(record.get("candidates"), list):
        return None
    baseline = record.get("baseline") if isinstance(record.get("baseline"), dict) else {}
    final = record.get("final") if isinstance(record.get("final"), dict) else {}
    rows = []
    for candidate in record["candidates"]:
        if not isinstance(candidate, dict):
            continue
        comparison = candidate.get("comparison") if isinstance(candidate.get("comparison"), dict) else {}
        figure = comparison.get("figure") if isinstance(comparison.get("figure"), dict) else None
        accuracy = candidate.get("accuracy") if isinstance(candidate.get("accuracy"), dict) else None
        downtime = candidate.get("downtime_s") if isinstance(candidate.get("downtime_s"), dict) else {}
        rows.append({
            "name": _text(candidate.get("name")) or "?",
            "flag": _text(candidate.get("flag")),
            "value": None if candidate.get("value") is True else _text(candidate.get("value")),
            "risk": _text(candidate.get("risk")),
            "status": _text(candidate.get("status")) or "?",
            "reason": _text(candidate.get("reason")) or "",
            "figure": {key: _number(figure.get(key)) for key in ("before", "after", "delta_pct", "noise_pct")}
            if figure else None,
            "verdict": _text((figure or {}).get("verdict")),
            "regressed": [str(g.get("name")) for g in comparison.get("guards") or []
                          if isinstance(g, dict) and g.get("regressed") is True],
            "accuracy": {"passed": accuracy.get("passed") if isinstance(accuracy.get("passed"), bool) else None,
                         "exact": accuracy.get("exact") is True,
                         "divergence_pct": _number(accuracy.get("divergence_pct")),
                         "max_divergence_pct": _number(accuracy.get("max_divergence_pct")),
                         "prompts": _number(accuracy.get("prompts")),
                         "differing_prompts": _number(accuracy.get("differing_prompts"))} if accuracy else None,
            "downtime_try": _number(downtime.get("try")),
            "downtime_rollback": _number(downtime.get("rollback")),
        })
    counts = dict((status, sum(1 for row in rows if row["status"] == status)) for status in EXPERIMENT_STATUSES)
    counts["other"] = len(rows) - sum(counts.values())
    counts["total"] = len(rows)
    return {
        "unit": _text(record.get("unit")),
        "unit_host": _text(record.get("unit_host")),
        "kind": _text(record.get("server_kind")),
        "figure": _text(record.get("figure")),
        "concurrency": _number(record.get("concurrency")),
        "time_started": _text(record.get("time_started")),
        "time_finished": _text(record.get("time_finished")),
        "baseline": _number(figure_value(baseline)),
        "baseline_noise_pct": _number(baseline.get("noise_pct")),
        "final": _number(figure_value(final)),
        "final_delta_pct": _number(final.get("delta_pct")),
        "changed": record.get("changed") is True,
        "before": _command(record.get("before")),
        "after": _command(record.get("after")),
        "dropin": _text(record.get("dropin")),
        "restarts": _number(record.get("restarts")),
        "max_restarts": _number(record.get("max_restarts")),
        "downtime_s_total": _number(record.get("downtime_s_total")),
        "counts": counts,
        "candidates": rows,
    }


# ------------------------------------------------------------------------------ health

def _list_of(value):
    return value if isinstance(value, list) else []


def _int(value):
    """An integer of a record, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _int_or(value, default):
    return default if _int(value) is None else value


def _health_finding(entry):
    rule = _text(entry.get("rule")) or "?"
    return {"rule": rule, "severity": _text(entry.get("severity")), "title": _text(entry.get("title")) or rule,
            "item": _text(entry.get("item")), "message": _text(entry.get("message")) or "",
            "action": _text(entry.get("action")), "blocking": entry.get("blocking") is True}


def health_model(record):
    """A host's health.json as the page shows it: the status (the record's word, which the page
    colours only when it is one of healthy, degraded, quarantined), the actions heaviest first,
    the findings (each with its action and whether it blocks), the rules not judged and each
    GPU's status. Every key read with a default; None when there is no record (or no status)."""
    if not isinstance(record, dict) or not isinstance(record.get("status"), str):
        return None
    counts = record.get("counts") if isinstance(record.get("counts"), dict) else {}
    findings = [_health_finding(f) for f in _list_of(record.get("findings")) if isinstance(f, dict)]
    unknown = [{"rule": _text(u.get("rule")) or "?", "title": _text(u.get("title")) or _text(u.get("rule")) or "?",
                "item": _text(u.get("item")), "reasons": [str(r) for r in _list_of(u.get("reasons"))]}
               for u in _list_of(record.get("unknown")) if isinstance(u, dict)]
    gpus = [{"index": _int(g.get("index")), "bdf": _text(g.get("bdf")), "name": _text(g.get("name")),
             "status": _text(g.get("status")) or "?", "actions": [str(a) for a in _list_of(g.get("actions"))],
             "findings": [str(f) for f in _list_of(g.get("findings"))]}
            for g in _list_of(record.get("gpus")) if isinstance(g, dict)]
    actions = [str(a) for a in _list_of(record.get("actions")) if isinstance(a, str)]
    blocking = record.get("blocking") is True
    return {
        "status": record["status"],
        "time": _text(record.get("time")),
        "phase": _text(record.get("phase")),
        "policy": _text(record.get("policy")),
        "blocking": blocking,
        "quarantine": record.get("quarantine") is True,
        "tuned_anyway": blocking and record.get("quarantine") is False,
        "actions": actions,
        "counts": {"findings": _int_or(counts.get("findings"), len(findings)),
                   "blocking": _int_or(counts.get("blocking"), sum(1 for f in findings if f["blocking"])),
                   "unknown": _int_or(counts.get("unknown"), len(unknown))},
        "findings": findings,
        "unknown": unknown,
        "gpus": gpus,
    }


def health_summary(hosts):
    """The fleet's health for the top of the page: hosts per health status (``other``: a status
    outside healthy, degraded, quarantined; ``not_judged``: no health.json), and the quarantined,
    degraded and other hosts, each with its actions, worst first."""
    counts = dict((status, 0) for status in HEALTH_STATUSES)
    counts.update(other=0, not_judged=0)
    listed = dict((key, []) for key in ("quarantined", "degraded", "other"))
    for host in hosts:
        health = host.get("health")
        if not health:
            counts["not_judged"] += 1
            continue
        key = health["status"] if health["status"] in HEALTH_STATUSES else "other"
        counts[key] += 1
        if key != "healthy":
            listed[key].append({"name": host["name"], "id": host.get("id"), "status": health["status"],
                                "actions": list(health["actions"]), "phase": health["phase"],
                                "policy": health["policy"], "tuned_anyway": health["tuned_anyway"],
                                "findings": len(health["findings"])})
    counts["total"] = len(hosts)
    return dict(listed, counts=counts, judged=counts["total"] - counts["not_judged"])


# ------------------------------------------------------------------------------ is this node normal?

# A host's answer: normal.json's verdict with its peers worked out again over the fleet.
NORMAL_STATUSES = ("not_normal", "normal", "not_judged")


def _setting(settings, key, default, least):
    value = _number(settings.get(key))
    return value if value is not None and value >= least else default


def normal_settings(record):
    """The peer settings a normal.json was judged with (mads, min_peers, min_spread_pct), each
    node_normal's default where the record has none or one node_normal would refuse."""
    settings = record.get("settings") if isinstance(record, dict) and isinstance(record.get("settings"), dict) else {}
    return {"mads": _setting(settings, "mads", node_normal.DEFAULT_MADS, 0.5),
            "min_peers": int(_setting(settings, "min_peers", node_normal.DEFAULT_MIN_PEERS, 2)),
            "min_spread_pct": _setting(settings, "min_spread_pct", node_normal.DEFAULT_MIN_SPREAD_PCT, 0)}


def _normal_figures(record):
    """The figures of a normal.json that the peers can weigh: a name, a finite number, which way
    is better (higher or lower), the unit; others left out."""
    out = []
    for entry in _list_of(record.get("figures")):
        if not isinstance(entry, dict) or not isinstance(entry.get("figure"), str):
            continue
        value = _number(entry.get("value"))
        if value is None or entry.get("better") not in ("higher", "lower"):
            continue
        out.append({"figure": entry["figure"], "value": value, "unit": _text(entry.get("unit")) or "",
                    "better": entry["better"]})
    return out


def _expected(value):
    if isinstance(value, list):
        return [_number(v) if _number(v) is not None else _text(v) for v in value]
    return _number(value) if _number(value) is not None else _text(value)


def _normal_checks(record):
    """The absolute checks of a normal.json (node_normal.absolute's), each key with a default."""
    out = []
    for entry in _list_of(record.get("checks")):
        if not isinstance(entry, dict) or not isinstance(entry.get("check"), str):
            continue
        out.append({"check": entry["check"], "item": _text(entry.get("item")),
                    "status": _text(entry.get("status")) or "unknown", "message": _text(entry.get("message")) or "",
                    "value": _expected(entry.get("value")), "expected": _expected(entry.get("expected"))})
    return out


def _profile_name(record):
    profile = record.get("profile") if isinstance(record, dict) and isinstance(record.get("profile"), dict) else {}
    return _text(profile.get("name"))


class _Fleet(dict):
    """normal_fleet()'s mapping, with each profile's median and MAD per figure worked out once
    (``stats``) for all its hosts: judging every host is then linear in the fleet, not quadratic."""

    def __init__(self):
        super().__init__()
        self.stats = {}

    def group_stats(self, profile):
        if profile not in self.stats:
            self.stats[profile] = node_normal.group_stats(self, profile)
        return self.stats[profile]


def normal_fleet(hosts):
    """{host: {"profile", "figures"}} of every loaded host with a normal.json: the fleet each
    host's peers are taken from (node_normal.peers' ``fleet``)."""
    out = _Fleet()
    for name, loaded in hosts.items():
        record = (loaded or {}).get("normal")
        if isinstance(record, dict):
            out[name] = {"profile": _profile_name(record), "figures": _normal_figures(record)}
    return out


def _recorded_peers(record):
    """The peers a normal.json recorded (the hosts judged before it), for a host model made
    without the fleet."""
    peers = record.get("peers") if isinstance(record.get("peers"), dict) else {}
    outliers = [o for o in _list_of(peers.get("outliers")) if isinstance(o, dict) and isinstance(o.get("message"), str)]
    return {"profile": _text(peers.get("profile")), "hosts": [str(h) for h in _list_of(peers.get("hosts"))],
            "compared": [c for c in _list_of(peers.get("compared")) if isinstance(c, dict)],
            "outliers": outliers, "reason": _text(peers.get("reason"))}


def _peer_item(item):
    return {"figure": _text(item.get("figure")) or "?", "value": _number(item.get("value")),
            "unit": _text(item.get("unit")) or "", "median": _number(item.get("median")),
            "mad": _number(item.get("mad")), "mads_away": _number(item.get("mads_away")),
            "hosts": _int(item.get("hosts")), "direction": _text(item.get("direction")),
            "message": _text(item.get("message"))}


def normal_model(name, record, profile=None, fleet=None):
    """Is host ``name`` normal? Its normal.json (``record``) and profile.json (``profile``) as the
    page shows them: the profile and why it was chosen, the absolute checks that did not pass
    (outside, unknown), its peers worked out again over ``fleet`` (normal_fleet: every host with a
    normal.json, with the settings its own record was judged with; None: the peers it recorded),
    the outliers with their messages, how many figures were compared, the verdict
    (node_normal.verdict) and ``status`` normal, not_normal or not_judged (with ``why``)."""
    profile = profile if isinstance(profile, dict) and isinstance(profile.get("name"), str) else None
    record = record if isinstance(record, dict) else None
    judged_profile = (record.get("profile") if record and isinstance(record.get("profile"), dict) else None) or {}
    reasons = _list_of(judged_profile.get("reasons")) or _list_of((profile or {}).get("reasons"))
    profile_name = _profile_name(record) or (profile or {}).get("name")
    out = {
        "record": record is not None,
        "profile": profile_name,
        "platform": _text(judged_profile.get("platform")) or _text((profile or {}).get("platform")),
        "reasons": [str(r) for r in reasons if isinstance(r, (str, int, float))],
        "description": _text((profile or {}).get("description")),
        "pinned": (profile or {}).get("pinned") is True,
        "profile_now": (profile or {}).get("name") if record and profile and profile["name"] != profile_name else None,
        "profile_time": _text((profile or {}).get("time")),
        "time": _text(record.get("time")) if record else None,
        "status": "not_judged", "normal": None, "why": "no normal.json", "lines": [], "checks": [], "outside": 0,
        "outliers": [], "figures": [], "compared": 0, "peers": [], "reason": None, "peers_from": None,
        "recorded_normal": None, "recorded_peers": None, "settings": normal_settings(record),
    }
    if record is None:
        return out
    checks = _normal_checks(record)
    settings = out["settings"]
    if fleet is None:
        peer = _recorded_peers(record)
        out["peers_from"] = "normal.json"
    else:
        own = {"profile": _profile_name(record), "figures": _normal_figures(record)}
        stats = fleet.group_stats(own["profile"]) if isinstance(fleet, _Fleet) and fleet.get(name) == own else None
        fleet = dict(fleet)
        fleet[name] = own
        peer = node_normal.peers(name, fleet, mads=settings["mads"], min_peers=settings["min_peers"],
                                 min_spread_pct=settings["min_spread_pct"], stats=stats)
        out["peers_from"] = "fleet"
    normal, lines = node_normal.verdict(checks, peer)
    recorded = _recorded_peers(record)
    out.update(
        status="normal" if normal is True else "not_normal" if normal is False else "not_judged",
        normal=normal,
        why=None if normal is not None else (peer.get("reason") or "no expectation could be checked and no figure "
                                             "compared with peers"),
        lines=[str(line) for line in lines],
        checks=[c for c in checks if c["status"] not in ("ok", "not_applicable")],
        outside=sum(1 for c in checks if c["status"] == "outside"),
        outliers=[_peer_item(o) for o in peer.get("outliers") or []],
        figures=[_peer_item(c) for c in peer.get("compared") or []],
        compared=len(peer.get("compared") or []),
        peers=[str(h) for h in peer.get("hosts") or [] if str(h) != name],
        reason=peer.get("reason") if not peer.get("compared") else None,
        recorded_normal=record.get("normal") if isinstance(record.get("normal"), bool) else None,
        recorded_peers=len([h for h in recorded["hosts"] if h != name]),
    )
    return out


def normal_summary(hosts):
    """Is each node normal, for the fleet: hosts per status (``records``: how many have a
    normal.json), and per profile its hosts, how many are normal, not normal, not judged, the
    hosts not normal with their lines (each expectation outside, each outlier against its peers)
    and the hosts not judged with why. Profiles by name, hosts without a profile last."""
    counts = dict((status, 0) for status in NORMAL_STATUSES)
    groups = {}
    for host in hosts:
        normal = host.get("normal") or {}
        status = normal.get("status") if normal.get("status") in NORMAL_STATUSES else "not_judged"
        counts[status] += 1
        group = groups.setdefault(normal.get("profile"), {
            "profile": normal.get("profile"), "hosts": [], "counts": dict((s, 0) for s in NORMAL_STATUSES),
            "not_normal": [], "not_judged": []})
        group["hosts"].append(host["name"])
        group["counts"][status] += 1
        entry = {"name": host["name"], "id": host.get("id"), "status": status}
        if status == "not_normal":
            group["not_normal"].append(dict(entry, lines=list(normal.get("lines") or []), outside=normal.get("outside", 0),
                                            outliers=len(normal.get("outliers") or [])))
        elif status == "not_judged":
            group["not_judged"].append(dict(entry, why=normal.get("why") or "not judged"))
    counts["total"] = len(hosts)
    ordered = sorted(groups.values(), key=lambda g: (g["profile"] is None, g["profile"] or ""))
    return {"counts": counts, "records": sum(1 for h in hosts if (h.get("normal") or {}).get("record")),
            "profiles": ordered}


# ------------------------------------------------------------------------------ rollout

HOST_STATUSES = ("tuned", "unchanged", "quarantined", "failed", "unreachable", "untouched")


def _rollout_health(health):
    """A rollout host's ``health`` (the rollout's cut of the verdict), or None."""
    if not isinstance(health, dict) or not isinstance(health.get("status"), str):
        return None
    return {"status": health["status"], "policy": _text(health.get("policy")), "phase": _text(health.get("phase")),
            "blocking": health.get("blocking") is True,
            "actions": [str(a) for a in _list_of(health.get("actions")) if isinstance(a, str)],
            "findings": [_health_finding(f) for f in _list_of(health.get("findings")) if isinstance(f, dict)]}


def rollout_model(record):
    """A rollout-<run id>.json as the page shows it: batches in order, each with its hosts'
    outcomes, where it stopped, what was reverted, the hosts not touched. The derived keys
    rollout_result writes (status, verdict, counts, batch_outcomes) are used when present and
    worked out plainly when an older file lacks them."""
    raw_hosts = record.get("hosts") if isinstance(record.get("hosts"), dict) else {}
    batches = [[str(n) for n in batch] for batch in record.get("batches") or [] if isinstance(batch, list)]
    stopped = record.get("stopped_after_batch") if isinstance(record.get("stopped_after_batch"), int) else None
    hosts = {}
    for name, host in raw_hosts.items():
        host = host if isinstance(host, dict) else {}
        revert = host.get("revert") if isinstance(host.get("revert"), dict) else {}
        failure = host.get("failure") if isinstance(host.get("failure"), dict) else None
        status = host.get("status") if host.get("status") in HOST_STATUSES else "untouched"
        hosts[str(name)] = {
            "status": status,
            "batch": host.get("batch") if isinstance(host.get("batch"), int) else None,
            "failed_check": host.get("failed_check"),
            "reason": host.get("reason"),
            "reverted": bool(host.get("reverted")),
            "restored": len(revert.get("restored") or []),
            "revert_failed": [str((f or {}).get("target") if isinstance(f, dict) else f) for f in revert.get("failed") or []],
            "pending_reboot": [str(p) for p in revert.get("pending_reboot") or []],
            "failure": {"stage": failure.get("stage"), "task": failure.get("task"), "message": failure.get("message")}
            if failure else None,
            "changes": len(host.get("changes") or []),
            "drift": len(host.get("drift") or []),
            "verify_failures": [str(v) for v in host.get("verify_failures") or []],
            "health": _rollout_health(host.get("health")),
        }
    last_ran = stopped or len(batches)
    outcomes = dict((o.get("batch"), o) for o in record.get("batch_outcomes") or [] if isinstance(o, dict))
    batch_rows = []
    for index, names in enumerate(batches):
        number = index + 1
        given = outcomes.get(number) or {}
        batch_rows.append({
            "batch": number,
            "canary": index == 0,
            "hosts": names,
            "ran": given.get("ran") if isinstance(given.get("ran"), bool) else number <= last_ran,
            "outcome": given.get("outcome") or ("not run (stopped after batch %d)" % last_ran if number > last_ran else ""),
            "stopped_here": number == stopped,
        })
    in_batches = set(n for batch in batches for n in batch)
    counts = dict((s, sum(1 for h in hosts.values() if h["status"] == s)) for s in HOST_STATUSES)
    counts["total"] = len(hosts)
    status = record.get("status") or ("stopped" if stopped else "failed" if counts["failed"] + counts["unreachable"]
                                      else "completed")
    return {
        "run_id": str(record.get("run_id") or "?"),
        "file": record.get("file"),
        "started": record.get("started"),
        "finished": record.get("finished"),
        "status": status,
        "verdict": record.get("verdict") or status,
        "check_mode": bool(record.get("check_mode")),
        "canary": record.get("canary"),
        "serial": record.get("serial"),
        "revert_on_failure": record.get("revert_on_failure", True),
        "stopped_after_batch": stopped,
        "stop_reason": record.get("stop_reason"),
        "batches": batch_rows,
        "outside": [n for n in sorted(hosts, key=natural_key) if n not in in_batches],
        "hosts": hosts,
        "counts": counts,
    }


# ------------------------------------------------------------------------------ attention

NOTABLE_ONLY = ("H findings", "P0 findings", "health degraded")


def needs_a_look(host):
    """Whether the host's badges hold more than its audit's findings (the grid shows those)."""
    return any(word not in NOTABLE_ONLY for word in host.get("attention") or [])


def attention(host):
    """Why a host needs a look, worst first: short words for its badges."""
    out = []
    rollout = host.get("rollout") or {}
    health = host.get("health") or {}
    if health.get("status") == "quarantined" or rollout.get("status") == "quarantined":
        out.append("quarantined")
    elif health.get("status") == "degraded":
        out.append("health degraded")
    if rollout.get("status") in ("failed", "unreachable"):
        out.append("rollout " + rollout["status"])
    verify = host.get("verify") or {}
    if host.get("drift") or verify.get("readback_drift"):
        out.append("drift")
    p2p = host.get("p2p") or {}
    if p2p.get("short"):
        out.append("P2P short")
    bench = host.get("benchmark") or {}
    if (bench.get("gate") or {}).get("failed"):
        out.append("benchmark gate failed")
    if verify.get("failures") and "drift" not in out and not p2p.get("short"):
        out.append("verify failed")
    if verify.get("comparison", {}).get("regressions"):
        out.append("P2P regression")
    audit = host.get("audit") or {}
    if (audit.get("counts") or {}).get("H") and not health:
        out.append("H findings")
    if (audit.get("counts") or {}).get("P0"):
        out.append("P0 findings")
    if (host.get("normal") or {}).get("status") == "not_normal":
        out.append("not normal")
    return out
