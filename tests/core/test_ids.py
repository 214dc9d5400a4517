"""Session ids: nothing that could escape the data root, or confuse a shell, gets through."""

import pytest

from memsvc.core.errors import InvalidArgument
from memsvc.core.ids import check_session_id, is_session_id


@pytest.mark.parametrize("bad", ["", ".", "..", "../etc", "a/b", "-x", ".hidden", "a\x00b", "x" * 129, "s p",
                                 "caf\u00e9", "a\\b"])
def test_ids_that_could_escape_or_confuse_are_rejected(bad):
    with pytest.raises(InvalidArgument, match="session_id") as refused:
        check_session_id(bad)
    assert refused.value.reason == "INVALID_SESSION_ID" and not is_session_id(bad)


@pytest.mark.parametrize("good", ["a", "temp-1", "A.b_c-9", "x" * 128, "_x"])
def test_valid_ids(good):
    assert check_session_id(good) == good and is_session_id(good)
