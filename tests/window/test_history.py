from pathlib import Path

import msgspec
import pytest

from memsvc.core.records import Record
from memsvc.window import history


def records(count: int, start: int = 1) -> list[Record]:
    return [Record(id=i, role="user" if i % 2 else "assistant", content=f"message {i} \u6c99\u76d2", send_at=i)
            for i in range(start, start + count)]


def test_appends_build_a_valid_json_array(tmp_path: Path):
    path = tmp_path / "history.json"
    size = 0
    for batch in (records(1), records(3, start=2), records(1, start=5)):
        size = history.append(path, size, batch)
    assert size == path.stat().st_size
    assert [r["id"] for r in msgspec.json.decode(path.read_bytes())] == [1, 2, 3, 4, 5]
    assert history.load(path).records == records(5)


def test_append_writes_only_past_the_old_closing_bracket(tmp_path: Path):
    path = tmp_path / "history.json"
    size = history.rewrite(path, records(200))
    before = path.read_bytes()
    history.append(path, size, records(1, start=201))
    assert path.read_bytes()[: size - len(history.CLOSING)] == before[: size - len(history.CLOSING)]


@pytest.mark.parametrize("batch_size", [1, 3])
def test_every_torn_append_is_repaired_keeping_every_complete_one(tmp_path: Path, batch_size: int):
    path = tmp_path / "history.json"
    size = history.rewrite(path, records(4))
    clean = path.read_bytes()
    history.append(path, size, records(batch_size, start=5))
    full = path.read_bytes()
    written = full[size - len(history.CLOSING):]
    for cut in range(len(written)):
        # A crash mid-write: the new bytes land partly over the old closing bracket.
        torn = bytearray(clean)
        torn[size - len(history.CLOSING):size - len(history.CLOSING) + cut] = written[:cut]
        path.write_bytes(bytes(torn))
        loaded = history.load(path)
        complete = cut >= len(written) - len(history.CLOSING)
        expected = records(4) + (records(batch_size, start=5) if complete else [])
        assert loaded.records == expected, cut
        assert history.load(path).records == expected  # the repair itself is durable and stable
        for leftover in tmp_path.glob("history.json.damaged-*"):
            leftover.unlink()


def test_damaged_original_is_kept_beside_the_repair(tmp_path: Path):
    path = tmp_path / "history.json"
    history.rewrite(path, records(2))
    path.write_bytes(path.read_bytes()[:-5])
    assert history.load(path).records == records(1)
    kept = list(tmp_path.glob("history.json.damaged-*"))
    assert len(kept) == 1 and kept[0].read_bytes().startswith(b"[\n{")


def test_a_damaged_middle_line_loses_only_that_line(tmp_path: Path):
    path = tmp_path / "history.json"
    history.rewrite(path, records(3))
    lines = path.read_bytes().split(b"\n")
    lines[2] = b',{"id":2,"role":"assist'
    path.write_bytes(b"\n".join(lines))
    assert [r.id for r in history.load(path).records] == [1, 3]


def test_reference_layout_is_adopted_and_renumbered(tmp_path: Path):
    path = tmp_path / "history.json"
    legacy = [{"id": "a1b2", "role": "user", "content": "hi", "sendAt": 5},
              {"role": "assistant", "content": "hello", "sendAt": 6, "sender": "bot"}]
    path.write_bytes(msgspec.json.format(msgspec.json.encode(legacy), indent=2))
    loaded = history.load(path)
    assert [(r.id, r.role, r.content, r.send_at, r.sender) for r in loaded.records] == [
        (1, "user", "hi", 5, ""), (2, "assistant", "hello", 6, "bot")]
    assert loaded.repaired and path.read_bytes() == history.render(loaded.records)
    assert not list(tmp_path.glob("history.json.damaged-*"))


def test_missing_file_is_empty(tmp_path: Path):
    assert history.load(tmp_path / "history.json").records == []


def test_ids_out_of_order_are_sorted_never_renumbered_and_the_original_is_kept(tmp_path: Path):
    path = tmp_path / "history.json"
    history.rewrite(path, records(6, start=40))
    lines = path.read_bytes().split(b"\n")
    lines[2], lines[4] = lines[4], lines[2]
    path.write_bytes(b"\n".join(lines))
    loaded = history.load(path)
    assert [r.id for r in loaded.records] == [40, 41, 42, 43, 44, 45] and loaded.records == records(6, start=40)
    assert len(list(tmp_path.glob("history.json.damaged-*"))) == 1
    assert history.load(path).records == loaded.records  # repaired on disk


def test_a_repeated_id_keeps_both_messages_and_takes_a_new_id_above_the_rest(tmp_path: Path):
    path = tmp_path / "history.json"
    first, second, third = records(3, start=7)
    clash = msgspec.structs.replace(third, id=8, content="another message with id 8")
    path.write_bytes(history.render([first, second, third]).replace(b"]\n", b",") +
                     history.encode_line([clash, second], first=True) + b"]\n")
    loaded = history.load(path)
    assert [(r.id, r.content) for r in loaded.records] == [
        (7, first.content), (8, second.content), (9, third.content), (10, "another message with id 8")]
    assert len(list(tmp_path.glob("history.json.damaged-*"))) == 1
