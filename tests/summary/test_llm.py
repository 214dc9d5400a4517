"""The chat-completions client against a real HTTP server on loopback."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

from memsvc.core import config
from memsvc.core.errors import InvalidSetting
from memsvc.core.http import Provider
from memsvc.summary import llm
from tests.support.llm_server import Reply, error

SECRET = "sk-test-never-logged-1234"


def endpoint(base_url: str, key: str = "", *, timeout: float = 120.0, max_retries: int = 3) -> llm.Endpoint:
    delays: list[float] = []
    made = llm.Endpoint(Provider(base_url, key, setting="llm_base_url", timeout=timeout, max_retries=max_retries,
                                 first_backoff=0.001, sleep=delays.append))
    made.delays = delays  # type: ignore[attr-defined]
    return made


def test_sends_model_messages_and_key_and_returns_the_reply(llm_server):
    llm_server.script("m", "hello back")
    client = endpoint(llm_server.base_url, SECRET)
    assert client.complete("m", [llm_message("system", "be brief"), llm_message("user", "hi")]) == "hello back"
    (request,) = llm_server.calls()
    assert request.path == "/v1/chat/completions"
    assert request.body == {"model": "m", "messages": [{"role": "system", "content": "be brief"},
                                                       {"role": "user", "content": "hi"}]}
    assert request.headers["authorization"] == f"Bearer {SECRET}"


def llm_message(role: str, content: str) -> llm.ChatMessage:
    return llm.ChatMessage(role, content)


def test_no_key_sends_no_authorization(llm_server):
    llm_server.script("m", "ok")
    endpoint(llm_server.base_url).complete("m", [llm_message("user", "hi")])
    assert "authorization" not in llm_server.calls()[0].headers


def test_key_comes_from_the_file_before_the_environment(tmp_path: Path):
    key_file = tmp_path / "key"
    key_file.write_text(f"  {SECRET}\n")
    with_file = config.load({"data_dir": str(tmp_path), "llm_api_key_file": str(key_file)}, environ={})
    assert llm.api_key(with_file, {llm.API_KEY_ENV: "from-env"}) == SECRET
    without = config.load({"data_dir": str(tmp_path)}, environ={})
    assert llm.api_key(without, {llm.API_KEY_ENV: " from-env "}) == "from-env"
    assert llm.api_key(without, {}) == ""
    missing = config.load({"data_dir": str(tmp_path), "llm_api_key_file": str(tmp_path / "nope")}, environ={})
    with pytest.raises(InvalidSetting, match="llm_api_key_file"):
        llm.api_key(missing, {})


def test_thinking_blocks_are_removed(llm_server):
    llm_server.script("m", "<think>let me see\nhmm</think>\n\nthe answer")
    assert endpoint(llm_server.base_url).complete("m", [llm_message("user", "q")]) == "the answer"


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_transient_statuses_are_retried_with_backoff(llm_server, status):
    llm_server.script("m", error(status), error(status), "finally")
    client = endpoint(llm_server.base_url, max_retries=3)
    assert client.complete("m", [llm_message("user", "q")]) == "finally"
    assert len(llm_server.calls()) == 3
    assert len(client.delays) == 2 and client.delays[0] < client.delays[1] * 2 + 1e-9


def test_retry_after_is_honoured(llm_server):
    llm_server.script("m", error(429, retry_after=0.25), "ok")
    client = endpoint(llm_server.base_url)
    assert client.complete("m", [llm_message("user", "q")]) == "ok"
    assert client.delays == [0.25]


def test_retries_run_out_as_unavailable(llm_server):
    llm_server.script("m", *[error(503, "overloaded")] * 3)
    with pytest.raises(llm.LLMUnavailable) as caught:
        endpoint(llm_server.base_url, max_retries=2).complete("m", [llm_message("user", "q")])
    assert len(llm_server.calls()) == 3
    assert "503" in caught.value.message and "overloaded" in caught.value.message
    assert caught.value.reason == "LLM_UNAVAILABLE"


@pytest.mark.parametrize("status, reason", [(400, "LLM_REQUEST_REJECTED"), (401, "LLM_AUTH_FAILED"),
                                            (403, "LLM_AUTH_FAILED"), (404, "LLM_NOT_FOUND"),
                                            (422, "LLM_REQUEST_REJECTED")])
def test_other_4xx_fail_at_once_with_a_precondition(llm_server, status, reason):
    llm_server.script("m", error(status, "model 'm' does not exist"), "never sent")
    with pytest.raises(llm.LLMRejected) as caught:
        endpoint(llm_server.base_url, SECRET).complete("m", [llm_message("user", "q")])
    assert len(llm_server.calls()) == 1
    assert caught.value.reason == reason and caught.value.kind.name == "FAILED_PRECONDITION"
    assert "does not exist" in caught.value.message and SECRET not in caught.value.message


def test_a_closed_port_is_unavailable_after_retries():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = endpoint(f"http://127.0.0.1:{port}/v1", max_retries=2)
    with pytest.raises(llm.LLMUnavailable, match="did not answer"):
        client.complete("m", [llm_message("user", "q")])
    assert len(client.delays) == 2


def test_a_slow_server_times_out_as_unavailable(llm_server):
    llm_server.script("m", Reply("late", delay=2.0))
    with pytest.raises(llm.LLMUnavailable, match="ReadTimeout"):
        endpoint(llm_server.base_url, timeout=0.2, max_retries=0).complete("m", [llm_message("user", "q")])


@pytest.mark.parametrize("body", [b"not json", b'{"choices": []}', b'{"choices": [{"message": {}}]}', b"[]"])
def test_a_200_that_is_not_a_completion_is_a_bad_response(llm_server, body):
    llm_server.script("m", Reply(body=body))
    with pytest.raises(llm.LLMBadResponse) as caught:
        endpoint(llm_server.base_url).complete("m", [llm_message("user", "q")])
    assert caught.value.kind.name == "INTERNAL" and caught.value.reason == "LLM_BAD_RESPONSE"


def test_the_key_never_reaches_the_log(llm_server, caplog):
    llm_server.script("m", error(503), error(401))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(llm.LLMRejected):
        endpoint(llm_server.base_url, SECRET).complete("m", [llm_message("user", "private words")])
    logged = "\n".join(f"{record.getMessage()} {vars(record)}" for record in caplog.records)
    assert "retrying" in logged
    assert SECRET not in logged and "private words" not in logged


def test_models_follow_the_settings(tmp_path: Path):
    def load(**values):
        return config.load({"data_dir": str(tmp_path), **values}, environ={})

    assert llm.models(load()) == (None, None)
    with pytest.raises(InvalidSetting, match="llm_base_url"):
        llm.models(load(summary_model="s"))
    with pytest.raises(InvalidSetting, match="http"):
        llm.models(load(summary_model="s", llm_base_url="localhost:11434"))
    summary, decision = llm.models(load(summary_model="s", llm_base_url="http://127.0.0.1:9/v1"))
    assert summary is not None and summary.name == "s" and decision is None
    summary, decision = llm.models(load(decision_model="d", llm_base_url="http://127.0.0.1:9/v1/"))
    assert summary is None and decision is not None and decision.endpoint.url == "http://127.0.0.1:9/v1/chat/completions"


def test_prompts_are_package_files_without_their_header():
    text = llm.prompt("summary.v1.md")
    assert not text.startswith("<!--") and "{{summary}}" in text and "{{language}}" in text
    assert "<summary>" in llm.fill(text, summary="{}", language="English.")
    for name in ("noise.v1.md", "relevance.v1.md"):
        assert "JSON" in llm.prompt(name)
