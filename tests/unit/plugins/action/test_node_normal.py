"""gpufleet.tuning.node_normal: one host judged in the controller process against its profile's
expectations and the hosts of its profile in the artifacts folder (their normal.json, read
through the folder's descriptor, never through a link); bad input named; normal.json written as
the action writes it."""

import datetime
import json
import os
from unittest import mock

import pytest

from ansible.errors import AnsibleActionFail

from ansible_collections.gpufleet.tuning.plugins.action import node_normal as action
from ansible_collections.gpufleet.tuning.plugins.action import profile_select as select_action
from ansible_collections.gpufleet.tuning.plugins.plugin_utils import artifact_files
from ansible_collections.gpufleet.tuning.tests.unit import profile_facts as pf

NOW = datetime.datetime(2026, 3, 1, 12, 30, 5, tzinfo=datetime.timezone.utc)
BENCHMARK = os.path.join(pf.REPO, "docs", "examples", "h200-serving", "benchmark.json")
PROFILE = "hgx-hopper/throughput"


def profile_of(facts=None):
    profile, _auto = select_action.choose({"host": "node-a", "facts": facts or pf.vm_h200_x2(),
                                           "profiles_dir": pf.PROFILES_DIR}, now=NOW)
    return profile


def benchmark(decode=676.63):
    with open(BENCHMARK) as handle:
        record = json.load(handle)
    record["levels"][0]["figures"]["decode_tokens_per_s"]["after"] = decode
    return record


def verify(uni=394.2, floor=337.5):
    return {"p2p": {"pairs": [{"src": 0, "dst": 1, "link": "nvlink", "unidirectional_p2p_gbps": uni,
                               "floor_unidirectional_gbps": floor, "floor_source": "NVLink 4 x 18 links x 25 GB/s x 0.75"}],
                    "bidirectional": []}}


def args(folder, **extra):
    found = {"host": "node-a", "path": str(folder), "profile": profile_of()}
    found.update(extra)
    return found


def record(host, decode, profile=PROFILE):
    return {"host": host, "profile": {"name": profile}, "normal": True,
            "figures": [{"figure": "decode_tokens_per_s", "value": decode, "unit": "tok/s", "better": "higher",
                         "source": "benchmark.json"}]}


def plant(root, folder, content):
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "normal.json").write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def run_action(task_args, check_mode=False):
    task = mock.MagicMock(args=task_args, check_mode=check_mode, diff=False, async_val=0, action="gpufleet.tuning.node_normal")
    module = action.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    return module.run(task_vars={})


# ------------------------------------------------------------------------------ judge

def test_a_normal_host_alone():
    verdict = action.judge(args("/artifacts/node-a", verify=verify(), benchmark=benchmark()), fleet={}, now=NOW)
    assert verdict["host"] == "node-a" and verdict["time"] == "2026-03-01T12:30:05Z"
    assert verdict["profile"]["name"] == PROFILE and verdict["profile"]["platform"] == "hgx-hopper"
    assert verdict["profile"]["reasons"][0] == "2 x H200 SXM 141GB, by device id 10de:2335"
    assert verdict["normal"] is True and verdict["lines"] == [] and verdict["outside"] == []
    assert [f["figure"] for f in verdict["figures"]] == ["p2p 0->1 one way", "decode_tokens_per_s", "ttft_ms_p50",
                                                         "decode_efficiency_pct"]
    assert verdict["peers"]["reason"].startswith("fewer than 3 hosts of hgx-hopper/throughput with these figures")
    assert verdict["settings"] == {"mads": 3.0, "min_peers": 3, "min_spread_pct": 2.0}
    assert {c["status"] for c in verdict["checks"]} == {"ok"}


