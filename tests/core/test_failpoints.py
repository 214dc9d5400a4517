import errno
import time

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


@pytest.mark.parametrize("text", ["x=explode", "=kill", "x=kill@", "x", "x=delay", "x=delay:2"])
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


def test_a_delay_sleeps_as_a_slow_disk_would(monkeypatch):
    points = failpoints.parse("durable.fsync=delay:2ms;b=delay:500us*1;c=delay:1s")
    assert [(p.action, p.delay) for p in points.values()] == [("delay", 0.002), ("delay", 0.0005), ("delay", 1.0)]
    monkeypatch.setattr(failpoints, "_points", points)
    started = time.perf_counter()
    for _ in range(5):
        failpoints.hit("durable.fsync")
    assert time.perf_counter() - started >= 0.01


def test_a_dropped_write_is_only_reported_where_asked(monkeypatch):
    monkeypatch.setattr(failpoints, "_points", failpoints.parse("w=drop@2;k=eio"))
    assert [failpoints.dropped("w") for _ in range(3)] == [False, True, False]
    failpoints.hit("w")  # `hit` ignores a drop
    with pytest.raises(OSError):
        failpoints.dropped("k")  # other actions act as in `hit`
