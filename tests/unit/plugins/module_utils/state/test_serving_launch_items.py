"""A crafted record cannot make tuning_revert write a unit drop-in the collection never writes.

Area serving_launch puts back ``/etc/systemd/system/<unit>.service.d/NN-gpufleet-*.conf`` and
nothing else (state/managed_paths.py), and what it puts back must read as a launch drop-in of
the collection (state/checks.py ``_launch_dropin``): the marker, then only ``[Service]``,
``ExecStart=`` and ``Environment=``. Anything more (``ExecStartPre=``, ``User=root``) would run
as root at the next start of the unit.
"""

import base64
import json
import os

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_launch as sl
from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_revert
from ansible_collections.gpufleet.tuning.plugins.module_utils import tuning_state
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import checks
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import items as state_items
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import managed_paths as mp
from ansible_collections.gpufleet.tuning.plugins.module_utils.state import store
from ansible_collections.gpufleet.tuning.tests.unit.helpers import snapshot, write_tree

DROPIN = "etc/systemd/system/vllm.service.d/90-gpufleet-launch.conf"
GENUINE = sl.render("vllm.service", ["/usr/bin/vllm", "serve", "m", "--max-num-seqs", "64", "a b"],
                    {"CUDA_VISIBLE_DEVICES": "0,1"}, "")
MARKER = "# Managed by gpufleet.tuning (serving_launch): the launch command of vllm.service.\n"


def _content(text, mode="0644"):
    return {"content_b64": base64.b64encode(text.encode()).decode(), "mode": mode,
            "uid": os.geteuid(), "gid": os.getegid()}


def _entry(target, before, area="serving_launch", **extra):
    entry = {"key": state_items.key_of("file", target), "how": "file", "target": target, "area": area,
             "reboot": False, "before": before, "after": None, "applied": True, "first_run": "r1",
             "first_time": "t", "last_run": "r1", "last_time": "t"}
    entry.update(extra)
    return entry


def _node(tmp_path, entries):
    """A fake root holding the record ``entries``; returns (Paths, state path)."""
    state = {"version": 1, "items": dict((e["key"], e) for e in entries), "runs": []}
    write_tree(tmp_path, {"var/lib/gpufleet-tuning/state.json": json.dumps(state),
                          "usr/lib/systemd/system/vllm.service": "[Service]\nExecStart=/usr/bin/vllm serve m\n"})
    return state_items.Paths(str(tmp_path)), str(tmp_path / "var/lib/gpufleet-tuning/state.json")


def test_the_rule_is_the_engines_own_file_name():
    assert mp._LAUNCH_DROPIN == sl.DROPIN_RE.pattern[2:-2]
    assert checks.target_refusal("file", "/etc/systemd/system/vllm.service.d/" + sl.DEFAULT_DROPIN,
                                 sl.AREA) is None


# ------------------------------------------------------------------------------ paths

OUTSIDE = [
    "/etc/systemd/system/vllm.service.d/50-local.conf",                  # not the collection's name
    "/etc/systemd/system/vllm.service.d/90-gpufleet-launch.conf.bak",
    "/etc/systemd/system/vllm.service.d/90-gpufleet-Launch.conf",
    "/etc/systemd/system/vllm.service.d/9-gpufleet-launch.conf",
    "/etc/systemd/system/vllm.socket.d/90-gpufleet-launch.conf",          # another unit type
    "/etc/systemd/system/vllm.d/90-gpufleet-launch.conf",
    "/etc/systemd/system/vllm.service.d/sub/90-gpufleet-launch.conf",     # deeper
    "/etc/systemd/system/vllm.service.d/../../../cron.d/90-gpufleet-launch.conf",
    "/etc/systemd/system/90-gpufleet-launch.conf",
    "/etc/systemd/system/vllm.service",                                   # the unit itself
    "/usr/lib/systemd/system/vllm.service.d/90-gpufleet-launch.conf",     # the vendor's tree
    "/run/systemd/system/vllm.service.d/90-gpufleet-launch.conf",
    "/etc/systemd/system.conf.d/90-gpufleet-launch.conf",
    "/etc/cron.d/90-gpufleet-launch.conf",
]


@pytest.mark.parametrize("path", OUTSIDE)
def test_a_path_outside_the_launch_dropins_is_refused(path):
    why = checks.refusal("file:" + path, _entry(path, _content(GENUINE)), "/")
    assert why and ("is not a file the serving_launch area writes" in why or "normalized" in why), why


@pytest.mark.parametrize("path", [
    "/etc/systemd/system/vllm.service.d/90-gpufleet-launch.conf",
    "/etc/systemd/system/serve@gpu0.service.d/90-gpufleet-launch.conf",
    "/etc/systemd/system/llama.cpp.service.d/05-gpufleet-a_b-c.conf",
])
def test_a_launch_dropin_path_with_genuine_content_is_accepted(path):
    assert checks.refusal("file:" + path, _entry(path, _content(GENUINE)), "/") is None
    assert checks.refusal("file:" + path, _entry(path, None), "/") is None  # absent before: removed


def test_another_areas_name_for_the_same_folder_is_refused():
    memlock = "/etc/systemd/system/vllm.service.d/90-gpufleet-memlock.conf"
    assert checks.refusal("file:" + memlock, _entry(memlock, None, area="container_memlock"), "/") is None
    # the launch area's rule matches the name, but container_memlock's content is not a launch drop-in
    text = "# Managed by gpufleet.tuning\n[Service]\nLimitMEMLOCK=infinity\n"
    why = checks.refusal("file:" + memlock, _entry(memlock, _content(text)), "/")
    assert why and "not a launch drop-in of the collection" in why


