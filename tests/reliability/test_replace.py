"""ReplaceMessages killed (SIGKILL, at the failpoints of memsvc/core/failpoints.py) at each step: after a
restart the session holds its old history whole or its new one whole, in history.json, the archive and
the summary alike, and no intent record is left."""

from __future__ import annotations

import pytest

from memsvc_client import MemsvcError
from tests.support import wait_for
from tests.support.llm_server import summary_reply

OLD = [f"old{index}x" for index in range(6)]
NEW = ["new0x", "new1x", "new2x"]


def found(client, tokens: list[str]) -> list[int]:
    return [sum(token in hit.message.content.split()
                for hit in client.search("s", token, match="keyword", limit=32).hits)
            for token in tokens]


@pytest.mark.parametrize(("point", "done"), [
    ("durable.atomic_write.synced=kill@1", False),  # the intent's temp file written, not renamed: never recorded
    ("durable.atomic_write.renamed=kill@1", True),  # the intent recorded, nothing else changed
    ("lifecycle.replace.intended=kill@1", True),
    ("archive.cleared=kill@1", True),  # the archive's delete committed, its cutoffs not yet rewritten
    ("lifecycle.replace.derived=kill@1", True),  # every derived store cleared, history.json still the old one
    ("durable.atomic_write.renamed=kill@2", True),  # .next_id raised, history.json not yet rewritten
    ("durable.atomic_write.renamed=kill@3", True),  # history.json rewritten, the summary not yet deleted
    ("lifecycle.replace.written=kill@1", True),  # every file done, the derived stores not yet told
])
def test_a_replacement_killed_part_way_leaves_the_old_history_or_the_new_one_whole(make_server, llm_server, point,
                                                                                  done):
    llm_server.script("sum", summary_reply(["Do: keep the old"]))
    server = make_server("--max-history-messages", "2", "--llm-base-url", llm_server.base_url,
                         "--summary-model", "sum", "--llm-max-retries", "0")
    with server.client() as client:
        for token in OLD:
            client.append("s", [("user", f"about {token}"), ("assistant", "ok")])
        assert client.compact("s").removed > 0  # the oldest messages only in the archive from here
        assert client.summarize("s", timeout=30).summary is not None
        wait_for(lambda: found(client, OLD) == [1] * len(OLD))
    server.terminate()
    server.env["MEMSVC_FAILPOINTS"] = point
    server.start()
    with server.client() as client, pytest.raises(MemsvcError):
        client.replace_messages("s", [("user", f"about {token}") for token in NEW])
    server.process.wait()
    server.env.pop("MEMSVC_FAILPOINTS")
    server.start()
    with server.client() as client:
        listed = [message.content for message in client.list_messages("s").messages]
        if not done:
            assert listed == [text for token in OLD for text in (f"about {token}", "ok")]
            assert found(client, OLD + NEW) == [1] * len(OLD) + [0] * len(NEW)
            assert client.get_summary("s").summary is not None
            return
        assert listed == [f"about {token}" for token in NEW]
        assert [message.id for message in client.list_messages("s").messages] == [13, 14, 15]
        wait_for(lambda: found(client, NEW) == [1] * len(NEW))
        assert found(client, OLD) == [0] * len(OLD)
        assert client.get_summary("s").summary is None
        assert client.append("s", [("user", "after")]).messages[0].id == 16
    assert not list((server.data_dir / "sessions").glob(".intent-*"))
