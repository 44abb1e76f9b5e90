"""Issue 37: serving experiments on a real model server unit (experiments.yml).

The unit's own command runs llama.cpp's server (llama-cpp-python, the tiny model) with 4 threads
on this 2-core machine. The experiments tried, in risk order: --n_threads 1 (kept, faster),
--n_threads 8 (slower, rolled back), --n_batch lots (the server refuses it: failed_start, rolled
back at once), --rope_freq_base 100 (greedy outputs change: rejected by the accuracy guard).
After each try the role read the drop-in and the unit file on the node; their sha256 must be
the expected bytes (the drop-in with the kept command, written out below by hand) and the
vendor unit's untouched. Then revert removed the drop-in and restarted the unit.
"""

import hashlib
import json
import os

import pytest

UNIT = "gpufleet-tiny-llm-exp.service"
DROPIN = "/etc/systemd/system/%s.d/90-gpufleet-launch.conf" % UNIT
VENDOR = ("/opt/gpufleet-serving/venv/bin/python -m llama_cpp.server --model /opt/gpufleet-serving/model/tiny.gguf "
          "--model_alias tiny --host 127.0.0.1 --port 8001 --n_ctx 4096 --n_threads {threads} --n_threads_batch 4 "
          "--interrupt_requests False")
# The drop-in once --n_threads 1 is kept, byte for byte.
KEPT_DROPIN = (
    "# Managed by gpufleet.tuning (serving_launch): the launch command of %s.\n"
    "# The unit file itself is untouched; remove this file (or run playbooks/revert.yml) and\n"
    "# daemon-reload to go back to its own command.\n"
    "[Service]\n"
    "ExecStart=\n"
    "ExecStart=%s\n" % (UNIT, VENDOR.format(threads=1)))


@pytest.fixture(scope="module")
def artifacts(host):
    return os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "artifacts", host.backend.get_hostname())


@pytest.fixture(scope="module")
def record(artifacts):
    with open(os.path.join(artifacts, "experiments.json")) as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def node(artifacts):
    with open(os.path.join(artifacts, "experiments-node.json")) as handle:
        return json.load(handle)


def _sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def test_the_tries_ran_in_risk_order_with_the_expected_verdicts(record):
    tried = [(c["name"], c["value"], c["status"]) for c in record["candidates"]]
    assert tried == [("threads", "1", "kept"), ("threads", "8", "rolled_back"),
                     ("batch_typo", "lots", "failed_start"), ("rope_base", "100", "rejected_accuracy")], tried
    assert record["server_kind"] == "llama_cpp_python"


def test_the_kept_try_is_faster_beyond_the_noise_and_the_slower_one_is_not(record):
    kept, slower = record["candidates"][0], record["candidates"][1]
    figure = kept["comparison"]["figure"]
    assert figure["name"] == "decode_tokens_per_s" and figure["verdict"] == "better"
    assert figure["delta_pct"] > (figure["noise_pct"] or 0)
    assert slower["comparison"]["figure"]["verdict"] == "worse", slower["comparison"]
    assert kept["accuracy"]["exact"] and kept["accuracy"]["passed"]
    assert record["final"]["value"] > record["baseline"]["value"]


def test_the_refused_value_was_rolled_back_at_once_and_the_server_came_back(record):
    failed = record["candidates"][2]
    assert failed["comparison"] is None and failed["downtime_s"]["try"] is None
    # Rolled back well before the 60 s readiness timeout: the stopped unit ended the wait.
    assert failed["downtime_s"]["rollback"] is not None and failed["downtime_s"]["rollback"] < 60
    assert "ready" in failed["reason"] and UNIT in failed["reason"], failed["reason"]


def test_the_accuracy_guard_rejected_the_numerics_change(record):
    rejected = record["candidates"][3]
    assert rejected["accuracy"]["passed"] is False and rejected["accuracy"]["divergence_pct"] > 0
    assert rejected["accuracy"]["differing_prompts"] >= 1


def test_after_each_try_the_dropin_held_the_kept_command_and_the_unit_was_untouched(record, node):
    for entry in record["candidates"]:
        assert entry["dropin_sha256"] == _sha(KEPT_DROPIN), entry["name"]
        assert entry["unit_sha256"] == node["unit_sha256_before"], entry["name"]
    assert record["after"]["argv"] == VENDOR.format(threads=1).split()
    assert record["before"]["argv"] == VENDOR.format(threads=4).split()


def test_every_restart_was_counted_and_timed(record):
    # one restart for the kept try, two for each of the three others
    assert record["restarts"] == 7
    assert [c["restarts"] for c in record["candidates"]] == [1, 2, 2, 2]
    assert record["downtime_s_total"] > 0
    assert record["kept_flags"] == [{"name": "threads", "flag": "--n_threads", "value": "1"}]


def test_the_report_page_lists_every_try(artifacts):
    with open(os.path.join(artifacts, "experiments.md")) as handle:
        page = handle.read()
    assert "4 tried, 1 kept, 1 rolled back, 1 rejected on accuracy, 1 failed to start; 7 restarts" in page
    for name in ("threads", "batch_typo", "rope_base"):
        assert name in page.replace("\\_", "_"), name


def test_revert_removed_the_dropin_and_the_unit_runs_its_own_command_again(host, node):
    assert not host.file(DROPIN).exists
    unit = host.file("/etc/systemd/system/%s" % UNIT)
    assert hashlib.sha256(unit.content).hexdigest() == node["unit_sha256_before"]
    assert host.service(UNIT).is_running
    pid = host.check_output("systemctl show -p MainPID --value %s" % UNIT).strip()
    cmdline = host.file("/proc/%s/cmdline" % pid).content.split(b"\0")
    assert b"--n_threads" in cmdline and cmdline[cmdline.index(b"--n_threads") + 1] == b"4"
    models = json.loads(host.check_output("python3 -c \"import urllib.request as u; "
                                          "print(u.urlopen('http://127.0.0.1:8001/v1/models').read().decode())\""))
    assert [m["id"] for m in models["data"]] == ["tiny"]
