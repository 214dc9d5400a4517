"""Reading a session across the compaction cut: archive below it, history.json above."""

from memsvc.window.transcript import Transcript
from tests.support import talk


def test_messages_after_reads_across_the_compaction_cut(world):
    sessions, archive, lifecycle, _ = world
    talk(sessions, "s", 5)
    lifecycle.compact("s")
    transcript = Transcript(sessions, archive)
    assert [r.id for r in sessions.records_after("s", 0)] == [9, 10]
    assert [r.id for r in transcript.messages_after("s", 3)] == [4, 5, 6, 7, 8, 9, 10]
    assert [r.id for r in transcript.messages_after("s", 9)] == [10]
    assert transcript.messages_after("ghost", 0) == []