def test_a_slow_host_among_its_peers():
    fleet = {"node-b": {"profile": PROFILE, "figures": record("node-b", 680.1)["figures"]},
             "node-c": {"profile": PROFILE, "figures": record("node-c", 671.9)["figures"]},
             "node-d": {"profile": PROFILE, "figures": record("node-d", 676.6)["figures"]},
             "node-e": {"profile": "l40s/throughput", "figures": record("node-e", 100.0)["figures"]}}
    verdict = action.judge(args("/artifacts/node-a", benchmark=benchmark(225.5)), fleet=fleet, now=NOW)
    assert verdict["normal"] is False
    assert verdict["peers"]["hosts"] == ["node-a", "node-b", "node-c", "node-d"]
    assert verdict["lines"] == ["decode_tokens_per_s: 225.5 tok/s against the median 674.2 tok/s of 4 hgx-hopper/throughput "
                                "hosts, 33.3 MADs worse (MAD 4.1; counted as 2 % of the median)"]
    assert [o["figure"] for o in verdict["peers"]["outliers"]] == ["decode_tokens_per_s"]


def test_outside_the_expectations():
    verdict = action.judge(args("/artifacts/node-a", verify=verify(uni=290.4)), fleet={}, now=NOW)
    assert verdict["normal"] is False
    assert verdict["lines"] == ["p2p_floor p2p 0->1 one way: 290.4 GB/s over nvlink, floor 337.5 "
                                "(NVLink 4 x 18 links x 25 GB/s x 0.75)"]
    assert [c["check"] for c in verdict["outside"]] == ["p2p_floor"]


def test_nothing_to_judge():
    verdict = action.judge({"host": "node-a", "path": "/artifacts/node-a"}, fleet={}, now=NOW)
    assert verdict["normal"] is None and verdict["checks"] == [] and verdict["profile"]["name"] is None
    assert verdict["peers"]["reason"] == "no profile recorded for this host"


def test_the_host_s_own_records_are_read_from_its_folder(tmp_path):
    folder = tmp_path / "node-a"
    folder.mkdir()
    (folder / "verify.json").write_text(json.dumps(verify(uni=290.4)))
    (folder / "benchmark.json").write_text(json.dumps(benchmark()))
    verdict = action.judge(args(folder), fleet={}, now=NOW)
    assert [f["figure"] for f in verdict["figures"]][:2] == ["p2p 0->1 one way", "decode_tokens_per_s"]
    assert verdict["normal"] is False
    # a record given wins over the file
    assert action.judge(args(folder, verify=verify()), fleet={}, now=NOW)["normal"] is True


def test_the_host_s_own_record_through_a_link_is_not_read(tmp_path):
    folder = tmp_path / "node-a"
    folder.mkdir()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(verify(uni=290.4)))
    os.symlink(str(elsewhere), str(folder / "verify.json"))
    (folder / "benchmark.json").write_text("not json")
    verdict = action.judge(args(folder), fleet={}, now=NOW)
    assert verdict["figures"] == []
    assert [(c["check"], c["status"]) for c in verdict["checks"] if c["check"] == "p2p_floor"] == [("p2p_floor", "unknown")]


# ------------------------------------------------------------------------------ the fleet's records

def test_fleet_records_reads_each_host_folder_but_its_own(tmp_path):
    root = tmp_path / "artifacts"
    plant(root, "node-a", record("node-a", 1.0))
    plant(root, "node-b", record("node-b", 680.1))
    plant(root, "node-c", record("node-c", 671.9, profile="l40s/throughput"))
    plant(root, "node-d", "{not json")
    plant(root, "node-e", {"host": "node-e"})  # no figures
    plant(root, "node-f", ["a", "list"])
    plant(root, ".hidden", record("hidden", 1.0))
    (root / "fleet.json").write_text(json.dumps(record("file", 1.0)))
    (root / "node-g").mkdir()
    fleet = action.fleet_records(str(root), "node-a")
    assert sorted(fleet) == ["node-b", "node-c"]
    assert fleet["node-b"] == {"profile": PROFILE, "figures": record("node-b", 680.1)["figures"]}
    assert fleet["node-c"]["profile"] == "l40s/throughput"


def test_fleet_records_keys_the_host_the_record_names(tmp_path):
    root = tmp_path / "artifacts"
    plant(root, "node%2Fb", record("node/b", 680.1))
    assert list(action.fleet_records(str(root), "node-a")) == ["node/b"]


