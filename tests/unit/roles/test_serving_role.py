"""The serving role run by ansible-playbook on this machine against the fault-injecting server:
readiness, the benchmark before and after, benchmark.md/.json on the controller with the
changes made in between, and the gate that fails the host when serving got slower.

The two phases run as two playbook runs, as an operator would run them around a change made by
hand; the after run finds the before run in benchmark-before.json."""

import json
import os
import sys

import pytest
import yaml

from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_playbook
from ansible_collections.gpufleet.tuning.tests.unit.serving_fake import FakeServer

PLAY = """
- hosts: node1
  gather_facts: false
  roles:
    - role: gpufleet.tuning.serving
      serving_phase: {phase}
"""

CHANGES = [{"area": "sysctl", "kind": "value", "target": "kernel.numa_balancing", "before": "1", "after": "0"}]


def inventory(url, artifacts, **extra):
    host = dict({"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "serving_url": url, "serving_benchmark": True, "serving_artifacts_dir": str(artifacts),
                 "serving_benchmark_concurrency": [1, 2], "serving_benchmark_requests": 3,
                 "serving_benchmark_repeats": 3, "serving_benchmark_warmup": 1,
                 "serving_benchmark_input_tokens": 16, "serving_benchmark_output_tokens": 12,
                 "serving_active_params_billion": 1.0, "serving_memory_bandwidth_gbps": 4800,
                 "host_changes": CHANGES}, **extra)
    return {"all": {"hosts": {"node1": host}}}


@pytest.fixture
def fake():
    with FakeServer(token_delay=0.004, health="empty") as server:
        yield server


def play(tmp_path, fake, phase, **extra):
    work = tmp_path / phase
    work.mkdir(exist_ok=True)
    return run_playbook(work, inventory(fake.url, tmp_path / "artifacts", **extra), PLAY.format(phase=phase))


def test_before_and_after_are_compared_on_the_controller(tmp_path, fake):
    rc, out = play(tmp_path, fake, "before")
    assert rc == 0, out
    rc, out = play(tmp_path, fake, "after", serving_max_regression_pct=50)
    assert rc == 0, out
    folder = tmp_path / "artifacts" / "node1"
    assert sorted(os.listdir(folder)) == ["benchmark-after.json", "benchmark-before.json", "benchmark.json", "benchmark.md",
                                          "normal.json"]
    report = json.loads((folder / "benchmark.json").read_text())
    assert report["comparable"] and report["host"] == "node1" and report["changes"] == CHANGES
    assert [lv["concurrency"] for lv in report["levels"]] == [1, 2]
    assert report["headline"]["before"] > 0 and report["headline"]["after"] > 0
    assert report["gate"] == {"max_regression_pct": 50.0, "figures": ["decode_tokens_per_s", "output_tokens_per_s"],
                              "failed": False, "reasons": []}
    page = (folder / "benchmark.md").read_text()
    assert page.startswith("# Inference benchmark: node1\n")
    assert "**Single-stream decode: " in page and "## Concurrency 2" in page
    assert "- sysctl value `kernel.numa_balancing`: 1 -> 0" in page
    assert "tok/s ceiling" in page  # the efficiency against 1 B x 2 bytes at 4800 GB/s


def test_the_gate_fails_the_host_when_serving_got_slower(tmp_path, fake):
    rc, out = play(tmp_path, fake, "before")
    assert rc == 0, out
    fake.behaviour["token_delay"] = 0.02  # five times slower decoding after the "tuning"
    rc, out = play(tmp_path, fake, "after", serving_max_regression_pct=10)
    assert rc != 0
    assert "Serving got slower after the tuning: concurrency 1 decode_tokens_per_s:" in out
    assert "Changes made: kernel.numa_balancing" in out
    report = json.loads((tmp_path / "artifacts" / "node1" / "benchmark.json").read_text())
    assert report["gate"]["failed"] and report["headline"]["verdict"] == "worse"


def test_a_long_sweep_says_how_far_it_got_while_it_runs(tmp_path, fake):
    """The sweep is an async job followed a line at a time: runs done of all, the repeat and
    level now; its result is kept as if the task had waited (no job keys in the JSON), and the
    progress file is gone afterwards."""
    import re
    fake.behaviour["token_delay"] = 0.05  # 12 tokens: 0.6 s a request, about 10 s the sweep
    progress = tmp_path / "bench.progress"
    rc, out = play(tmp_path, fake, "before", serving_progress_poll_s=1, serving_benchmark_progress_path=str(progress))
    assert rc == 0, out
    lines = re.findall(r"inference benchmark, phase before: (\d)/6 runs, repeat (\d) of 3 at concurrency (\d)", out)
    assert len(lines) >= 2, out
    assert all(int(done) < 6 for done, _repeat, _level in lines)
    assert [int(d) for d, _r, _l in lines] == sorted(int(d) for d, _r, _l in lines)  # it moves forward
    saved = json.loads((tmp_path / "artifacts" / "node1" / "benchmark-before.json").read_text())
    assert saved["levels"] and not {"ansible_job_id", "started", "finished", "results_file"} & set(saved)
    assert not progress.exists()


