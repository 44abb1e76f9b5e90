"""inference_benchmark and serving_health as modules: their engines' shells, read-only in check
mode, failures as fail_json with what was learnt."""

from ansible_collections.gpufleet.tuning.plugins.module_utils import inference_benchmark as ib
from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_health as sh
from ansible_collections.gpufleet.tuning.plugins.modules import inference_benchmark, serving_health
from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit.helpers import run_module
from ansible_collections.gpufleet.tuning.tests.unit.serving_fake import FakeServer


def test_the_modules_are_their_engines_shells(monkeypatch):
    contract.assert_module_is_its_engines_shell(inference_benchmark, ib, monkeypatch)
    contract.assert_module_is_its_engines_shell(serving_health, sh, monkeypatch)


def test_benchmark_in_check_mode(capsys):
    with FakeServer() as fake:
        failed, result = run_module(inference_benchmark, {"url": fake.url, "output_tokens": 4, "requests": 2,
                                                          "repeats": 1, "warmup": 0, "api_key": "sk-secret"},
                                    capsys, check_mode=True)
    assert not failed and result["changed"] is False and result["changes"] == []
    assert result["single_stream"]["decode_tokens_per_s"]["median"] > 0
    assert "sk-secret" not in str(result)


def test_benchmark_failure_keeps_the_partial_result(capsys):
    with FakeServer(stream="cut") as fake:
        failed, result = run_module(inference_benchmark, {"url": fake.url, "output_tokens": 8, "requests": 1,
                                                          "repeats": 1, "warmup": 0}, capsys)
    assert failed and "the stream was cut" in result["msg"]
    assert result["errors"][0]["kind"] == "cut" and "changes" not in result


def test_health_module(capsys):
    with FakeServer(health="empty") as fake:
        failed, result = run_module(serving_health, {"url": fake.url, "model": "fake-model"}, capsys)
    assert not failed and result["ready"] and result["via"] == "/health"
    failed, result = run_module(serving_health, {"url": "http://127.0.0.1:9", "timeout_s": 0}, capsys)
    assert failed and "is down after 0 s" in result["msg"]
