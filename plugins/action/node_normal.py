# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is this node normal? One host against its profile's expectations and the hosts of its profile
in the artifacts folder; normal.json written in its folder on the controller.

Why an action plugin: the figures are the controller's records (verify.json, benchmark.json, the
other hosts' normal.json), read through the folder's descriptor and never through a link
(plugin_utils/report/collect.py's reader); the judgement is plugin_utils/node_normal.py's; the
record is written by gpufleet.tuning.artifact_files' write(). Each host's normal.json keeps its
profile and figures, so the next host's judgement (and the fleet page) has its peers without
reading every record again.
"""

from __future__ import annotations

import datetime
import json
import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_files, artifact_fs, audit_rules, node_normal
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import node_text
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import collect

_ARGS = ("host", "profile", "verify", "benchmark", "artifacts", "mads", "min_peers", "min_spread_pct", "path", "mode")
RECORD = "normal.json"


def _fail(message):
    raise AnsibleActionFail("node_normal: %s" % message)


def _number(args, name, default, least):
    value = args.get(name)
    if value is None:
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        _fail("%s must be a number, got %r" % (name, value))
    if isinstance(value, bool) or not number >= least:
        _fail("%s must be a number of at least %g, got %r" % (name, least, value))
    return number


def fleet_records(root, host_folder):
    """{host: {"profile", "figures"}} from the normal.json of every host folder under ``root``
    but ``host_folder``; unreadable ones are left out."""
    out = {}
    try:
        root_fd = artifact_fs.open_dir(root)
    except (artifact_fs.Refused, OSError, ValueError):
        return out
    with artifact_fs.closing(root_fd):
        reader = collect.Reader(root_fd)
        try:
            for name, kind in reader.entries():
                if kind != "dir" or name.startswith(".") or name == host_folder:
                    continue
                record = reader.json(os.path.join(name, RECORD))
                if record and isinstance(record.get("host"), str) and isinstance(record.get("figures"), list):
                    profile = record.get("profile") if isinstance(record.get("profile"), dict) else {}
                    name = profile.get("name") if isinstance(profile.get("name"), str) else None
                    out[record["host"]] = {"profile": name, "figures": node_normal.valid_figures(record["figures"])}
        finally:
            reader.close()
    return out


def _own(path, name):
    """The host's own record ``name`` from its folder, or None."""
    try:
        data = artifact_fs.read_path(os.path.join(path, name))
        return json.loads(data.decode("utf-8")) if data is not None else None
    except (artifact_fs.Refused, OSError, ValueError):
        return None


def judge(args, fleet=None, now=None):
    """The host's verdict: profile, checks (absolute), figures, peers, normal, lines."""
    host = args.get("host")
    if not isinstance(host, str) or not host:
        _fail("host must be the inventory name, got %r" % (host,))
    path = args.get("path")
    if not isinstance(path, str) or not os.path.isabs(path):
        _fail("path must be the host's folder, an absolute path, got %r" % (path,))
    profile = audit_rules.plain(args.get("profile") or {})
    if not isinstance(profile, dict):
        _fail("profile must be the profile_select result's profile (a mapping), got %s" % artifact_files.type_name(profile))
    records = {}
    for name, filename in (("verify", "verify.json"), ("benchmark", "benchmark.json")):
        value = args.get(name)
        if value is not None and not isinstance(value, dict):
            _fail("%s must be a mapping (the record), got %s" % (name, artifact_files.type_name(value)))
        records[name] = audit_rules.plain(value) if value else _own(path, filename)
    mads = _number(args, "mads", node_normal.DEFAULT_MADS, 0.5)
    min_peers = int(_number(args, "min_peers", node_normal.DEFAULT_MIN_PEERS, 2))
    spread = _number(args, "min_spread_pct", node_normal.DEFAULT_MIN_SPREAD_PCT, 0)
    found = node_normal.figures(records["verify"], records["benchmark"])
    checks = node_normal.absolute(profile, profile.get("node") or {}, found, records["verify"]) if profile else []
    if fleet is None:
        root = args.get("artifacts") or os.path.dirname(path)
        fleet = fleet_records(root, os.path.basename(path))
    fleet = dict(fleet)
    fleet[host] = {"profile": profile.get("name"), "figures": found}
    peer = node_normal.peers(host, fleet, mads=mads, min_peers=min_peers, min_spread_pct=spread)
    normal, lines = node_normal.verdict(checks, peer)
    result = {
        "host": host,
        "time": (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "profile": {"name": profile.get("name"), "platform": profile.get("platform"), "reasons": profile.get("reasons") or []},
        "checks": checks,
        "figures": found,
        "peers": peer,
        "normal": normal,
        "lines": lines,
        "outside": [c for c in checks if c["status"] == "outside"],
        "settings": {"mads": mads, "min_peers": min_peers, "min_spread_pct": spread},
    }
    return node_text.clean_tree(result)


class ActionModule(ActionBase):
    """gpufleet.tuning.node_normal: documented in plugins/modules/node_normal.py."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(_ARGS)  # ActionBase refuses others
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        mode = artifact_files.octal_mode(args.get("mode", "0644"), "mode")
        verdict = judge(args)
        written = artifact_files.write(args["path"], {RECORD: json.dumps(verdict, indent=4, sort_keys=True) + "\n"},
                                       mode, 0o755, self._task.check_mode)
        result.update(verdict)
        result.update(path=args["path"], files=written["files"], changed=False)
        return result
