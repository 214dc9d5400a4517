"""API keys named by a setting: from the file, else the environment; errors name the setting, never the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsvc.core.errors import InvalidSetting
from memsvc.core.secrets import read_secret


def test_the_file_wins_over_the_environment_and_whitespace_is_not_part_of_a_key(tmp_path: Path):
    key = tmp_path / "key"
    key.write_text("  sk-from-file\n")
    assert read_secret("x_key_file", str(key), "X_KEY", {"X_KEY": "from-env"}) == "sk-from-file"
    assert read_secret("x_key_file", "", "X_KEY", {"X_KEY": " from-env "}) == "from-env"
    assert read_secret("x_key_file", "", "X_KEY", {}) == ""


def test_an_unreadable_file_stops_the_start_naming_the_setting(tmp_path: Path):
    with pytest.raises(InvalidSetting, match="x_key_file") as refused:
        read_secret("x_key_file", str(tmp_path / "missing"), "X_KEY", {})
    assert "No such file" in str(refused.value)