def test_a_linked_host_folder_is_not_followed(tmp_path):
    root = tmp_path / "artifacts"
    plant(root, "node-b", record("node-b", 680.1))
    outside = plant(tmp_path / "outside", "node-x", record("node-x", 1.0))
    os.symlink(str(outside), str(root / "node-x"))
    assert sorted(action.fleet_records(str(root), "node-a")) == ["node-b"]


def test_a_linked_normal_json_is_not_followed(tmp_path):
    root = tmp_path / "artifacts"
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(record("node-x", 1.0)))
    (root / "node-x").mkdir(parents=True)
    os.symlink(str(secret), str(root / "node-x" / "normal.json"))
    plant(root, "node-b", record("node-b", 680.1))
    assert sorted(action.fleet_records(str(root), "node-a")) == ["node-b"]


def test_a_linked_artifacts_root_is_not_followed(tmp_path):
    real = tmp_path / "real"
    plant(real, "node-b", record("node-b", 680.1))
    os.symlink(str(real), str(tmp_path / "artifacts"))
    assert action.fleet_records(str(tmp_path / "artifacts"), "node-a") == {}
    assert action.fleet_records(str(real), "node-a") != {}


def test_fleet_records_of_what_is_not_a_folder(tmp_path):
    assert action.fleet_records(str(tmp_path / "missing"), "node-a") == {}
    assert action.fleet_records("relative/artifacts", "node-a") == {}
    (tmp_path / "file").write_text("x")
    assert action.fleet_records(str(tmp_path / "file"), "node-a") == {}


@pytest.mark.parametrize("figures", [
    [{"value": 1.0}],
    [{"figure": "decode_tokens_per_s"}],
    ["decode_tokens_per_s"],
    [{"figure": "decode_tokens_per_s", "value": "fast", "unit": "tok/s", "better": "higher"}],
])
def test_a_malformed_peer_record_does_not_break_the_judgement(tmp_path, figures):
    root = tmp_path / "artifacts"
    for host, decode in (("node-b", 680.1), ("node-c", 671.9)):
        plant(root, host, record(host, decode))
    plant(root, "node-x", {"host": "node-x", "profile": {"name": PROFILE}, "figures": figures})
    verdict = action.judge(args(root / "node-a", benchmark=benchmark(676.0)), now=NOW)
    assert verdict["normal"] is True
    compared = dict((c["figure"], c["hosts"]) for c in verdict["peers"]["compared"])
    assert compared == {"decode_tokens_per_s": 3}, "node-x's damaged figures are left out"


def test_judge_reads_the_peers_from_the_artifacts_folder(tmp_path):
    root = tmp_path / "artifacts"
    for host, decode in (("node-b", 680.1), ("node-c", 671.9), ("node-d", 676.6)):
        plant(root, host, record(host, decode))
    plant(root, "node-a", record("node-a", 1.0))  # its own earlier record is not a peer
    verdict = action.judge(args(root / "node-a", benchmark=benchmark(225.5)), now=NOW)
    assert verdict["peers"]["hosts"] == ["node-a", "node-b", "node-c", "node-d"]
    assert verdict["normal"] is False and len(verdict["peers"]["outliers"]) == 1
    other = tmp_path / "elsewhere" / "node-a"
    verdict = action.judge(args(other, benchmark=benchmark(225.5), artifacts=str(root)), now=NOW)
    assert verdict["peers"]["hosts"] == ["node-a", "node-b", "node-c", "node-d"]


# ------------------------------------------------------------------------------ bad input

