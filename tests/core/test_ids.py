"""Session ids are what users write: any UTF-8 text up to 256 bytes, but no control or format character
and not a directory's own name; the layout maps every valid id to a directory that stays inside the data
root and back, and ids valid before keep their directories."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsvc.core import layout
from memsvc.core.errors import InvalidArgument
from memsvc.core.ids import MAX_SESSION_ID_BYTES, check_session_id, is_session_id

FRAMEWORK_IDS = ["user:42", "conv/1", "a b", "alice@example.com", "é", "x" * 256,
                 "8c5b2a9e-3f41-4d7a-9a0e-2b7f3c1d5e6f", "../etc", "-x", ".hidden", "a\\b", "中" * 85, "🙂", "~x",
                 "#x", "%2F", "."*3]


@pytest.mark.parametrize("bad", ["", ".", "..", "a\x00b", "line\nbreak", "tab\tbed", "bidi\u202eoverride",
                                 "zero\u200bwidth", "bom\ufeff", "\x7f", "x" * 257, "é" * 129, "lone\ud800"])
def test_empty_control_format_and_directory_names_are_refused_saying_what_is_allowed(bad):
    with pytest.raises(InvalidArgument, match="session_id") as refused:
        check_session_id(bad)
    assert refused.value.reason == "INVALID_SESSION_ID" and not is_session_id(bad)
    assert "256 bytes" in refused.value.message and "Cc, Cf" in refused.value.message


@pytest.mark.parametrize("good", ["a", "temp-1", "A.b_c-9", "x" * 128, "_x", *FRAMEWORK_IDS])
def test_ids_as_frameworks_write_them_are_valid(good):
    assert check_session_id(good) == good and is_session_id(good)


@pytest.mark.parametrize("kept", ["a", "temp-1", "A.b_c-9", "x" * 128, "_x", "0"])
def test_ids_valid_before_keep_their_directory_name(kept):
    assert layout.directory_name(kept) == kept and layout.id_from_name(kept) == kept


@pytest.mark.parametrize("session_id", FRAMEWORK_IDS)
def test_every_other_id_maps_to_a_safe_name_and_back(session_id):
    name = layout.directory_name(session_id)
    assert "/" not in name and "\x00" not in name and name not in (".", "..") and not name.startswith(".")
    assert len(name.encode()) <= layout.MAX_NAME
    if layout.is_hashed(name):
        assert layout.id_from_name(name) is None, "a hashed name's id is recorded inside its directory"
    else:
        assert layout.id_from_name(name) == session_id


def test_a_long_id_is_hashed_and_its_record_is_checked(tmp_path):
    session_id = "€" * (MAX_SESSION_ID_BYTES // 3)
    name = layout.directory_name(session_id)
    assert layout.is_hashed(name)
    record = tmp_path / "record"
    layout.record_id(record, session_id)
    assert layout.recorded_id(name, record) == session_id
    record.write_bytes("€ something else".encode())
    assert layout.recorded_id(name, record) is None, "a record that does not hash to its name is not believed"


def test_names_memsvc_does_not_give_map_to_no_id():
    for name in ["~%ZZ", "~%FF", "~a%2fb", ".held-x", "-x", "~a", "#abc"]:
        assert layout.id_from_name(name) is None, name  # "~a": the id "a" is stored as "a", not escaped


@given(st.text(min_size=1, max_size=90).filter(is_session_id))
def test_distinct_ids_never_share_a_directory(session_id):
    name = layout.directory_name(session_id)
    other = session_id + "x"
    assert layout.directory_name(other) != name
    if not layout.is_hashed(name):
        assert layout.id_from_name(name) == session_id
