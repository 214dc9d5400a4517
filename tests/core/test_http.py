"""Calls to HTTP providers, against a real server on loopback: what is retried,
how long it waits, and what a failure says."""

from __future__ import annotations

import socket

import pytest

from memsvc.core.errors import InvalidSetting
from memsvc.core.http import Provider, ProviderFailure
from tests.support.llm_server import Reply, error


def provider(base_url: str, key: str = "", **options) -> tuple[Provider, list[float]]:
    delays: list[float] = []
    options.setdefault("max_retries", 3)
    made = Provider(base_url, key, setting="x_base_url", timeout=options.pop("timeout", 5.0), first_backoff=0.01,
                    sleep=delays.append, **options)
    return made, delays


def test_a_url_without_a_scheme_is_a_setting_error_naming_the_setting():
    with pytest.raises(InvalidSetting, match="x_base_url must start with http"):
        Provider("localhost:1234", setting="x_base_url", timeout=1, max_retries=0)


@pytest.mark.parametrize("status, transient", [(0, True), (408, True), (429, True), (500, True), (503, True),
                                               (400, False), (401, False), (404, False), (422, False)])
def test_which_failures_are_transient(status, transient):
    assert ProviderFailure("u", status, "").transient is transient


def test_transient_answers_are_retried_with_growing_backoff_and_retry_after_wins(llm_server):
    llm_server.script("m", error(503), error(429, retry_after=0.2), error(502), "ok")
    client, delays = provider(llm_server.base_url, "sk-key")
    body = client.post_json("/chat/completions", b'{"model": "m", "messages": []}')
    assert b'"ok"' in body and len(llm_server.calls("m")) == 4
    assert delays[1] == 0.2 and 0 < delays[0] < delays[2]
    assert {call.headers["authorization"] for call in llm_server.calls("m")} == {"Bearer sk-key"}


def test_a_refusal_is_not_retried_and_carries_the_providers_message(llm_server):
    llm_server.script("m", error(400, "context too long"), "never")
    client, delays = provider(llm_server.base_url)
    with pytest.raises(ProviderFailure) as failed:
        client.post_json("/chat/completions", b'{"model": "m", "messages": []}')
    assert (failed.value.status, failed.value.detail, delays) == (400, "context too long", [])
    assert "authorization" not in llm_server.calls("m")[0].headers


def test_nothing_listening_fails_after_the_retries_as_a_transport_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client, delays = provider(f"http://127.0.0.1:{port}/v1", max_retries=2)
    with pytest.raises(ProviderFailure) as failed:
        client.post_json("/embeddings", b"{}")
    assert failed.value.status == 0 and failed.value.detail == "ConnectError" and len(delays) == 2


def test_a_slow_provider_times_out_per_call(llm_server):
    llm_server.script("m", Reply("late", delay=1.0))
    client, _ = provider(llm_server.base_url, max_retries=0)
    with pytest.raises(ProviderFailure, match="ReadTimeout"):
        client.post_json("/chat/completions", b'{"model": "m", "messages": []}', timeout=0.1)
