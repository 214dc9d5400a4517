from pathlib import Path

import pytest

from memsvc.core import durable
from memsvc.core.errors import InvalidSetting, Unavailable


def test_atomic_write_replaces_whole_file_and_leaves_no_temp(tmp_path: Path):
    path = tmp_path / "f.json"
    durable.atomic_write(path, b"old")
    durable.atomic_write(path, b"new contents")
    assert path.read_bytes() == b"new contents"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_remove_tree_and_sweep(tmp_path: Path):
    victim = tmp_path / "s1"
    (victim / "deep").mkdir(parents=True)
    (victim / "deep" / "x").write_text("x")
    durable.remove_tree(victim)
    assert not victim.exists()
    interrupted = tmp_path / ".deleting-s2"
    interrupted.mkdir()
    durable.sweep_deleted(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_second_lock_on_the_same_directory_fails_with_the_holder(tmp_path: Path):
    first = durable.DirectoryLock(tmp_path)
    first.acquire()
    try:
        with pytest.raises(InvalidSetting, match="in use by memsvc pid"):
            durable.DirectoryLock(tmp_path).acquire()
    finally:
        first.release()
    second = durable.DirectoryLock(tmp_path)
    second.acquire()
    second.release()


def test_append_file_creates_then_appends(tmp_path: Path):
    path = tmp_path / "tail.log"
    durable.append_file(path, b"one;")
    durable.append_file(path, b"two;")
    assert path.read_bytes() == b"one;two;"


def test_data_paths_notice_a_directory_deleted_or_replaced(tmp_path: Path):
    root = tmp_path / "data"
    (root / "sessions").mkdir(parents=True)
    paths = durable.DataPaths([root, root / "sessions"])
    assert paths.missing() is None
    paths.check()
    (root / "sessions").rename(tmp_path / "elsewhere")
    (root / "sessions").mkdir()  # the same name, another directory
    assert paths.missing() == root / "sessions"
    with pytest.raises(Unavailable) as refused:
        paths.check()
    assert refused.value.reason == "DATA_DIR_MISSING" and str(root / "sessions") in refused.value.message


def test_make_dir_never_creates_a_missing_parent(tmp_path: Path):
    durable.make_dir(tmp_path / "a")
    durable.make_dir(tmp_path / "a")  # already there: fine
    with pytest.raises(FileNotFoundError):
        durable.make_dir(tmp_path / "gone" / "b")
    assert not (tmp_path / "gone").exists()
