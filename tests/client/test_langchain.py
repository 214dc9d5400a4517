"""memsvc_client.langchain.MemsvcChatMessageHistory under real langchain-core: RunnableWithMessageHistory
over langchain-core's fake chat model keeps its conversation in a real server, and every kind of
message comes back exactly, through the blocking and the asyncio client. langchain-core's own
InMemoryChatMessageHistory, run beside it, is the oracle of what a history must hold."""

from __future__ import annotations

import asyncio
import warnings

import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from memsvc_client import AsyncClient, Client
from memsvc_client.langchain import MemsvcChatMessageHistory, text_of, to_memsvc

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # langchain-core deprecates both classes

TURNS = [("What does the billing service run on?", "Billing runs on Postgres 16."),
         ("And where is it deployed?", "In eu-west-1, on Tuesdays.")]


def conversation(history_for, prompts: list[PromptValue]) -> RunnableWithMessageHistory:
    """A prompt with the history placeholder, a step recording what the model is sent, the fake model."""
    prompt = ChatPromptTemplate.from_messages([("system", "You answer questions about our services."),
                                               MessagesPlaceholder("history"), ("human", "{question}")])
    model = GenericFakeChatModel(messages=iter([AIMessage(answer, id=f"run-{n}") for n, (_, answer) in
                                                enumerate(TURNS)]))
    chain = prompt | RunnableLambda(lambda value: prompts.append(value) or value) | model
    return RunnableWithMessageHistory(chain, history_for, input_messages_key="question",
                                      history_messages_key="history")


def test_a_two_turn_conversation_is_kept_in_memsvc_and_read_back_after_a_restart(server):
    oracle, memsvc_prompts, oracle_prompts = InMemoryChatMessageHistory(), [], []
    with Client(server.tcp) as memory:
        kept = conversation(lambda session_id: MemsvcChatMessageHistory(session_id, memory), memsvc_prompts)
        beside = conversation(lambda session_id: oracle, oracle_prompts)
        for question, answer in TURNS:
            for runnable in (kept, beside):
                reply = runnable.invoke({"question": question}, config={"configurable": {"session_id": "lc"}})
                assert reply.content == answer
    # The second turn's prompt carried the first turn, read from memsvc.
    assert memsvc_prompts[1].to_messages() == oracle_prompts[1].to_messages()
    assert [m.content for m in memsvc_prompts[1].to_messages()[1:3]] == list(TURNS[0])
    with Client(server.unix) as restarted:  # a new client, over the other transport
        read_back = MemsvcChatMessageHistory("lc", restarted).messages
        assert read_back == oracle.messages
        assert [type(m) for m in read_back] == [HumanMessage, AIMessage] * 2
        assert [m.content for m in read_back] == [text for turn in TURNS for text in turn]
        assert read_back[1].id == "run-0", "the model's message id survives"
        assert [m.content for m in restarted.get_context("lc").window] == [text for turn in TURNS for text in turn]
        assert [hit.message.content for hit in restarted.search("lc", "Postgres", match="keyword").hits] == [
            "Billing runs on Postgres 16."]


def every_kind() -> list[BaseMessage]:
    call = {"name": "get_weather", "args": {"city": "Zürich"}, "id": "call_1", "type": "tool_call"}
    return [
        SystemMessage("Answer briefly.", id="sys-1"),
        HumanMessage([{"type": "text", "text": "What is on this picture?"},
                      {"type": "image_url", "image_url": {"url": "https://example.invalid/cat.png"}}],
                     additional_kwargs={"channel": "web"}),
        AIMessage("", tool_calls=[call], id="run-7", response_metadata={"model_name": "m", "finish_reason": "tool"},
                  usage_metadata={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}),
        ToolMessage("sunny, 21°", tool_call_id="call_1", name="get_weather", artifact={"raw": [21, "C"]}),
        AIMessageChunk("It is sunny.", id="run-8"),
        ChatMessage("Looks fine to me.", role="critic"),
        FunctionMessage("42", name="answer"),
    ]


def test_every_kind_of_message_round_trips_exactly_sync_and_async(server):
    stored = every_kind()
    with Client(server.tcp) as memory:
        history = MemsvcChatMessageHistory("kinds", memory)
        history.add_messages(stored[:3])
        history.add_message(stored[3])
        history.add_messages(stored[4:])
        assert history.messages == stored
        assert [m.role for m in memory.list_messages("kinds").messages] == [
            "system", "user", "assistant", "tool", "assistant", "user", "tool"]
        assert memory.list_messages("kinds").messages[2].content == 'get_weather({"city": "Zürich"})'

    async def asynchronously() -> None:
        async with AsyncClient(server.tcp) as memory:
            history = MemsvcChatMessageHistory("kinds-async", async_client=memory)
            await history.aadd_messages(stored)
            assert await history.aget_messages() == stored
            await history.aclear()
            assert await history.aget_messages() == []
            await MemsvcChatMessageHistory("never", async_client=memory).aclear()
            with pytest.raises(RuntimeError, match="only an AsyncClient"):
                history.add_messages(stored)

    asyncio.run(asynchronously())


def test_async_runs_of_runnable_with_message_history_use_the_asyncio_client(server):
    prompts: list[PromptValue] = []

    async def scenario() -> list[BaseMessage]:
        async with AsyncClient(server.tcp) as memory:
            kept = conversation(lambda session_id: MemsvcChatMessageHistory(session_id, async_client=memory),
                                prompts)
            for question, _ in TURNS:
                await kept.ainvoke({"question": question}, config={"configurable": {"session_id": "lc-async"}})
            return await MemsvcChatMessageHistory("lc-async", async_client=memory).aget_messages()

    messages = asyncio.run(scenario())
    assert [m.content for m in messages] == [text for turn in TURNS for text in turn]
    assert [m.content for m in prompts[1].to_messages()[1:3]] == list(TURNS[0])


def test_clear_resets_the_session_and_messages_from_other_clients_read_as_their_role(server):
    with Client(server.tcp) as memory:
        memory.append("mixed", [("system", "be brief"), ("user", "hi"), ("assistant", "hello"), ("tool", "42")])
        history = MemsvcChatMessageHistory("mixed", memory)
        assert history.messages == [SystemMessage("be brief"), HumanMessage("hi"), AIMessage("hello"),
                                    ToolMessage("42", tool_call_id="")]
        history.clear()
        assert history.messages == [] and memory.search("mixed", "hello", match="keyword").hits == []
        MemsvcChatMessageHistory("never-written", memory).clear()
    with pytest.raises(TypeError):
        MemsvcChatMessageHistory("x")


def test_what_memsvc_searches_is_the_text_and_a_remove_message_is_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert text_of(AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "1"}])) == "f({})"
        assert text_of(AIMessage([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])) == "ab"
        assert text_of(HumanMessage("   ")) == "[human message]"
        assert to_memsvc(ChatMessage("x", role="Developer"))["role"] == "system"
        with pytest.raises(ValueError, match="RemoveMessage"):
            to_memsvc(RemoveMessage(id="m1"))
