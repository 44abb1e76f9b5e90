"""Issue 19: a real model server as the container's serving unit, checked by the serving role,
with the inference benchmark before the tuning (prepare_serving.yml) and after it
(serving.yml), compared in benchmark.json and benchmark.md.

The server is llama.cpp's (llama-cpp-python) with a tiny random-weight model; the benchmark
ran inside the container (the module on the node), over the container's loopback.
"""

import json
import os

import pytest

UNIT = "gpufleet-tiny-llm.service"


@pytest.fixture(scope="module")
def artifacts(host):
    return os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "artifacts", host.backend.get_hostname())


@pytest.fixture(scope="module")
def report(artifacts):
    with open(os.path.join(artifacts, "benchmark.json")) as handle:
        return json.load(handle)


def test_the_serving_unit_runs_in_the_container(host):
    assert host.service(UNIT).is_running
    models = json.loads(host.check_output("python3 -c \"import urllib.request as u; "
                                          "print(u.urlopen('http://127.0.0.1:8000/v1/models').read().decode())\""))
    assert [m["id"] for m in models["data"]] == ["tiny"]


def test_both_runs_and_the_report_are_on_the_controller(artifacts):
    # (the audit of audit.yml writes its own files beside them)
    assert {"benchmark-after.json", "benchmark-before.json", "benchmark.json", "benchmark.md"} <= set(os.listdir(artifacts))


def test_before_and_after_measured_the_same_load(report):
    assert report["comparable"] and report["differences"] == []
    assert report["model"] == "tiny" and report["host"] == "gpufleet-serving"
    assert [level["concurrency"] for level in report["levels"]] == [1, 2]
    head = report["headline"]
    assert head["before"] > 0 and head["after"] > 0
    assert head["verdict"] in ("better", "worse", "no measurable change")
    assert head["noise_pct"] is not None


@pytest.mark.parametrize("phase", ["before", "after"])
def test_each_run_streamed_exactly_the_tokens_asked(artifacts, phase):
    with open(os.path.join(artifacts, "benchmark-%s.json" % phase)) as handle:
        run = json.load(handle)
    assert run["tokens"]["short_outputs"] == 0 and run["tokens"]["output_tokens_asked"] == 32
    # llama-cpp-python sends no usage in a stream: the count is of the events streamed.
    assert run["tokens"]["counted_by"] == "streamed events (the server sent no usage)"
    # Its tokenizer endpoint corrected the prompt length.
    assert run["input"]["counted_by"] == "server /extras/tokenize" and abs(run["input"]["tokens_measured"] - 32) <= 3
    assert run["efficiency"]["percent"] > 0


def test_the_tuning_in_between_is_named(report, artifacts):
    targets = [change["target"] for change in report["changes"]]
    assert targets, "the first converge changed the container, so the report lists changes"
    with open(os.path.join(artifacts, "benchmark.md")) as handle:
        page = handle.read()
    assert "## Tuning changes between the two runs" in page and targets[0] in page
    assert "**Single-stream decode: " in page
