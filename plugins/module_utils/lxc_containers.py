# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""This host's LXC containers, read from their config files, and which of them to tune.

The module gpufleet.tuning.lxc_containers is a thin shell over ``run()``. It only reads, so
``changes`` is always empty and check mode is the same run. Engine contract:
``run(params, check_mode=False, paths=None, tools=None)`` returns the result or raises
ModuleFailure; ``paths`` is a Paths(root), ``tools`` is unused (nothing is run).

Where containers are:

- Proxmox VE: ``/etc/pve/lxc/<vmid>.conf``. ``/etc/pve/lxc`` is pmxcfs's link to
  ``/etc/pve/nodes/<this node>/lxc``, so only this node's containers are listed (the other
  nodes' are under ``/etc/pve/nodes/<node>/lxc`` and are not ours to edit). Proxmox also writes
  ``/var/lib/lxc/<vmid>/config`` at every start from the ``.conf``; that file is generated, so
  on a Proxmox host a numeric directory under ``/var/lib/lxc`` is never a container of its own.
- plain LXC: ``<lxcpath>/<name>/config`` for the default ``/var/lib/lxc`` and for
  ``lxc.lxcpath`` of ``/etc/lxc/lxc.conf`` when that names another directory.

Only the live section of a config counts (everything before the first ``[`` line): snapshot
sections and ``[pve:pending]`` hold values that are not the container's now. A Proxmox
template (``template: 1``) cannot be started and is never a serving container.

Which containers to tune is a list of selector terms, unioned:

- ``gpu`` (the default of the role): containers with an NVIDIA GPU passed through. Evidence,
  from the live section and the files it pulls in with ``lxc.include``: a Proxmox ``devN``
  entry for ``/dev/nvidia*``; a ``lxc.cgroup2.devices.allow`` (or v1 ``lxc.cgroup.devices``)
  rule for a character major of the NVIDIA driver (195, plus every ``nvidia*`` major of
  ``/proc/devices``, such as nvidia-uvm's, which the kernel assigns at load time); a
  ``lxc.mount.entry`` of ``/dev/nvidia*``; LXC's ``nvidia`` hook (``lxc.hook.*``).
  A rule for every major (``c *:* rwm``, ``a``) is not evidence of a GPU.
- ``all``: every container that is not a template.
- ``none``: no container (the role then tunes only the containers it is given by name).
- ``tag:NAME``: Proxmox containers with that tag (``tags: a;b``, matched without case, as
  Proxmox does by default).
- ``101``: the container with that ID (Proxmox) or that name (plain LXC);
  ``web`` or ``name:web``: the plain LXC container named so, or Proxmox containers with that
  hostname (``name:`` is needed only for a container named ``gpu``, ``all`` or ``none``).

``exclude`` takes the same IDs, names and tags and wins over ``select``.

Why ``gpu`` by default: an unlimited memlock lets the container's processes pin host memory
that cannot be swapped or reclaimed (mlock, RDMA memory registration), which on a shared host
turns one tenant's bug into host-wide memory pressure. Only containers that use the GPUs
(model servers with ``--mlock``, GPUDirect RDMA, NCCL over InfiniBand) need it.
"""

from __future__ import annotations

import errno
import os
import re

from ansible_collections.gpufleet.tuning.plugins.module_utils.common import fileops
from ansible_collections.gpufleet.tuning.plugins.module_utils.formats import lxc_config
from ansible_collections.gpufleet.tuning.plugins.module_utils.hw import rlimit
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure

# The NVIDIA driver's fixed character major (/dev/nvidia0.., /dev/nvidiactl).
NVIDIA_MAJOR = 195
KEYWORDS = ("gpu", "all", "none")
ACCEPTED_TERMS = ("gpu, all, none, a container ID (101), a container name (web, or name:web for a "
                  "container named like a keyword) or tag:NAME")

_VMID_CONF = re.compile(r"^([1-9][0-9]{2,8})\.conf\Z")
_DIGITS = re.compile(r"^[0-9]+\Z")
# LXC container names (lxc-create) and Proxmox hostnames (DNS labels) both fit this.
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+@-]{0,254}\Z")
# Proxmox tags (pve-tag: letters, digits, _ - + .; not starting with - + .).
TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_+.\-]{0,127}\Z")
_DEVICE_RULE = re.compile(r"^([abc])\s+(\*|[0-9]+):(\*|[0-9]+)(?:\s+[rwm]+)?\Z")
_DEVICE_ALLOW_KEYS = ("lxc.cgroup2.devices.allow", "lxc.cgroup.devices.allow")
_PVE_DEV_KEY = re.compile(r"^dev[0-9]+\Z")
_TRUE = ("1", "yes", "on", "true")
# lxc.include may name a file or a directory of *.conf files; bound what one config pulls in.
MAX_INCLUDE_DEPTH = 4
MAX_INCLUDED_FILES = 64
MAX_EVIDENCE_TEXT = 160

# The module's argument spec, read by the module, by run() and by the tests.
ARGUMENT_SPEC = dict(
    select=dict(type="list", elements="str", default=["gpu"]),
    exclude=dict(type="list", elements="str", default=[]),
)


class Paths:
    """Where to look; ``root`` is ``/`` on a host and a temp dir in tests.

    Absolute paths read from the files (``lxc.lxcpath``, ``lxc.include``) are taken under
    ``root`` too, so a test tree is self-contained.
    """

    def __init__(self, root="/"):
        self.root = root
        self.pve = self.under("/etc/pve")
        self.pve_lxc = self.under("/etc/pve/lxc")
        self.lxc_path = self.under("/var/lib/lxc")
        self.lxc_conf = self.under("/etc/lxc/lxc.conf")
        self.proc_devices = self.under("/proc/devices")

    def under(self, path):
        if self.root in ("/", ""):
            return path
        return os.path.join(self.root, path.lstrip("/"))


# ---------------------------------------------------------------------------------------------
# Selector terms


class Term:
    """One selector term: ``kind`` is gpu, all, none, tag, id or name."""

    __slots__ = ("kind", "value", "text")

    def __init__(self, kind, value, text):
        self.kind = kind
        self.value = value
        self.text = text

    def __repr__(self):
        return "Term(%r)" % self.text


def parse_terms(values, option="select"):
    """Validate ``select`` (keywords allowed) or ``exclude`` terms; return a list of Terms."""
    keywords = option == "select"
    if values is None:
        values = []
    elif isinstance(values, (str, int)) and not isinstance(values, bool):
        values = [values]
    if not isinstance(values, (list, tuple)):
        raise ModuleFailure("%s must be a list of terms (%s), got %r" % (option, ACCEPTED_TERMS, values))
    terms = []
    for value in values:
        terms.append(_term(value, option, keywords))
    kinds = [term.kind for term in terms]
    if "none" in kinds and len(terms) > 1:
        raise ModuleFailure("%s %r is not valid: 'none' selects no container and cannot be combined "
                            "with other terms" % (option, [term.text for term in terms]))
    return terms


def _term(value, option, keywords):
    accepted = ACCEPTED_TERMS if keywords else (
        "a container ID (101), a container name (web or name:web) or tag:NAME")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ModuleFailure("%s term %r is not valid: use %s" % (option, value, accepted))
    text = str(value)  # not stripped: a term with blanks or a newline is refused, not guessed at
    lower = text.lower()
    if lower in KEYWORDS:
        if not keywords:
            raise ModuleFailure("%s term %r is not valid: %s takes %s (to leave GPU containers alone, "
                                "select other terms instead)" % (option, text, option, accepted))
        return Term(lower, None, lower)
    if lower.startswith("tag:"):
        tag = text[4:]
        if not TAG_RE.match(tag):
            raise ModuleFailure("%s term %r is not valid: a Proxmox tag is letters, digits and _ + . -, "
                                "not starting with + . or -; use %s" % (option, text, accepted))
        return Term("tag", tag.lower(), "tag:%s" % tag)
    if lower.startswith("name:"):
        name = text[5:]
        if not NAME_RE.match(name):
            raise ModuleFailure("%s term %r is not valid: a container name is letters, digits and "
                                "_ . + @ -, not starting with . or -; use %s" % (option, text, accepted))
        return Term("name", name, text)
    if _DIGITS.match(text):
        return Term("id", text, text)
    if NAME_RE.match(text):
        return Term("name", text, text)
    raise ModuleFailure("%s term %r is not valid: use %s" % (option, text, accepted))


def _matches(term, record):
    """Does ``term`` (an id, name or tag term) name ``record``?"""
    if term.kind == "id":
        if record["manager"] == "proxmox":
            return record["vmid"] == int(term.value)
        return record["container_name"] == term.value
    if term.kind == "name":
        if record["manager"] == "proxmox":
            return (record.get("hostname") or "").lower() == term.value.lower()
        return record["container_name"] == term.value
    if term.kind == "tag":
        return term.value in [tag.lower() for tag in record.get("tags") or []]
    return False


def _why_selected(term, record):
    if term.kind == "gpu":
        evidence = record["gpu_evidence"]
        more = " and %d more line(s)" % (len(evidence) - 1) if len(evidence) > 1 else ""
        return "NVIDIA GPU passed through (%s%s)" % (evidence[0], more)
    if term.kind == "all":
        return "every container is selected (all)"
    if term.kind == "tag":
        return "tagged %s" % term.value
    return "named in the selector (%s)" % term.text


def _why_not(terms, record):
    """Why no ``select`` term chose ``record``, in the operator's words."""
    if not terms:
        return "no selector"
    if terms[0].kind == "none":
        return "the selector is none"
    parts = []
    listed = []
    for term in terms:
        if term.kind == "gpu":
            parts.append("no NVIDIA GPU passed through")
        elif term.kind == "tag":
            parts.append("not tagged %s" % term.value)
        elif term.kind in ("id", "name"):
            listed.append(term.text)
    if listed:
        parts.append("not one of %s" % ", ".join(listed))
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------
# GPU evidence


def nvidia_majors(proc_devices="/proc/devices"):
    """``{major: driver name}`` of the NVIDIA character devices: 195, and every ``nvidia*`` line
    of the Character devices section of ``/proc/devices`` (nvidia-uvm's is dynamic)."""
    found = {NVIDIA_MAJOR: "nvidia"}
    text = fileops.read_quiet(proc_devices) or ""
    in_char = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.endswith(":"):
            in_char = stripped.lower().startswith("character")
            continue
        if not in_char:
            continue
        fields = stripped.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1].startswith("nvidia"):
            found[int(fields[0])] = fields[1]
    return found


def _short(text):
    text = text.replace("\n", " ")
    return text if len(text) <= MAX_EVIDENCE_TEXT else text[:MAX_EVIDENCE_TEXT - 3] + "..."


def _dev_path(value):
    """The device path of a Proxmox ``devN`` value (``[path=]PATH[,gid=..,mode=..]``)."""
    for part in value.split(","):
        part = part.strip()
        if part.startswith("path="):
            return part[len("path="):]
        if part and "=" not in part:
            return part
    return None


def _is_nvidia_node(path):
    return bool(path) and os.path.normpath(path).startswith("/dev/nvidia")


def gpu_evidence(items, majors, where=None):
    """Lines of ``items`` (``[(key, value)]``) that pass an NVIDIA GPU through."""
    found = []
    suffix = " (in %s)" % where if where else ""
    for key, value in items:
        evidence = None
        if _PVE_DEV_KEY.match(key) and _is_nvidia_node(_dev_path(value)):
            evidence = "%s: %s" % (key, value)
        elif key in _DEVICE_ALLOW_KEYS:
            match = _DEVICE_RULE.match(value.strip())
            if match and match.group(1) in "ac" and match.group(2) != "*" and int(match.group(2)) in majors:
                evidence = "%s: %s (%s)" % (key, value.strip(), majors[int(match.group(2))])
        elif key == "lxc.mount.entry":
            fields = value.split()
            if fields and _is_nvidia_node(fields[0]):
                evidence = "%s: %s" % (key, value)
        elif key.startswith("lxc.hook.") and os.path.basename(value.strip().split(" ")[0]) == "nvidia":
            evidence = "%s: %s" % (key, value)
        if evidence:
            found.append(_short(evidence) + suffix)
    return found


def _include_files(value, paths):
    """Files an ``lxc.include`` value names: the file, or a directory's ``*.conf`` files."""
    value = value.strip()
    if not value.startswith("/"):
        return []
    path = paths.under(value)
    if os.path.isdir(path):
        try:
            names = sorted(n for n in os.listdir(path) if n.endswith(".conf"))
        except OSError:
            return []
        return [(os.path.join(path, n), os.path.join(value, n)) for n in names]
    return [(path, value)]


def _included_evidence(items, majors, paths, depth=0, seen=None):
    """GPU evidence in the files ``lxc.include`` pulls in (recursively, bounded)."""
    seen = set() if seen is None else seen
    found = []
    if depth >= MAX_INCLUDE_DEPTH:
        return found
    for key, value in items:
        if key != "lxc.include":
            continue
        for path, shown in _include_files(value, paths):
            if path in seen or len(seen) >= MAX_INCLUDED_FILES:
                continue
            seen.add(path)
            try:
                data = fileops.read_bytes(path)
            except (OSError, IOError):
                continue
            if data is None or b"\0" in data:
                continue
            included = lxc_config.ContainerConfig(data, path).items()
            found.extend(gpu_evidence(included, majors, where=shown))
            found.extend(_included_evidence(included, majors, paths, depth + 1, seen))
    return found


# ---------------------------------------------------------------------------------------------
# Reading containers


def _record(manager, path, vmid=None, name=None, lxc_path=None):
    return {
        "id": str(vmid) if vmid is not None else name,
        "manager": manager,
        "vmid": vmid,
        "container_name": str(vmid) if vmid is not None else name,
        "hostname": None,
        "path": path,
        "lxc_path": lxc_path,
        "template": False,
        "lock": None,
        "tags": [],
        "gpu": False,
        "gpu_evidence": [],
        "memlock": None,
        "selected": False,
        "reason": None,
        "error": None,
    }


def _fill(record, majors, paths):
    """Read the record's config into it; on a config that cannot be used, set ``error``."""
    try:
        data = fileops.read_bytes(record["path"])
    except (OSError, IOError) as exc:
        record["error"] = "cannot read its config: %s" % fileops.describe(exc)
        return
    if data is None:
        record["error"] = "its config %s does not exist (a dangling symlink?)" % record["path"]
        return
    try:
        config = lxc_config.ContainerConfig(data, record["path"])
    except lxc_config.ConfigError as exc:
        record["error"] = str(exc)
        return
    if not config.is_container_config():
        record["error"] = "%s is not a container config (no lxc.* key and no Proxmox key)" % record["path"]
        return
    items = config.items()
    values = {}
    for key, value in items:
        values.setdefault(key, value)  # the first line of a key, as Proxmox reads its own keys
    if record["manager"] == "proxmox":
        record["hostname"] = values.get("hostname") or None
        record["template"] = (values.get("template") or "").strip().lower() in _TRUE
        record["lock"] = (values.get("lock") or "").strip() or None
        record["tags"] = lxc_config.split_tags(values.get("tags"))
    else:
        record["hostname"] = values.get("lxc.uts.name") or values.get("lxc.utsname") or None
    pair, raw, error = lxc_config.effective_limit(config.entries(lxc_config.MEMLOCK_KEY))
    record["memlock"] = rlimit.format_pair(pair) if pair is not None else (raw if error else None)
    evidence = gpu_evidence(items, majors) + _included_evidence(items, majors, paths)
    record["gpu"] = bool(evidence)
    record["gpu_evidence"] = evidence


def _listdir(path, warnings):
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            warnings.append("cannot list %s" % fileops.describe(exc))
        return []


def proxmox_node(paths):
    """This node's name, from pmxcfs's links ``lxc -> nodes/NODE/lxc`` or ``local -> nodes/NODE``."""
    for link, parts in ((paths.pve_lxc, 3), (os.path.join(paths.pve, "local"), 2)):
        try:
            target = os.readlink(link)
        except OSError:
            continue
        pieces = [p for p in target.split("/") if p]
        if len(pieces) >= parts and pieces[-parts] == "nodes":
            return pieces[-parts + 1]
    return None


def lxc_paths(paths):
    """The LXC paths to read: ``/var/lib/lxc`` and ``lxc.lxcpath`` of ``/etc/lxc/lxc.conf``."""
    found = [paths.lxc_path]
    setting = lxc_config.lxcpath_setting(fileops.read_quiet(paths.lxc_conf))
    if setting and setting.startswith("/"):
        configured = os.path.normpath(paths.under(setting))
        if configured != os.path.normpath(paths.lxc_path):
            found.append(configured)
    return found


def discover(paths=None, warnings=None):
    """Every container config of this host as a record (see RETURN of the module).

    Returns ``(records, facts)``; ``facts`` says what kind of host this is and what was read.
    """
    paths = paths or Paths()
    warnings = [] if warnings is None else warnings
    majors = nvidia_majors(paths.proc_devices)
    records = []
    ignored = []
    sources = []
    managers = []
    proxmox = os.path.isdir(paths.pve)
    node = None
    if proxmox:
        managers.append("proxmox")
        node = proxmox_node(paths)
        if os.path.isdir(paths.pve_lxc):
            sources.append(paths.pve_lxc)
            for entry in _listdir(paths.pve_lxc, warnings):
                match = _VMID_CONF.match(entry)
                if not match:
                    continue  # backups, pmxcfs temporaries, anything but <vmid>.conf
                records.append(_record("proxmox", os.path.join(paths.pve_lxc, entry), vmid=int(match.group(1))))
        elif not any(os.path.lexists(os.path.join(paths.pve, n)) for n in ("local", "nodes", ".version")):
            warnings.append("%s is empty: the Proxmox cluster filesystem is not mounted (is pve-cluster "
                            "running?), so this node's containers cannot be read" % paths.pve)
    pve_vmids = set(r["vmid"] for r in records)
    for lxc_path in lxc_paths(paths):
        if not os.path.isdir(lxc_path):
            continue
        sources.append(lxc_path)
        for entry in _listdir(lxc_path, warnings):
            config = os.path.join(lxc_path, entry, "config")
            if not os.path.isdir(os.path.join(lxc_path, entry)) or not os.path.lexists(config):
                continue
            if proxmox and _DIGITS.match(entry):
                why = ("generated by Proxmox from %s/%s.conf at each start" % (paths.pve_lxc, entry)
                       if int(entry) in pve_vmids else
                       "a Proxmox runtime directory with no %s/%s.conf on this node (the container moved "
                       "or was removed)" % (paths.pve_lxc, entry))
                ignored.append({"path": config, "reason": why})
                continue
            if not NAME_RE.match(entry):
                ignored.append({"path": config, "reason": "%r is not a valid LXC container name" % entry})
                continue
            records.append(_record("lxc", config, name=entry, lxc_path=lxc_path))
        if "lxc" not in managers:
            managers.append("lxc")
    for record in records:
        _fill(record, majors, paths)
        if record["error"]:
            warnings.append("container %s: %s" % (record["id"], record["error"]))
    facts = {
        "lxc_host": bool(managers),
        "managers": managers,
        "node": node,
        "sources": sources,
        "ignored": ignored,
        "nvidia_majors": sorted(majors),
    }
    return records, facts


def select(records, terms, excludes):
    """Mark each record ``selected`` with its ``reason``; return the terms that named nothing."""
    used = set()
    for record in records:
        if record["error"]:
            record["selected"], record["reason"] = False, record["error"]
            continue
        if record["template"]:
            record["selected"], record["reason"] = False, "a template (template: 1), not a serving container"
            continue
        excluded = [term for term in excludes if _matches(term, record)]
        if excluded:
            used.update(term.text for term in excluded)
            record["selected"], record["reason"] = False, "excluded (%s)" % ", ".join(t.text for t in excluded)
            continue
        why = []
        for term in terms:
            hit = {"gpu": record["gpu"], "all": True, "none": False}.get(term.kind)
            if hit is None:
                hit = _matches(term, record)
            if hit:
                used.add(term.text)
                why.append(_why_selected(term, record))
        record["selected"] = bool(why)
        record["reason"] = "; ".join(why) if why else _why_not(terms, record)
    return [term.text for term in list(terms) + list(excludes)
            if term.kind in ("id", "name", "tag") and term.text not in used]


def _by_id(record):
    """Proxmox containers by ID, then plain LXC ones in the order read (LXC path, then name)."""
    if record["manager"] == "proxmox":
        return (0, record["vmid"])
    return (1, 0)


def run(params, check_mode=False, paths=None, tools=None):
    """The module result: every container, and which are selected; raises ModuleFailure for a
    bad term before anything is read."""
    terms = parse_terms(params.get("select", ARGUMENT_SPEC["select"]["default"]), "select")
    excludes = parse_terms(params.get("exclude") or [], "exclude")
    warnings = []
    records, facts = discover(paths, warnings)
    records.sort(key=_by_id)
    unmatched = select(records, terms, excludes)
    selected = [r["id"] for r in records if r["selected"]]
    left_alone = [r["id"] for r in records if not r["selected"]]
    if not facts["lxc_host"]:
        msg = "not a Proxmox VE or LXC host: no /etc/pve and no LXC path"
    else:
        msg = "%d container(s) found, %d selected (%s)%s" % (
            len(records), len(selected), ", ".join(t.text for t in terms) or "none",
            "; %d excluded by %s" % (sum(1 for r in records if r["reason"].startswith("excluded")),
                                     ", ".join(t.text for t in excludes)) if excludes else "")
    result = {
        "changed": False,
        "changes": [],
        "msg": msg,
        "select": [t.text for t in terms],
        "exclude": [t.text for t in excludes],
        "containers": records,
        "selected": selected,
        "left_alone": left_alone,
        "unmatched": unmatched,
        "warnings": warnings,
    }
    result.update(facts)
    return result