# ------------------------------------------------------------------------------ content

BAD_CONTENT = [
    ("ExecStartPre", MARKER + "[Service]\nExecStartPre=/bin/sh -c 'id > /tmp/x'\nExecStart=\nExecStart=/bin/x\n"),
    ("no marker", "[Service]\nExecStart=\nExecStart=/usr/bin/vllm serve m\n"),
    ("marker too late", "#\n#\n#\n#\n#\n" + MARKER + "[Service]\nExecStart=\nExecStart=/bin/x\n"),
    ("User=", MARKER + "[Service]\nExecStart=\nExecStart=/bin/x\nUser=root\n"),
    ("ExecStartPost", MARKER + "[Service]\nExecStart=/bin/x\nExecStartPost=/bin/y\n"),
    ("EnvironmentFile", MARKER + "[Service]\nExecStart=/bin/x\nEnvironmentFile=/tmp/evil\n"),
    ("another section", MARKER + "[Unit]\nOnFailure=evil.service\n[Service]\nExecStart=/bin/x\n"),
    ("continuation", MARKER + "[Service]\nExecStart=/bin/x \\\nExecStartPre=/bin/sh\n"),
    # each line alone is allowed, but systemd joins them: the next line is no line of its own
    ("continuation onto an allowed line", MARKER + "[Service]\nExecStart=\nExecStart=/bin/x \\\nEnvironment=A=1\n"),
    ("not utf-8", None),
]


@pytest.mark.parametrize("name, text", BAD_CONTENT, ids=[n for n, _t in BAD_CONTENT])
def test_content_other_than_a_launch_dropin_is_refused_at_the_right_path(name, text):
    path = "/" + DROPIN
    before = _content(text) if text is not None else dict(
        _content(""), content_b64=base64.b64encode(MARKER.encode() + b"[Service]\nExecStart=/bin/\xff\n").decode())
    why = checks.refusal("file:" + path, _entry(path, before), "/")
    assert why and why.startswith("before: ") and "not a launch drop-in of the collection" in why, why
    # the same content as what a later run found, or as the file's last content
    for extra in ({"run_before": {"run": "r2", "value": before}}, {"after_content": before}):
        why = checks.refusal("file:" + path, _entry(path, None, **extra), "/")
        assert why and "not a launch drop-in of the collection" in why, (extra, why)


def test_genuine_content_passes_all_the_value_checks():
    path = "/" + DROPIN
    entry = _entry(path, _content(GENUINE), run_before={"run": "r2", "value": _content(GENUINE)},
                   after_content=_content(GENUINE))
    assert checks.refusal("file:" + path, entry, "/") is None


# ------------------------------------------------------------------------------ on a node

def test_revert_refuses_the_crafted_items_and_puts_back_the_genuine_one(tmp_path):
    root = str(tmp_path)
    genuine = os.path.join(root, DROPIN)
    evil_pre = os.path.join(root, "etc/systemd/system/sglang.service.d/90-gpufleet-launch.conf")
    no_marker = os.path.join(root, "etc/systemd/system/llama.service.d/90-gpufleet-launch.conf")
    outside = os.path.join(root, "etc/systemd/system/vllm.service.d/10-override.conf")
    entries = {
        "genuine": _entry(genuine, _content(GENUINE)),
        "pre": _entry(evil_pre, _content(MARKER + "[Service]\nExecStartPre=/bin/sh -c id\nExecStart=/bin/x\n")),
        "marker": _entry(no_marker, _content("[Service]\nExecStart=\nExecStart=/bin/x\n")),
        "outside": _entry(outside, _content(GENUINE)),
    }
    paths, state_path = _node(tmp_path, entries.values())
    # what the node has now: the collection's current drop-ins (another command) at the two right paths
    current = GENUINE.replace("--max-num-seqs 64", "--max-num-seqs 512")
    write_tree(tmp_path, {DROPIN: current, "etc/systemd/system/sglang.service.d/90-gpufleet-launch.conf": current})
    refused_before = snapshot(tmp_path / "etc/systemd/system/sglang.service.d")

    loaded = store.load(state_path, root)
    assert sorted(loaded["refused"]) == sorted(entries[n]["key"] for n in ("pre", "marker", "outside"))

    result = tuning_revert.run({"path": state_path}, paths=paths)
    refused = dict((r["key"], r["why"]) for r in result["refused"])
    assert sorted(refused) == sorted(entries[n]["key"] for n in ("pre", "marker", "outside"))
    assert "not a launch drop-in of the collection" in refused[entries["pre"]["key"]]
    assert "not a launch drop-in of the collection" in refused[entries["marker"]["key"]]
    assert "is not a file the serving_launch area writes" in refused[entries["outside"]["key"]]
    assert [r["key"] for r in result["restored"]] == [entries["genuine"]["key"]]
    assert result["restart_units"] == ["vllm.service"]

    # the genuine one is back; the refused ones were neither written nor touched
    assert (tmp_path / DROPIN).read_text() == GENUINE
    assert snapshot(tmp_path / "etc/systemd/system/sglang.service.d") == refused_before
    assert not os.path.lexists(no_marker) and not os.path.lexists(outside)


def test_drift_skips_the_crafted_items(tmp_path):
    root = str(tmp_path)
    entry = _entry(os.path.join(root, DROPIN), _content(MARKER + "[Service]\nExecStartPre=/bin/sh\n"))
    _paths, state_path = _node(tmp_path, [entry])
    result = tuning_state.run({"path": state_path, "mode": "drift"}, paths=state_items.Paths(root))
    assert [r["key"] for r in result["refused"]] == [entry["key"]] and result["checked"] == 0
