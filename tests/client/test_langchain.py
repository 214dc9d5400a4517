"""memsvc_client.langchain.MemsvcChatMessageHistory under real langchain-core: RunnableWithMessageHistory
over langchain-core's fake chat model keeps its conversation in a real server, invoked and
ainvoked, and every kind of message comes back exactly, through the blocking and the asyncio
client. langchain-core's own InMemoryChatMessageHistory, run beside it, is the oracle of what a
history must hold."""

from __future__ import annotations

import asyncio
import json
import threading
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

from memsvc_client import AsyncClient, Client, RetryPolicy
from memsvc_client.langchain import MemsvcChatMessageHistory, to_memsvc
from tests.client.conftest import FRAMEWORK_SESSION_IDS

pytestmark = [pytest.mark.in_process,
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]  # langchain-core deprecates both classes

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
                     additional_kwargs={"channel": "web"}, name="ada", id="h-1"),
        AIMessage("", tool_calls=[call], id="run-7", response_metadata={"model_name": "m", "finish_reason": "tool"},
                  usage_metadata={"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}, name="planner"),
        ToolMessage("sunny, 21°", tool_call_id="call_1", name="get_weather", artifact={"raw": [21, "C"]}),
        AIMessageChunk("It is sunny.", id="run-8"),
        ChatMessage("Looks fine to me.", role="critic"),
        FunctionMessage("42", name="answer"),
        AIMessage("\u200b", id="run-9"),
        HumanMessage("a lone \ud800 surrogate", additional_kwargs={"score": float("nan")}),
    ]


def test_every_kind_of_message_round_trips_exactly_sync_and_async(server):
    stored = every_kind()
    with Client(server.tcp) as memory:
        history = MemsvcChatMessageHistory("kinds", memory)
        history.add_messages(stored[:3])
        history.add_message(stored[3])
        history.add_messages(stored[4:])
        read_back = history.messages
        assert read_back[:-1] == stored[:-1]
        assert read_back[-1].content == stored[-1].content and str(read_back[-1].additional_kwargs["score"]) == "nan"
        assert [(m.id, m.name) for m in read_back[1:3]] == [("h-1", "ada"), ("run-7", "planner")]
        assert read_back[2].tool_calls == stored[2].tool_calls and read_back[1].additional_kwargs == {"channel": "web"}
        listed = memory.list_messages("kinds").messages
        assert [m.role for m in listed] == ["system", "user", "assistant", "tool", "assistant", "user", "tool",
                                            "assistant", "user"]
        assert [m.content for m in listed] == [
            "Answer briefly.", "What is on this picture?", 'get_weather({"city": "Zürich"})', "sunny, 21°",
            "It is sunny.", "Looks fine to me.", "42", "[ai message]", "a lone \ufffd surrogate"]
        for message in listed:  # strict JSON, and the text is not in it twice
            json.loads(message.payload_json, parse_constant=lambda name: pytest.fail(f"{name} in the payload"))
        assert "Looks fine to me." not in listed[5].payload_json

    async def asynchronously() -> None:
        async with AsyncClient(server.tcp) as memory:
            history = MemsvcChatMessageHistory("kinds-async", memory)
            await history.aadd_messages(stored[:-1])
            assert await history.aget_messages() == stored[:-1]
            await history.aclear()
            assert await history.aget_messages() == []
            await MemsvcChatMessageHistory("never", memory).aclear()
            history.add_messages(stored[:1])  # a history made with an AsyncClient serves blocking calls too
            assert history.messages == stored[:1]

    asyncio.run(asynchronously())


class ThreadWatchingHistory(MemsvcChatMessageHistory):
    """Records which of its methods LangChain calls, and on which thread."""

    calls: list[tuple[str, int]] = []

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        self.calls.append(("messages", threading.get_ident()))
        return super().messages

    def add_messages(self, messages) -> None:
        self.calls.append(("add_messages", threading.get_ident()))
        super().add_messages(messages)

    async def aget_messages(self) -> list[BaseMessage]:
        self.calls.append(("aget_messages", threading.get_ident()))
        return await super().aget_messages()

    async def aadd_messages(self, messages) -> None:
        self.calls.append(("aadd_messages", threading.get_ident()))
        await super().aadd_messages(messages)


def test_async_runs_use_the_asyncio_client_on_the_loops_own_thread(server):
    prompts: list[PromptValue] = []

    async def scenario() -> tuple[list[BaseMessage], int]:
        async with AsyncClient(server.tcp) as memory:
            kept = conversation(lambda session_id: ThreadWatchingHistory(session_id, memory), prompts)
            for question, _ in TURNS:
                await kept.ainvoke({"question": question}, config={"configurable": {"session_id": "lc-async"}})
            return await MemsvcChatMessageHistory("lc-async", memory).aget_messages(), threading.get_ident()

    messages, loop_thread = asyncio.run(scenario())
    assert [m.content for m in messages] == [text for turn in TURNS for text in turn]
    assert [m.content for m in prompts[1].to_messages()[1:3]] == list(TURNS[0])
    assert ThreadWatchingHistory.calls == [("aget_messages", loop_thread), ("aadd_messages", loop_thread)] * 2


def test_one_history_serves_invoke_and_ainvoke_on_any_loop(server):
    oracle, memsvc_prompts, oracle_prompts = InMemoryChatMessageHistory(), [], []
    memory = AsyncClient(server.tcp)  # one client, made outside any loop
    kept = conversation(lambda session_id: MemsvcChatMessageHistory(session_id, memory), memsvc_prompts)
    beside = conversation(lambda session_id: oracle, oracle_prompts)
    config = {"configurable": {"session_id": "lc-mixed"}}
    for runnable in (kept, beside):
        runnable.invoke({"question": TURNS[0][0]}, config=config)
        asyncio.run(runnable.ainvoke({"question": TURNS[1][0]}, config=config))
    assert memsvc_prompts[1].to_messages() == oracle_prompts[1].to_messages()
    assert asyncio.run(MemsvcChatMessageHistory("lc-mixed", memory).aget_messages()) == oracle.messages
    asyncio.run(memory.close())


def test_a_retried_append_stores_each_message_once(proxy):
    with Client(proxy.target, retry=RetryPolicy(attempts=3, initial_backoff=0.01, max_backoff=0.05)) as memory:
        history = MemsvcChatMessageHistory("lc-lost", memory)
        proxy.lose_next_reply("Append")  # the server stored them; the reply is lost on its way back
        history.add_messages([HumanMessage("once"), AIMessage("only once")])
        assert history.messages == [HumanMessage("once"), AIMessage("only once")]
    assert len(proxy.seen("Append")) == 2


def test_clear_resets_the_session_and_messages_from_other_clients_read_as_their_role(server):
    with Client(server.tcp) as memory:
        memory.append("mixed", [("system", "be brief"), ("user", "hi"), ("assistant", "hello"), ("tool", "42")])
        history = MemsvcChatMessageHistory("mixed", memory)
        assert history.messages == [SystemMessage("be brief"), HumanMessage("hi"), AIMessage("hello"),
                                    ToolMessage("42", tool_call_id="")]
        history.clear()
        assert history.messages == [] and memory.search("mixed", "hello", match="keyword").hits == []
        MemsvcChatMessageHistory("never-written", memory).clear()


@pytest.mark.parametrize("session_id", FRAMEWORK_SESSION_IDS)
def test_a_framework_users_session_id_works_as_written(shared_server, session_id):
    with Client(shared_server.tcp) as memory:
        kept = conversation(lambda given: MemsvcChatMessageHistory(given, memory), [])
        kept.invoke({"question": TURNS[0][0]}, config={"configurable": {"session_id": session_id}})
        assert [m.content for m in MemsvcChatMessageHistory(session_id, memory).messages] == list(TURNS[0])


def test_what_memsvc_stores_as_content_and_a_remove_message_is_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert to_memsvc(AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "1"}]))["content"] == "f({})"
        assert to_memsvc(AIMessage([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]))["content"] == "ab"
        assert to_memsvc(HumanMessage("   "))["content"] == "[human message]"
        assert to_memsvc(ChatMessage("x", role="Developer"))["role"] == "system"
        with pytest.raises(ValueError, match="RemoveMessage"):
            to_memsvc(RemoveMessage(id="m1"))
