"""memsvc_client.openai_agents.MemsvcSession under the real Agents SDK: `Runner.run` and
`Runner.run_sync` against a real server, with the model API stood in by a real Responses server on
loopback. The SDK's own SQLiteSession runs the same conversation beside it as the oracle of what a
session must hold and give back."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from typing import Any

import grpc
import pytest
from agents import (
    Agent,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import Session, SessionSettings
from openai import AsyncOpenAI

from memsvc_client import AsyncClient, Client, Message, ResourceExhaustedError, RetryPolicy
from memsvc_client.openai_agents import MemsvcSession, role_of, text_of, to_item, to_memsvc
from tests.client.conftest import FRAMEWORK_SESSION_IDS
from tests.support import wait_for
from tests.support.responses_server import ResponsesServer, function_call, message, reasoning

pytestmark = pytest.mark.in_process

QUESTION = "What is the weather in Paris?"
FOLLOW_UP = "And should I take an umbrella?"
QUICK = RetryPolicy(attempts=3, initial_backoff=0.01, max_backoff=0.05)


@pytest.fixture(autouse=True)
def no_tracing():
    set_tracing_disabled(True)  # the SDK would export traces to OpenAI's servers
    yield
    set_tracing_disabled(False)


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny and 21 degrees in {city}"


def weather_script(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A tool call first; once its output is in the input, an answer (one per question asked)."""
    items = body["input"] if isinstance(body["input"], list) else [{"role": "user", "content": body["input"]}]
    questions = sum(1 for item in items if item.get("role") == "user")
    answered = sum(1 for item in items if item.get("type") == "function_call_output")
    if answered < questions:
        return [reasoning(f"need the weather, question {questions}", f"rs_{questions}"),
                function_call("get_weather", {"city": "Paris"}, f"call_{questions}", f"fc_{questions}")]
    return [message("It is sunny and 21 degrees in Paris." if questions == 1 else "No umbrella needed.",
                    f"msg_{questions}")]


def agent(server: ResponsesServer, tools: list | None = None) -> Agent:
    model = OpenAIResponsesModel(model="gpt-test", openai_client=AsyncOpenAI(base_url=server.base_url, api_key="k"))
    return Agent(name="weather", instructions="Answer weather questions.", model=model,
                 tools=[get_weather] if tools is None else tools)


