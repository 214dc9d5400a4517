import os
import time
from datetime import UTC, datetime

import pytest

from memsvc.window import legacy


@pytest.fixture
def taipei():
    previous = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Taipei"
    time.tzset()
    yield
    if previous is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = previous
    time.tzset()


def utc_ns(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp()) * 1_000_000_000


def test_chinese_header_is_local_time_and_stripped(taipei):
    header = legacy.parse("當前時間: 2025-03-04 10:20:30\n傳送者: 小明\n\n我們在沙盒裡測試")
    assert header == legacy.Header(utc_ns(2025, 3, 4, 2, 20, 30), "小明", "我們在沙盒裡測試")


def test_send_at_first_line(taipei):
    header = legacy.parse("sendAt: 2025-03-04 10:20:30, sender: bob\nhello")
    assert header == legacy.Header(utc_ns(2025, 3, 4, 2, 20, 30), "bob", "hello")


def test_full_width_colon_and_time_only(taipei):
    header = legacy.parse("當前時間：2025-03-04 08:00:00\nhi")
    assert header == legacy.Header(utc_ns(2025, 3, 4, 0, 0, 0), "", "hi")


@pytest.mark.parametrize("content", [
    "hello\n當前時間: 2025-03-04 10:20:30",      # not at the top
    "傳送者: bob\nno time here",                 # sender alone is not a header
    "當前時間: 2025-13-45 10:20:30\nbad date",    # impossible date: left alone
    "sendAt: yesterday\nhi",
])
def test_content_without_a_valid_header_is_untouched(content):
    assert legacy.parse(content) is None
