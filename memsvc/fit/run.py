"""A run's messages as the stages see them: what must stay, the exchanges
that may go, and the token count.

Owns what is kept whatever happens (every system message, the latest user
message and the turn context carrying the rolling summary), the two parts
around the latest user message (the older turns before it, the run's own
tool-calling tail after it), the exchanges that are never split (an older
user turn with the replies after it; an assistant message with all its tool
results), the running token count, and the edits: dropping exchanges,
putting one message in place of several, setting the turn context. Must
never call a model: the stages do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from memsvc.fit import chat
from memsvc.fit.chat import ChatMessage
from memsvc.fit.tokens import REPLY_PRIMING, Counter

Exchange = list[int]
"Indexes into Run.messages, in order."


class Run:
    def __init__(self, messages: list[ChatMessage], counter: Counter):
        self.counter = counter
        self.messages = messages
        self.tokens = [counter.message(message) for message in messages]
        self.total = REPLY_PRIMING + sum(self.tokens)

    # -- what is what ------------------------------------------------------------

    @property
    def latest_user(self) -> int:
        """Index of the latest message the user wrote; -1 when there is none."""
        for index in range(len(self.messages) - 1, -1, -1):
            if self.messages[index].is_user_input:
                return index
        return -1

    def kept(self, index: int, latest: int) -> bool:
        message = self.messages[index]
        return index == latest or message.is_system or message.is_turn_context

    def kept_tokens(self) -> int:
        latest = self.latest_user
        return REPLY_PRIMING + sum(tokens for index, tokens in enumerate(self.tokens) if self.kept(index, latest))

    def older(self) -> list[Exchange]:
        """The turns before the latest user message: each user message with what followed it."""
        latest = self.latest_user
        return self._exchanges(range(max(latest, 0)), latest, lambda message: message.role == "user")

    def tail(self) -> list[Exchange]:
        """The run after the latest user message: each assistant (or memsvc) message with its tool results."""
        latest = self.latest_user
        return self._exchanges(range(latest + 1, len(self.messages)), latest, lambda message: not message.is_result)

    def _exchanges(self, indexes: Iterable[int], latest: int, opens: Callable[[ChatMessage], bool]) -> list[Exchange]:
        exchanges: list[Exchange] = []
        for index in indexes:
            if self.kept(index, latest):
                continue
            if not exchanges or opens(self.messages[index]):
                exchanges.append([index])
            else:
                exchanges[-1].append(index)
        return exchanges

    def cost(self, exchanges: Iterable[Exchange]) -> int:
        return sum(self.tokens[index] for exchange in exchanges for index in exchange)

    # -- edits -------------------------------------------------------------------

    def replace(self, indexes: Iterable[int], message: ChatMessage | None = None) -> int:
        """Take out the messages at `indexes`, with `message` in place of the first; returns how many went."""
        gone = set(indexes)
        if not gone:
            return 0
        first = min(gone)
        messages, tokens = [], []
        for index, (kept_message, count) in enumerate(zip(self.messages, self.tokens, strict=True)):
            if index == first and message is not None:
                messages.append(message)
                tokens.append(self.counter.message(message))
            if index not in gone:
                messages.append(kept_message)
                tokens.append(count)
        self._set(messages, tokens)
        return len(gone)

    def set_turn_context(self, text: str) -> None:
        """The turn context carries `text`: the one there is rewritten, else one goes before the latest user message."""
        found = [index for index, message in enumerate(self.messages) if message.is_turn_context]
        if found:
            index = found[-1]
            self.messages[index] = chat.new("user", text, self.messages[index])
            self.tokens[index] = self.counter.message(self.messages[index])
        else:
            latest = self.latest_user
            index = latest if latest >= 0 else sum(1 for message in self.messages if message.is_system)
            self.messages.insert(index, chat.new("user", text))
            self.tokens.insert(index, self.counter.message(self.messages[index]))
        self.total = REPLY_PRIMING + sum(self.tokens)

    def render(self, render: Callable[[list[ChatMessage]], list[ChatMessage]]) -> int:
        """Every message through `render` (one message for one); returns how many changed."""
        rendered = render(self.messages)
        changed = sum(1 for old, new in zip(self.messages, rendered, strict=True) if old is not new)
        self._set(rendered, [count if old is new else self.counter.message(new)
                             for old, new, count in zip(self.messages, rendered, self.tokens, strict=True)])
        return changed

    def _set(self, messages: list[ChatMessage], tokens: list[int]) -> None:
        self.messages, self.tokens = messages, tokens
        self.total = REPLY_PRIMING + sum(tokens)