def same_json(left: object, right: object) -> bool:
    """Equal as JSON: NaN equals NaN here, as SQLiteSession's json.dumps/json.loads keep it."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def test_a_run_with_a_tool_call_stores_and_reloads_every_item_exactly(server, responses_server, tmp_path):
    responses_server.script = weather_script

    async def scenario() -> None:
        oracle = SQLiteSession("agents", tmp_path / "oracle.sqlite3")
        async with AsyncClient(server.tcp) as memory:
            session = MemsvcSession("agents", memory)
            assert isinstance(session, Session), "the SDK's Session protocol"
            for kept in (oracle, session):
                result = await Runner.run(agent(responses_server), QUESTION, session=kept)
                assert result.final_output == "It is sunny and 21 degrees in Paris."
            expected = await oracle.get_items()
            assert [item.get("type", "message") for item in expected] == [
                "message", "reasoning", "function_call", "function_call_output", "message"]
            assert await session.get_items() == expected
        async with AsyncClient(server.unix) as restarted:  # a new client, over the other transport
            reloaded = MemsvcSession("agents", restarted)
            assert await reloaded.get_items() == expected
            assert await reloaded.get_items(limit=2) == expected[-2:]
            assert await reloaded.get_items(limit=0) == [] and await reloaded.get_items(limit=-1) == expected
            assert await reloaded.get_items(limit=50) == expected
            # The next run sends the reloaded history to the model exactly as the SDK's own session does.
            sent = len(responses_server.requests)
            await Runner.run(agent(responses_server), FOLLOW_UP, session=oracle)
            await Runner.run(agent(responses_server), FOLLOW_UP, session=reloaded)
            by_oracle, by_memsvc = responses_server.requests[sent:sent + 2], responses_server.requests[sent + 2:]
            assert [body["input"] for body in by_memsvc] == [body["input"] for body in by_oracle]
            assert by_memsvc[0]["input"][:5] == expected
            assert await reloaded.get_items() == await oracle.get_items()
        oracle.close()

    asyncio.run(scenario())
    with Client(server.tcp) as memory:  # what memsvc searches: each item's text, once
        stored = memory.list_messages("agents").messages
        assert [(m.role, m.content) for m in stored[:5]] == [
            ("user", QUESTION), ("assistant", "need the weather, question 1"),
            ("assistant", 'get_weather({"city": "Paris"})'), ("tool", "sunny and 21 degrees in Paris"),
            ("assistant", "It is sunny and 21 degrees in Paris.")]
        assert all(m.content not in m.payload_json for m in stored), "the text travels in content only"


def test_one_session_serves_runs_on_any_event_loop_and_thread(shared_server, responses_server, tmp_path):
    responses_server.script = weather_script
    oracle = SQLiteSession("any-loop", tmp_path / "oracle.sqlite3")
    memory = AsyncClient(shared_server.tcp)  # made outside any loop, as a session's owner often does
    session = MemsvcSession("any-loop", memory)
    for kept in (oracle, session):
        assert Runner.run_sync(agent(responses_server), QUESTION, session=kept).final_output.startswith("It is sunny")
        asyncio.run(Runner.run(agent(responses_server), FOLLOW_UP, session=kept))  # another loop, the same session
    assert asyncio.run(session.get_items()) == asyncio.run(oracle.get_items())

    def in_a_worker_thread(number: int) -> list:
        threaded = MemsvcSession(f"any-loop-{number}", memory)
        Runner.run_sync(agent(responses_server), QUESTION, session=threaded)
        return asyncio.run(threaded.get_items())

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:  # four loops at once
        histories = list(pool.map(in_a_worker_thread, range(4)))
    assert [[item.get("type", "message") for item in history] for history in histories] == [
        ["message", "reasoning", "function_call", "function_call_output", "message"]] * 4
    asyncio.run(memory.close())
    oracle.close()


def test_session_settings_are_taken_as_the_sdks_own_sessions_take_them(shared_server, responses_server, tmp_path):
    with Client(shared_server.tcp) as memory:
        assert MemsvcSession("settings", memory).session_settings == SessionSettings()
        assert MemsvcSession("settings", memory, session_settings={"limit": 2}).session_settings == \
            SessionSettings(limit=2)
        with pytest.raises(TypeError, match="limitt"):
            MemsvcSession("settings", memory, session_settings={"limitt": 1})
        responses_server.script = lambda body: [message("noted", "msg_1")]
        oracle = SQLiteSession("settings", tmp_path / "oracle.sqlite3", session_settings={"limit": 2})
        session = MemsvcSession("settings", memory, session_settings={"limit": 2})
        for kept in (oracle, session):
            for turn in range(3):
                Runner.run_sync(agent(responses_server, tools=[]), f"turn {turn}", session=kept)
            asyncio.run(kept.add_items([{"role": "user", "content": "direct"}]))
        assert asyncio.run(session.get_items()) == asyncio.run(oracle.get_items()) == [
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "noted", "annotations": [], "logprobs": []}]},
            {"role": "user", "content": "direct"}]
        assert len(asyncio.run(session.get_items(limit=-1))) == 7
        # A run's settings override the session's: the model sees the newest item only.
        sent = len(responses_server.requests)
        override = RunConfig(session_settings=SessionSettings(limit=1))
        for kept in (oracle, session):
            Runner.run_sync(agent(responses_server, tools=[]), "last turn", session=kept, run_config=override)
        by_oracle, by_memsvc = responses_server.requests[sent:]
        assert by_memsvc["input"] == by_oracle["input"] and len(by_memsvc["input"]) == 2
        oracle.close()


def test_a_closed_session_refuses_every_call_as_a_closed_sqlite_session_does(shared_server, tmp_path):
    calls = [lambda kept: kept.get_items(), lambda kept: kept.add_items([]), lambda kept: kept.pop_item(),
             lambda kept: kept.clear_session()]  # an empty add_items too: no fast path around the check
    with Client(shared_server.tcp) as memory:
        oracle = SQLiteSession("closed", tmp_path / "oracle.sqlite3")
        session = MemsvcSession("closed", memory)
        for kept in (oracle, session):
            asyncio.run(kept.add_items([{"role": "user", "content": "before close"}]))
            kept.close()
            for call in calls:
                with pytest.raises(RuntimeError, match="is closed"):
                    asyncio.run(call(kept))
        assert [m.content for m in memory.list_messages("closed").messages] == ["before close"]
        reopened = MemsvcSession("closed", memory)  # closing ends one object's use, not the session's data
        assert asyncio.run(reopened.get_items()) == [{"role": "user", "content": "before close"}]


ODD_ITEMS: list[dict[str, Any]] = [
    {"role": "assistant", "content": "\u200b"},
    {"role": "user", "content": "\x00"},
    {"role": "user", "content": "\ufeff"},
    {"type": "function_call_output", "call_id": "c1", "output": "\u200d"},
    {"role": "user", "content": "a lone \ud800 surrogate", "note": "\udfff"},
    {"role": "user", "content": "numbers", "scores": [float("nan"), float("inf"), -float("inf"), 1.5]},
    {"type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "two\nlines", "annotations": []},
                 {"type": "output_text", "text": "\r\n and spaces ", "annotations": []}]},
    {"type": "function_call", "call_id": "c2", "name": "lookup", "arguments": '{"q": "東京"}'},
    {"role": "user", "content": "日本語のテキスト" * 3},
    {"type": "reasoning", "id": "rs", "summary": []},
    {"role": "user", "content": [{"type": "input_text", "text": "what is this?"},
                                 {"type": "input_image", "image_url": "data:image/png;base64," + "iVBORw0KGgo" * 8}]},
]


def test_every_item_sqlite_stores_memsvc_stores_and_gives_back_json_equal(shared_server):
    async def scenario() -> tuple[list, list]:
        oracle = SQLiteSession("odd")
        session = MemsvcSession("odd", AsyncClient(shared_server.tcp))
        for kept in (oracle, session):
            await kept.add_items(ODD_ITEMS)
        return await session.get_items(), await oracle.get_items()

    stored, expected = asyncio.run(scenario())
    assert len(stored) == len(expected) == len(ODD_ITEMS)
    for got, want in zip(stored, expected, strict=True):
        assert same_json(got, want), (got, want)
    with Client(shared_server.tcp) as memory:
        messages = memory.list_messages("odd").messages
    # Text with nothing visible is kept whole in the payload; content shows the item's type instead.
    assert [m.content for m in messages[:4]] == ["[message]", "[message]", "[message]", "[function_call_output]"]
    assert messages[4].content == "a lone \ufffd surrogate", "searchable, the surrogate replaced"
    assert messages[6].content == "two\nlines\n\r\n and spaces "
    assert messages[7].content == 'lookup({"q": "東京"})'
    assert messages[9].content == "[reasoning]" and messages[10].content == "what is this?"
    for stored_message in messages:  # strict JSON: no NaN, no Infinity, no lone surrogate escapes
        json.loads(stored_message.payload_json, parse_constant=lambda name: pytest.fail(f"{name} in the payload"))
        stored_message.payload_json.encode("utf-8")


def test_a_runs_invisible_reply_is_stored_as_sqlite_stores_it(shared_server, responses_server, tmp_path):
    responses_server.script = lambda body: [message("\u200b", "msg_zw")]
    oracle = SQLiteSession("zero-width", tmp_path / "oracle.sqlite3")
    session = MemsvcSession("zero-width", Client(shared_server.tcp))
    for kept in (oracle, session):
        assert Runner.run_sync(agent(responses_server, tools=[]), "say nothing", session=kept).final_output == "\u200b"
    assert asyncio.run(session.get_items()) == asyncio.run(oracle.get_items())
    oracle.close()


def test_sizes_are_utf8_and_each_text_travels_once(server):  # a server of its own: megabytes to index
    japanese = "東京の天気は晴れです。" * 16_400  # 541,200 bytes of UTF-8: 6 times that as ASCII escapes
    items = [{"role": "user", "content": japanese},
             {"type": "function_call_output", "call_id": "c", "output": "中文输出" * 52_500}]  # 630,000 bytes
    with Client(server.tcp, timeout=60) as memory:
        session = MemsvcSession("sizes", memory)
        asyncio.run(session.add_items(items))
        assert asyncio.run(session.get_items()) == items
        stored = memory.list_messages("sizes").messages
        assert [len(m.content.encode()) for m in stored] == [541_200, 630_000]
        assert all(len(m.payload_json.encode()) < 200 for m in stored), "the payload holds the item less its text"
        # Eight 900 KB items fit one request because each text travels once (twice, they took 14.4 MB).
        batch = [{"role": "user", "content": f"{n}" + "x" * 900_000} for n in range(8)]
        asyncio.run(MemsvcSession("batch", memory).add_items(batch))
        assert asyncio.run(MemsvcSession("batch", memory).get_items(limit=1)) == batch[-1:]


def test_a_batch_larger_than_one_request_is_refused_whole_with_a_clear_error(server):
    items = [{"role": "user", "content": f"{n}" + "y" * 900_000} for n in range(10)]  # 9 MB > 8 MiB
    with Client(server.tcp, timeout=60) as memory:
        session = MemsvcSession("too-big", memory)
        asyncio.run(session.add_items(items[:1]))
        with pytest.raises(ResourceExhaustedError) as refused:
            asyncio.run(session.add_items(items))
        assert refused.value.reason == "REQUEST_TOO_LARGE" and "max_request_bytes" in refused.value.message
        assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert asyncio.run(session.get_items()) == items[:1], "nothing of the batch was stored"


def test_writes_survive_lost_replies_without_duplicates(proxy):
    async def scenario() -> None:
        async with AsyncClient(proxy.target, retry=QUICK) as memory:
            session = MemsvcSession("lost", memory)
            proxy.lose_next_reply("Append")  # stored by the server, the reply lost: the retry replays it
            await session.add_items([{"role": "user", "content": "once"}, {"role": "assistant", "content": "only"}])
            assert await session.get_items() == [{"role": "user", "content": "once"},
                                                 {"role": "assistant", "content": "only"}]
            proxy.lose_next_reply("DeleteMessages")  # the pop happened, its reply lost: no second item goes
            assert await session.pop_item() == {"role": "assistant", "content": "only"}
            assert await session.get_items() == [{"role": "user", "content": "once"}]

    asyncio.run(scenario())
    appends = proxy.seen("Append")
    assert len(appends) == 2 and appends[0].request == appends[1].request, "the retry sent the same key"


def test_concurrent_pops_each_return_one_item_once(shared_server):
    items = [{"role": "user", "content": f"item {n}"} for n in range(12)]

    async def scenario() -> list:
        async with AsyncClient(shared_server.tcp) as memory:
            session = MemsvcSession("pops", memory)
            await session.add_items(items)
            popped = await asyncio.gather(*(MemsvcSession("pops", memory).pop_item() for _ in range(14)))
            assert await session.get_items() == []
            return popped

    popped = asyncio.run(scenario())
    assert sorted((item for item in popped if item is not None), key=lambda item: int(item["content"][5:])) == items
    assert popped.count(None) == 2


def test_pop_item_removes_the_last_item_from_every_tier(server, responses_server, tmp_path):
    responses_server.script = weather_script
    answer = "It is sunny and 21 degrees in Paris."

    async def scenario() -> tuple[dict, dict]:
        oracle = SQLiteSession("popped", tmp_path / "oracle.sqlite3")
        async with AsyncClient(server.tcp) as memory:
            session = MemsvcSession("popped", memory)
            for kept in (oracle, session):
                await Runner.run(agent(responses_server), QUESTION, session=kept)
            while (await memory.search("popped", answer, include_window=True)).unsearched:
                await asyncio.sleep(0.05)  # every item embedded: the vector tier holds the answer too
            last = await session.pop_item()
            assert last == await oracle.pop_item()
            assert await session.get_items() == await oracle.get_items()
            oracle.close()
            return last, (await session.get_items())[-1]

    popped, now_last = asyncio.run(scenario())
    assert popped["type"] == "message" and popped["content"][0]["text"] == answer
    assert now_last["type"] == "function_call_output"
    with Client(server.tcp) as memory:
        assert [m.content for m in memory.list_messages("popped").messages][-1] == "sunny and 21 degrees in Paris"
        assert answer not in [m.content for m in memory.get_context("popped").window]
        assert answer not in [hit.message.content for hit in memory.search("popped", "sunny Paris", match="keyword",
                                                                            limit=32).hits]
        best = [hit.message.content for hit in memory.search("popped", answer, limit=1, include_window=True).hits
                if not hit.is_context]
        assert best and best != [answer], "no vector of the popped item is searched"


def test_pop_item_deletes_what_was_embedded_and_an_empty_session_pops_none(shared_server):
    async def scenario() -> None:
        async with AsyncClient(shared_server.tcp) as memory:
            session = MemsvcSession("short", memory)
            assert await session.pop_item() is None, "a session never written"
            assert await session.get_items() == []
            await session.add_items([{"role": "user", "content": "quokka sightings on Rottnest"}])
            with Client(shared_server.tcp) as blocking:
                wait_for(lambda: blocking.search("short", "quokka", include_window=True).unsearched == 0)
            assert await session.pop_item() == {"role": "user", "content": "quokka sightings on Rottnest"}
            assert await session.pop_item() is None
            assert (await memory.search("short", "quokka", include_window=True)).hits == []
            assert (await memory.search("short", "quokka", match="keyword")).hits == []
            await session.add_items([{"role": "user", "content": "again"}])
            await session.clear_session()
            assert await session.get_items() == []
            await MemsvcSession("never", memory).clear_session()

    asyncio.run(scenario())


@pytest.mark.parametrize("session_id", FRAMEWORK_SESSION_IDS)
def test_a_framework_users_session_id_works_as_written(shared_server, session_id):
    async def scenario() -> None:
        async with AsyncClient(shared_server.tcp) as memory:
            session = MemsvcSession(session_id, memory)
            await session.add_items([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}])
            assert await session.pop_item() == {"role": "assistant", "content": "hi"}
            assert await session.get_items() == [{"role": "user", "content": "hello"}]
            await session.clear_session()
            assert await session.get_items() == []

    asyncio.run(scenario())


@pytest.mark.parametrize(("item", "role", "content"), [
    ({"role": "user", "content": "hi"}, "user", "hi"),
    ({"role": "developer", "content": [{"type": "input_text", "text": "be brief"}]}, "system", "be brief"),
    ({"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}, "assistant", "no"),
    ({"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a": 1}'}, "assistant", 'f({"a": 1})'),
    ({"type": "custom_tool_call", "call_id": "c", "name": "sh", "input": "ls"}, "assistant", "sh(ls)"),
    ({"type": "function_call_output", "call_id": "c", "output": "42"}, "tool", "42"),
    ({"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "a"},
                                                                 {"type": "input_text", "text": "b"}]}, "tool", "a\nb"),
    ({"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "hmm"}]}, "assistant", "hmm"),
    ({"type": "reasoning", "id": "rs", "summary": []}, "assistant", "[reasoning]"),
    ({"type": "computer_call_output", "call_id": "c", "output": {"type": "input_image"}}, "tool",
     "[computer_call_output]"),
])
def test_each_kind_of_item_gets_a_role_and_a_text_and_comes_back_as_it_was(item, role, content):
    assert role_of(item) == role
    stored = to_memsvc(item)
    assert stored["content"] == content and "".join(text for text, _ in text_of(item)) in (content, "")
    assert to_item(Message(role=role, content=stored["content"], payload_json=stored["payload_json"])) == item
    assert to_item(Message(role="tool", content="from another client")) == {
        "role": "user", "content": "from another client"}
    # A payload written before the envelope (the item itself) still reads back.
    assert to_item(Message(role=role, content=content, payload_json=json.dumps(item))) == item
