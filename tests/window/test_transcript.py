"""Reading a session across the compaction cut: archive below it, history.json above."""

import pytest

from memsvc.core import replies
from memsvc.core.errors import FailedPrecondition, InvalidArgument
from memsvc.window.transcript import Transcript
from tests.support import talk


def test_messages_after_reads_across_the_compaction_cut(world):
    sessions, archive, lifecycle, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 5)
    lifecycle.compaction.compact("s")
    transcript = Transcript(sessions.store, archive)
    assert [r.id for r in sessions.store.records_after("s", 0)] == [9, 10]
    assert [r.id for r in transcript.messages_after("s", 3)] == [4, 5, 6, 7, 8, 9, 10]
    assert [r.id for r in transcript.messages_after("s", 9)] == [10]
    assert transcript.messages_after("ghost", 0) == []




def test_pages_read_every_message_across_the_cut_from_either_end(world):
    sessions, archive, lifecycle, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 5)  # ids 1-10
    lifecycle.compaction.compact("s")  # 1-8 only in the archive
    transcript = Transcript(sessions.store, archive)
    seen, token = [], ""
    while True:
        page = transcript.page("s", 3, token)
        seen.append([r.id for r in page.records])
        if not (token := page.next_token):
            break
    assert seen == [[1, 2, 3], [4, 5, 6], [7, 8, 9], [10]]
    newest = transcript.page("s", 3, "", newest_first=True)
    assert [r.id for r in newest.records] == [8, 9, 10] and newest.next_token == "8"
    assert [r.id for r in transcript.page("s", 3, "8", newest_first=True).records] == [5, 6, 7]
    assert [r.id for r in transcript.page("s", 100, "2", newest_first=True).records] == [1]
    assert transcript.page("s", 100, "", newest_first=True).next_token == ""
    assert transcript.page("ghost", 10, "").records == []


def test_a_page_ends_before_its_reply_passes_the_budget_and_a_message_too_large_alone_is_named(world):
    sessions, archive, _, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 3, size=100)
    records = sessions.store.records_after("s", 0)
    four = sum(replies.cost(record) for record in records[:4])
    transcript = Transcript(sessions.store, archive, reply_bytes=four)
    page = transcript.page("s", 100, "")
    assert [r.id for r in page.records] == [1, 2, 3, 4] and page.next_token == "4"
    assert [r.id for r in transcript.page("s", 100, "4").records] == [5, 6]
    with pytest.raises(FailedPrecondition) as refused:
        Transcript(sessions.store, archive, reply_bytes=replies.cost(records[0]) - 1).page("s", 100, "")
    assert refused.value.reason == "MESSAGE_TOO_LARGE_FOR_REPLY" and refused.value.metadata["message_id"] == "1"


@pytest.mark.parametrize("token", ["abc", "0", "-4", "007", "1" * 30])
def test_a_page_token_the_server_did_not_give_is_refused(world, token):
    sessions, archive, _, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 1)
    with pytest.raises(InvalidArgument) as refused:
        Transcript(sessions.store, archive).page("s", 10, token)
    assert refused.value.reason == "INVALID_PAGE_TOKEN"
