import sys
import unicodedata

import pytest

from memsvc.core.records import has_visible_text


@pytest.mark.parametrize("text", ["a", " \u200bx", "沙", "\u00a0\u0301", "🙂"])
def test_text_with_anything_a_reader_sees_is_visible(text):
    assert has_visible_text(text)


@pytest.mark.parametrize("text", ["", "  \n\t", "\0\0", "\u200b\u200c\u200d\u2060\ufeff", "\u202e\u200f", "\ufe0f"])
def test_whitespace_controls_and_format_characters_alone_are_not(text):
    assert not has_visible_text(text)


def test_every_control_format_and_space_character_of_this_unicode_is_invisible():
    invisible = [chr(code) for code in range(sys.maxunicode + 1)
                 if unicodedata.category(chr(code)) in ("Cc", "Cf", "Zs", "Zl", "Zp")]
    assert [hex(ord(char)) for char in invisible if has_visible_text(char)] == []
