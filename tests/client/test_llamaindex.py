"""memsvc_client.llamaindex.MemsvcChatStore under real llama-index-core: every method and its async
twin against a real server, llama-index's own SimpleChatStore beside it as the oracle, and the
store under ChatMemoryBuffer in a SimpleChatEngine whose LLM is a real chat-completions server on
loopback (tests/support/llm_server), reached through the openai client."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    ImageBlock,
    LLMMetadata,
    TextBlock,
)
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.memory import ChatMemoryBuffer, ChatSummaryMemoryBuffer
from llama_index.core.storage.chat_store import SimpleChatStore
from openai import AsyncOpenAI, OpenAI

from memsvc_client import AsyncClient, Client, RetryPolicy
from memsvc_client.llamaindex import MemsvcChatStore
from tests.client.conftest import FRAMEWORK_SESSION_IDS

pytestmark = pytest.mark.in_process


def conversation() -> list[ChatMessage]:
    return [
        ChatMessage(role="system", content="Answer in one line."),
        ChatMessage(role="user", blocks=[TextBlock(text="What is on this picture?"),
                                         ImageBlock(image=b"\x89PNG\r\n\x1a\n\x00", image_mimetype="image/png")]),
        ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "describe", "arguments": '{"detail": 1}'}}]}),
        ChatMessage(role="tool", content="a cat on a mat", additional_kwargs={"tool_call_id": "call_1"}),
        ChatMessage(role="assistant", content="A cat sits on a mat.\nIt looks content."),
        ChatMessage(role="user", content="\u200b"),
    ]


def test_every_method_keeps_what_simple_chat_store_keeps(shared_server):
    oracle = SimpleChatStore()
    with Client(shared_server.tcp) as memory:
        store = MemsvcChatStore(memory)
        assert store.class_name() == "MemsvcChatStore"
        for kept in (oracle, store):
            assert kept.get_messages("li-sync") == []
            for message in conversation():
                kept.add_message("li-sync", message)
        assert store.get_messages("li-sync") == oracle.get_messages("li-sync") == conversation()
        assert "li-sync" in store.get_keys()
        for index in (1, -2):  # a negative index counts from the end, as list.pop's
            assert store.delete_message("li-sync", index) == oracle.delete_message("li-sync", index)
        assert store.get_messages("li-sync") == oracle.get_messages("li-sync")
        assert store.delete_message("li-sync", 40) is None and store.delete_message("li-sync", -40) is None
        assert store.delete_last_message("li-sync") == oracle.delete_last_message("li-sync")
        assert store.get_messages("li-sync") == oracle.get_messages("li-sync")
        assert store.delete_messages("li-sync") == oracle.delete_messages("li-sync")
        assert store.get_messages("li-sync") == [] and "li-sync" not in store.get_keys()
        for missing in (store.delete_messages("li-never"), store.delete_message("li-never", 0),
                        store.delete_last_message("li-never")):
            assert missing is None


def test_every_async_twin_keeps_what_simple_chat_store_keeps(shared_server):
    async def scenario() -> None:
        oracle = SimpleChatStore()
        async with AsyncClient(shared_server.tcp) as memory:
            store = MemsvcChatStore(memory)
            for kept in (oracle, store):
                assert await kept.aget_messages("li-async") == []
                for message in conversation():
                    await kept.async_add_message("li-async", message)
            assert await store.aget_messages("li-async") == conversation()
            assert "li-async" in await store.aget_keys()
            assert await store.adelete_message("li-async", 2) == await oracle.adelete_message("li-async", 2)
            assert await store.adelete_last_message("li-async") == await oracle.adelete_last_message("li-async")
            assert await store.aget_messages("li-async") == await oracle.aget_messages("li-async")
            assert await store.adelete_message("li-async", 9) is None
            assert await store.adelete_messages("li-async") == await oracle.adelete_messages("li-async")
            assert await store.aget_messages("li-async") == [] and "li-async" not in await store.aget_keys()
            assert await store.adelete_messages("li-async") is None
            assert await store.adelete_last_message("li-async") is None
            assert store.get_messages("li-async") == [], "a store made with an AsyncClient serves blocking calls too"

    asyncio.run(scenario())


def test_what_memsvc_searches_is_each_messages_text(shared_server):
    with Client(shared_server.tcp) as memory:
        store = MemsvcChatStore(memory)
        for message in conversation():
            store.add_message("li-text", message)
        listed = memory.list_messages("li-text").messages
        assert [(m.role, m.content) for m in listed] == [
            ("system", "Answer in one line."), ("user", "What is on this picture?"),
            ("assistant", "[assistant message]"), ("tool", "a cat on a mat"),
            ("assistant", "A cat sits on a mat.\nIt looks content."),
            ("user", "[user message]")]
        assert all(m.content not in m.payload_json for m in listed), "each text travels once"


def test_a_retried_write_stores_once_and_a_retried_delete_deletes_once(proxy):
    quick = RetryPolicy(attempts=3, initial_backoff=0.01, max_backoff=0.05)
    with Client(proxy.target, retry=quick) as memory:
        store = MemsvcChatStore(memory)
        proxy.lose_next_reply("Append")
        store.add_message("li-lost", ChatMessage(role="user", content="once"))
        store.add_message("li-lost", ChatMessage(role="assistant", content="twice?"))
        proxy.lose_next_reply("DeleteMessages")
        assert store.delete_last_message("li-lost") == ChatMessage(role="assistant", content="twice?")
        assert store.get_messages("li-lost") == [ChatMessage(role="user", content="once")]


def test_set_messages_replaces_the_history_in_one_step(shared_server):
    oracle = SimpleChatStore()
    with Client(shared_server.tcp) as memory:
        store = MemsvcChatStore(memory)
        for kept in (oracle, store):
            kept.add_message("li-set", ChatMessage(role="user", content="old words"))
            kept.set_messages("li-set", conversation()[:2])
        assert store.get_messages("li-set") == oracle.get_messages("li-set") == conversation()[:2]
        assert memory.search("li-set", "old", match="keyword").hits == [], "the old history is gone from search"
        store.set_messages("li-set", [])
        assert store.get_messages("li-set") == []


def test_a_retried_rewrite_is_done_once(proxy):
    quick = RetryPolicy(attempts=3, initial_backoff=0.01, max_backoff=0.05)
    with Client(proxy.target, retry=quick) as memory:
        store = MemsvcChatStore(memory)
        store.add_message("li-lost-rewrite", ChatMessage(role="user", content="first"))
        proxy.lose_next_reply("ReplaceMessages")
        store.add_message("li-lost-rewrite", ChatMessage(role="system", content="be brief"), idx=0)
        assert [m.content for m in store.get_messages("li-lost-rewrite")] == ["be brief", "first"]
        proxy.lose_next_reply("ReplaceMessages")
        store.set_messages("li-lost-rewrite", conversation()[:1])
        assert store.get_messages("li-lost-rewrite") == conversation()[:1]


def test_add_message_at_an_index_inserts_it_in_one_step(shared_server):
    async def scenario() -> None:
        async with AsyncClient(shared_server.tcp) as memory:
            store = MemsvcChatStore(memory)
            for message in conversation()[:2]:
                await store.async_add_message("li-insert", message)
            await store.async_add_message("li-insert", conversation()[4], idx=1)
            assert await store.aget_messages("li-insert") == [conversation()[0], conversation()[4],
                                                              conversation()[1]]

    asyncio.run(scenario())


class LoopbackLLM(CustomLLM):
    """A chat model served by the stand-in chat-completions server, reached with the openai client."""

    base_url: str

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="stand-in", is_chat_model=True, context_window=4096)

    @staticmethod
    def request(messages: Sequence[ChatMessage]) -> dict[str, Any]:
        return {"model": "stand-in", "messages": [{"role": m.role.value, "content": m.content} for m in messages]}

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        reply = OpenAI(base_url=self.base_url, api_key="k").chat.completions.create(**self.request(messages))
        return ChatResponse(message=ChatMessage(role="assistant", content=reply.choices[0].message.content))

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        reply = await AsyncOpenAI(base_url=self.base_url, api_key="k").chat.completions.create(
            **self.request(messages))
        return ChatResponse(message=ChatMessage(role="assistant", content=reply.choices[0].message.content))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.chat([ChatMessage(role="user", content=prompt)]).message.content or "")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt)


def test_a_chat_engine_keeps_its_memory_in_memsvc(shared_server, llm_server):
    llm_server.script("stand-in", "Billing runs on Postgres 16.", "In eu-west-1.", "Postgres, in eu-west-1.")
    llm = LoopbackLLM(base_url=llm_server.base_url)
    with Client(shared_server.tcp) as memory:
        engine = SimpleChatEngine.from_defaults(llm=llm, memory=ChatMemoryBuffer.from_defaults(
            chat_store=MemsvcChatStore(memory), chat_store_key="li-engine", token_limit=2000))
        assert str(engine.chat("What does billing run on?")) == "Billing runs on Postgres 16."

        async def second_turn() -> str:
            return str(await engine.achat("And where is it deployed?"))

        assert asyncio.run(second_turn()) == "In eu-west-1."
        assert llm_server.calls("stand-in")[1].body["messages"][-3:] == [
            {"role": "user", "content": "What does billing run on?"},
            {"role": "assistant", "content": "Billing runs on Postgres 16."},
            {"role": "user", "content": "And where is it deployed?"}]
    with Client(shared_server.unix) as restarted:  # a new client over the other transport: the same memory
        engine = SimpleChatEngine.from_defaults(llm=llm, memory=ChatMemoryBuffer.from_defaults(
            chat_store=MemsvcChatStore(restarted), chat_store_key="li-engine", token_limit=2000))
        assert [m.content for m in engine.chat_history] == [
            "What does billing run on?", "Billing runs on Postgres 16.", "And where is it deployed?", "In eu-west-1."]
        engine.chat("Summarise.")
        assert len(llm_server.calls("stand-in")[2].body["messages"]) == 5
        assert sorted(hit.message.content for hit in restarted.search("li-engine", "Postgres", match="keyword").hits) \
            == ["Billing runs on Postgres 16.", "Postgres, in eu-west-1."]
        engine.reset()
        assert engine.chat_history == [] and "li-engine" not in MemsvcChatStore(restarted).get_keys()


def test_a_summary_memory_replaces_the_older_turns_with_their_summary(shared_server, llm_server):
    llm_server.script("stand-in", "The user asked about billing twice.")
    with Client(shared_server.tcp) as memory:
        store = MemsvcChatStore(memory)
        for turn in range(4):
            store.add_message("li-summary", ChatMessage(role="user", content=f"question {turn} about billing"))
            store.add_message("li-summary", ChatMessage(role="assistant", content=f"answer {turn}"))
        buffer = ChatSummaryMemoryBuffer.from_defaults(llm=LoopbackLLM(base_url=llm_server.base_url),
                                                       chat_store=store, chat_store_key="li-summary", token_limit=12)
        kept = buffer.get()
        assert kept[0].content == "The user asked about billing twice." and store.get_messages("li-summary") == kept


@pytest.mark.parametrize("session_id", FRAMEWORK_SESSION_IDS)
def test_a_framework_users_key_works_as_written(shared_server, session_id):
    with Client(shared_server.tcp) as memory:
        store = MemsvcChatStore(memory)
        store.add_message(session_id, ChatMessage(role="user", content="hello"))
        assert store.get_messages(session_id) == [ChatMessage(role="user", content="hello")]
        assert session_id in store.get_keys()
        assert store.delete_messages(session_id) == [ChatMessage(role="user", content="hello")]