def test_a_server_that_is_not_ready_fails_the_check(tmp_path, fake):
    fake.behaviour["ready_after"] = 600
    rc, out = play(tmp_path, fake, "check", serving_ready_timeout_s=1, serving_ready_interval_s=0.5)
    assert rc != 0 and "was not ready after 1 s" in out and "HTTP 503" in out


def test_the_tune_playbook_benchmarks_around_the_tuning():
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "playbooks", "tune.yml")) as handle:
        play = yaml.safe_load(handle)[0]

    def entry(task):
        role = task.get("ansible.builtin.import_role") or task.get("ansible.builtin.include_role")
        return role["name"], (task.get("vars") or {}).get("serving_phase")
    # The audit reads first and judges the health (the gate: fail or end a sick host's play, and
    # publish its verdict), the host role tunes in a block whose always section judges the audit;
    # the serving role benchmarks before and after; the verdict is published last.
    roles = [task["block"][0] if "block" in task else task for task in play["tasks"]]
    roles = [task for task in roles if "ansible.builtin.fail" not in task and "ansible.builtin.meta" not in task]
    order = [entry(task) for task in roles]
    assert order == [("gpufleet.tuning.audit", None), ("gpufleet.tuning.audit", None),
                     ("gpufleet.tuning.health", None), ("gpufleet.tuning.serving", "before"),
                     ("gpufleet.tuning.host", None), ("gpufleet.tuning.verify", None),
                     ("gpufleet.tuning.serving", "after"), ("gpufleet.tuning.health", None)]
    assert roles[1]["ansible.builtin.import_role"]["tasks_from"] == "health_judge"
    for task in (roles[3], roles[6]):
        # Included, so that without the benchmark it is one skipped task, not every task of the role.
        assert "ansible.builtin.include_role" in task
        assert task["when"] == "gpufleet_benchmark | default(false) | bool"
        assert set(task["tags"]) == {"runtime", "serving", "benchmark"}
        assert set(task["ansible.builtin.include_role"]["apply"]["tags"]) == {"runtime", "serving", "benchmark"}


def test_the_reboot_path_uses_the_serving_role_s_readiness():
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "host", "tasks", "reboot.yml")) as handle:
        text = handle.read()
    assert "ansible.builtin.uri" not in text
    block = next(task for task in yaml.safe_load(text) if "block" in task)["block"]
    check = next(task for task in block if task["name"] == "Check the serving endpoint answers")
    assert check["ansible.builtin.include_role"]["name"] == "gpufleet.tuning.serving"
    assert check["ansible.builtin.include_role"]["tasks_from"] == "serving_health"


REBOOT_CHECK = """
- hosts: node1
  gather_facts: false
  tasks:
    - name: The reboot path's readiness check, as roles/host/tasks/reboot.yml includes it
      ansible.builtin.include_role:
        name: gpufleet.tuning.serving
        tasks_from: serving_health
      vars:
        serving_url: "{{ host_serving_url }}"
        serving_unit_host: ""
        serving_ready_timeout_s: "{{ host_serving_health_retries | int * host_serving_health_delay | int }}"
        serving_ready_interval_s: "{{ host_serving_health_delay }}"
    - name: Show how it decided
      ansible.builtin.debug:
        msg: "ready via {{ serving_health.via }} after {{ serving_health.attempts }} probes"
"""


def test_the_reboot_path_check_waits_for_a_server_that_is_still_loading(tmp_path, fake):
    """An empty /health body once loaded (vLLM's), 503 while loading: ready after some probes."""
    fake.behaviour["ready_after"] = 2.0
    inv = {"all": {"hosts": {"node1": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                       "host_serving_url": fake.url, "host_serving_health_retries": 20,
                                       "host_serving_health_delay": 1}}}}
    rc, out = run_playbook(tmp_path, inv, REBOOT_CHECK)
    assert rc == 0, out
    assert "ready via /health after" in out
    probes = [path for method, path, _body in fake.seen if path == "/health"]
    assert len(probes) >= 2
