"""The server's base URL, checked before anything is sent."""

import pytest

from ansible_collections.gpufleet.tuning.plugins.module_utils.serving.openai_http import Endpoint


@pytest.mark.parametrize("url, base, port", [
    ("http://127.0.0.1:8000", "http://127.0.0.1:8000", 8000),
    ("http://node1:8000/v1", "http://node1:8000", 8000),
    ("https://gateway.example/llm/v1/", "https://gateway.example/llm", 443),
    ("http://[::1]:9000", "http://[::1]:9000", 9000),
])
def test_base_urls(url, base, port):
    endpoint = Endpoint(url)
    assert endpoint.base == base and endpoint.port == port


@pytest.mark.parametrize("url, text", [
    ("ftp://host/", "is not an http:// or https:// URL with a host"),
    ("localhost:8000", "is not an http:// or https:// URL with a host"),
    ("http://host:99999", "has a port that is not a number from 1 to 65535"),
    ("http://host:8000/?x=1", "has a query or fragment"),
    ("", "is not an http:// or https:// URL"),
])
def test_bad_urls_are_refused_with_the_value(url, text):
    with pytest.raises(ValueError) as exc:
        Endpoint(url)
    assert text in str(exc.value) and repr(url) in str(exc.value)


def test_the_key_goes_in_a_bearer_header():
    assert Endpoint("http://h:1", api_key="sk-1").headers({})["Authorization"] == "Bearer sk-1"
    assert "Authorization" not in Endpoint("http://h:1").headers(None)
