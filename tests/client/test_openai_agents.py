"""memsvc_client.openai_agents.MemsvcSession under the real Agents SDK: `Runner.run` against a real
server, with the model API stood in by a real Responses server on loopback. The SDK's own
SQLiteSession runs the same conversation beside it as the oracle of what a session must hold."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, OpenAIResponsesModel, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.memory import Session, SessionSettings
from openai import AsyncOpenAI

from memsvc_client import AsyncClient, Client, Message
from memsvc_client.openai_agents import MemsvcSession, role_of, text_of, to_item, to_memsvc
from tests.support import wait_for
from tests.support.responses_server import ResponsesServer, function_call, message, reasoning

QUESTION = "What is the weather in Paris?"
FOLLOW_UP = "And should I take an umbrella?"


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


def agent(server: ResponsesServer) -> Agent:
    model = OpenAIResponsesModel(model="gpt-test", openai_client=AsyncOpenAI(base_url=server.base_url, api_key="k"))
    return Agent(name="weather", instructions="Answer weather questions.", model=model, tools=[get_weather])


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
            limited = MemsvcSession("agents", restarted, session_settings=SessionSettings(limit=3))
            assert await limited.get_items() == expected[-3:]
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


def test_pop_item_deletes_what_was_embedded_and_an_empty_session_pops_none(server):
    async def scenario() -> None:
        async with AsyncClient(server.tcp) as memory:
            session = MemsvcSession("short", memory)
            assert await session.pop_item() is None, "a session never written"
            await session.add_items([{"role": "user", "content": "quokka sightings on Rottnest"}])
            with Client(server.tcp) as blocking:
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


@pytest.mark.parametrize(("item", "role", "text"), [
    ({"role": "user", "content": "hi"}, "user", "hi"),
    ({"role": "developer", "content": [{"type": "input_text", "text": "be brief"}]}, "system", "be brief"),
    ({"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}, "assistant", "no"),
    ({"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a": 1}'}, "assistant", 'f({"a": 1})'),
    ({"type": "function_call_output", "call_id": "c", "output": "42"}, "tool", "42"),
    ({"type": "reasoning", "id": "rs", "summary": []}, "assistant", "[reasoning]"),
    ({"type": "computer_call_output", "call_id": "c", "output": {"type": "input_image"}}, "tool",
     "[computer_call_output]"),
])
def test_each_kind_of_item_gets_a_role_and_a_text_and_comes_back_as_it_was(item, role, text):
    assert (role_of(item), text_of(item)) == (role, text)
    stored = to_memsvc(item)
    assert json.loads(stored["payload_json"]) == item
    assert to_item(Message(role=role, content=text, payload_json=stored["payload_json"])) == item
    assert to_item(Message(role="tool", content="from another client")) == {
        "role": "user", "content": "from another client"}
