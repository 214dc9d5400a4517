"""Reading a session across the compaction cut: archive below it, history.json above."""

import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.window import transcript as transcript_module
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


def test_a_page_ends_before_its_bytes_pass_the_limit_but_holds_one_message(world, monkeypatch):
    sessions, archive, _, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 3, size=100)
    monkeypatch.setattr(transcript_module, "PAGE_BYTES", 250)
    transcript = Transcript(sessions.store, archive)
    assert [r.id for r in transcript.page("s", 100, "").records] == [1, 2, 3, 4]  # 103 + 2 + 103 + 2 bytes
    monkeypatch.setattr(transcript_module, "PAGE_BYTES", 1)
    assert [r.id for r in transcript.page("s", 100, "").records] == [1]
    assert [r.id for r in transcript.page("s", 100, "", newest_first=True).records] == [6]


@pytest.mark.parametrize("token", ["abc", "0", "-4", "007", "1" * 30])
def test_a_page_token_the_server_did_not_give_is_refused(world, token):
    sessions, archive, _, _ = world.parts, world.archive, world, world.clock
    talk(sessions.appender, "s", 1)
    with pytest.raises(InvalidArgument) as refused:
        Transcript(sessions.store, archive).page("s", 10, token)
    assert refused.value.reason == "INVALID_PAGE_TOKEN"