@pytest.mark.parametrize("extra, message", [
    ({"host": ""}, "host must be the inventory name, got ''"),
    ({"host": 3}, "host must be the inventory name, got 3"),
    ({"path": "artifacts/node-a"}, "path must be the host's folder, an absolute path, got 'artifacts/node-a'"),
    ({"path": None}, "path must be the host's folder, an absolute path, got None"),
    ({"profile": "hgx-hopper"}, "profile must be the profile_select result's profile (a mapping), got str"),
    ({"profile": ["hgx-hopper"]}, "profile must be the profile_select result's profile (a mapping), got list"),
    ({"verify": ["p2p"]}, "verify must be a mapping (the record), got list"),
    ({"benchmark": "benchmark.json"}, "benchmark must be a mapping (the record), got str"),
    ({"mads": "many"}, "mads must be a number, got 'many'"),
    ({"mads": 0.1}, "mads must be a number of at least 0.5, got 0.1"),
    ({"mads": True}, "mads must be a number of at least 0.5, got True"),
    ({"mads": "nan"}, "mads must be a number of at least 0.5, got 'nan'"),
    ({"min_peers": 1}, "min_peers must be a number of at least 2, got 1"),
    ({"min_peers": [3]}, "min_peers must be a number, got [3]"),
    ({"min_spread_pct": -1}, "min_spread_pct must be a number of at least 0, got -1"),
])
def test_bad_input_is_named_and_nothing_is_written(tmp_path, extra, message):
    folder = tmp_path / "node-a"
    task_args = args(folder, **extra)
    with pytest.raises(AnsibleActionFail) as exc:
        run_action(task_args)
    assert str(exc.value) == "node_normal: " + message
    assert not folder.exists()


def test_numbers_as_text_are_read():
    verdict = action.judge(args("/artifacts/node-a", mads="4", min_peers="2.9", min_spread_pct="0"), fleet={}, now=NOW)
    assert verdict["settings"] == {"mads": 4.0, "min_peers": 2, "min_spread_pct": 0.0}


# ------------------------------------------------------------------------------ normal.json

def test_normal_json_as_the_action_writes_it(tmp_path):
    root = tmp_path / "artifacts"
    folder = root / "node-a"
    verdict = action.judge(args(folder, verify=verify(), benchmark=benchmark()), now=NOW)
    written = artifact_files.write(str(folder), {action.RECORD: json.dumps(verdict, indent=4, sort_keys=True) + "\n"},
                                   0o644, 0o755, False)
    assert written["changed"] is True and [f["name"] for f in written["files"]] == ["normal.json"]
    assert json.loads((folder / "normal.json").read_text()) == verdict
    # the next host reads it as a peer
    fleet = action.fleet_records(str(root), "node-b")
    assert fleet == {"node-a": {"profile": PROFILE, "figures": verdict["figures"]}}


def test_run_writes_normal_json_and_returns_the_verdict(tmp_path):
    folder = tmp_path / "artifacts" / "node-a"
    result = run_action(args(folder, verify=verify(uni=290.4), mode="0600"))
    assert result["changed"] is False and result["normal"] is False and result["path"] == str(folder)
    assert [f["name"] for f in result["files"]] == ["normal.json"]
    written = json.loads((folder / "normal.json").read_text())
    assert written["normal"] is False and written["host"] == "node-a" and written["lines"] == result["lines"]
    assert oct(os.stat(str(folder / "normal.json")).st_mode & 0o777) == "0o600"


def test_run_in_check_mode_writes_nothing(tmp_path):
    folder = tmp_path / "artifacts" / "node-a"
    result = run_action(args(folder, verify=verify()), check_mode=True)
    assert result["normal"] is True and not folder.exists()


def test_run_refuses_a_link_where_normal_json_goes(tmp_path):
    folder = tmp_path / "artifacts" / "node-a"
    folder.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(str(victim), str(folder / "normal.json"))
    with pytest.raises(AnsibleActionFail, match="normal.json.*symbolic link"):
        run_action(args(folder, verify=verify()))
    assert victim.read_text() == "keep"


def test_run_refuses_a_linked_host_folder(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "artifacts").mkdir()
    os.symlink(str(real), str(tmp_path / "artifacts" / "node-a"))
    with pytest.raises(AnsibleActionFail, match="symbolic link"):
        run_action(args(tmp_path / "artifacts" / "node-a", verify=verify()))
    assert os.listdir(str(real)) == []
