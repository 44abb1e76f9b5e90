"""The serving_health engine: readiness, the wait, and its inputs."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils import serving_health as sh
from ansible_collections.gpufleet.tuning.plugins.module_utils.common.outcome import ModuleFailure
from ansible_collections.gpufleet.tuning.tests.unit import contract
from ansible_collections.gpufleet.tuning.tests.unit.serving_fake import FakeServer


def test_ready_after_loading():
    with FakeServer(ready_after=0.4, health="empty") as fake:
        result = sh.run({"url": fake.url + "/v1", "model": "fake-model", "timeout_s": 10, "interval_s": 0.1})
    contract.assert_records(result, "serving")
    assert result["ready"] and result["via"] == "/health" and result["attempts"] > 1
    assert result["url"] == fake.url and result["models"] == ["fake-model"]


def test_not_ready_in_time_fails_with_the_last_answer():
    with FakeServer(health="404", models=["a"]) as fake:
        with pytest.raises(ModuleFailure) as exc:
            sh.run({"url": fake.url, "model": "b", "timeout_s": 0.3, "interval_s": 0.1})
    assert "was not ready after 0.3 s" in exc.value.message and "not the expected model 'b'" in exc.value.message
    assert exc.value.partial["ready"] is False and exc.value.partial["models"] == ["a"]


@pytest.mark.parametrize("params, text", [
    ({"timeout_s": -1}, "timeout_s=-1 is out of range"),
    ({"interval_s": 0}, "interval_s=0 is out of range: give a finite number greater than 0"),
    ({"model": " "}, "model=' ' is empty"),
    ({"url": "http://h:0x"}, "has a port that is not a number"),
])
def test_bad_input(params, text):
    with pytest.raises(ModuleFailure) as exc:
        sh.run(dict({"url": "http://127.0.0.1:9"}, **params))
    assert text in exc.value.message
