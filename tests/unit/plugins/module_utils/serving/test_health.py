"""Readiness as every caller judges it: /health 200 (an empty body too), 5xx is loading, 404 or
no answer sends the probe to /v1/models, which must list the expected model."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.serving import health
from ansible_collections.gpufleet.tuning.plugins.module_utils.serving.openai_http import Endpoint
from ansible_collections.gpufleet.tuning.tests.unit.serving_fake import FakeServer


@pytest.fixture
def fake():
    with FakeServer() as server:
        yield server


def probe(server, model=None):
    return health.probe(Endpoint(server.url), model, timeout=5)


def test_health_200_is_ready_without_reading_models(fake):
    found = probe(fake)
    assert found["ready"] and found["via"] == "/health" and found["health_status"] == 200
    assert [p for _m, p, _b in fake.seen] == ["/health"]


def test_an_empty_health_body_counts(fake):
    fake.behaviour["health"] = "empty"
    found = probe(fake, "fake-model")
    assert found["ready"] and found["health_body"] == "" and found["models"] == ["fake-model"]


def test_no_health_endpoint_falls_back_to_the_model_list(fake):
    fake.behaviour["health"] = "404"
    found = probe(fake, "fake-model")
    assert found["ready"] and found["via"] == "/v1/models"


def test_a_dropped_health_connection_falls_back_too(fake):
    fake.behaviour["health"] = "close"
    assert probe(fake)["ready"]


def test_the_expected_model_must_be_listed(fake):
    fake.behaviour["health"] = "empty"
    found = probe(fake, "llama-70b")
    assert not found["ready"]
    assert found["reason"].endswith("lists fake-model, not the expected model 'llama-70b'")


def test_loading_is_not_ready_and_says_so(fake):
    fake.behaviour["ready_after"] = 60
    found = probe(fake)
    assert not found["ready"] and not found["down"]
    assert "answers HTTP 503" in found["reason"] and "Loading model" in found["reason"]


def test_an_empty_model_list_is_not_ready(fake):
    fake.behaviour.update(health="404", models=[])
    assert probe(fake)["reason"].endswith("/v1/models lists no model yet")


def test_health_200_and_no_model_list_is_taken_at_its_word(fake):
    fake.behaviour["models"] = None
    assert probe(fake, "fake-model")["ready"]


def test_nothing_listening_is_down():
    found = health.probe(Endpoint("http://127.0.0.1:9"), None, timeout=2)
    assert found["down"] and not found["ready"]
    assert found["reason"] == "nothing answers at http://127.0.0.1:9/v1/models: connection refused (is the server running?)"


def test_wait_probes_until_ready(fake):
    fake.behaviour["ready_after"] = 0.5
    found = health.wait(Endpoint(fake.url), timeout=10, interval=0.1)
    assert found["ready"] and found["attempts"] > 1


def test_wait_gives_up_with_the_last_reason(fake):
    fake.behaviour["ready_after"] = 60
    ticks = iter(range(100))
    found = health.wait(Endpoint(fake.url), timeout=3, interval=1, clock=lambda: next(ticks), sleep=lambda s: None)
    assert not found["ready"] and found["attempts"] == 3
    message = health.not_ready_message(Endpoint(fake.url), found, 3)
    assert message.startswith("the server at %s was not ready after 3 s (3 probes): " % fake.url)
