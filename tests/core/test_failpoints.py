import errno

import pytest

from memsvc.core import failpoints


def test_parse_counts_and_modes():
    points = failpoints.parse("a.b=kill@3; c=enospc*2 ;d=eio")
    assert [(p.action, p.mode, p.count) for p in points.values()] == [
        ("kill", "@", 3), ("enospc", "*", 2), ("eio", None, 0)]
    nth = points["a.b"]
    assert [nth.due() for _ in range(4)] == [False, False, True, False]
    first_two = points["c"]
    assert [first_two.due() for _ in range(3)] == [True, True, False]


@pytest.mark.parametrize("text", ["x=explode", "=kill", "x=kill@", "x"])
def test_bad_specs_are_refused(text):
    with pytest.raises(ValueError, match="MEMSVC_FAILPOINTS"):
        failpoints.parse(text)


def test_hit_raises_the_configured_disk_error(monkeypatch):
    monkeypatch.setattr(failpoints, "_points", failpoints.parse("p=enospc*1"))
    with pytest.raises(OSError) as caught:
        failpoints.hit("p")
    assert caught.value.errno == errno.ENOSPC
    failpoints.hit("p")  # only the first hit fails
    failpoints.hit("unconfigured")
