import argparse
from pathlib import Path

import pytest

from memsvc.core import config
from memsvc.core.errors import InvalidSetting


def flags(*argv: str) -> dict:
    parser = argparse.ArgumentParser()
    config.add_arguments(parser)
    return vars(parser.parse_args(list(argv)))


def test_defaults(monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", "/xdg")
    settings = config.load({}, environ={"XDG_DATA_HOME": "/xdg"})
    assert settings.data_dir == "/xdg/memsvc"
    assert settings.listen == ["127.0.0.1:50051"]
    assert (settings.max_history_messages, settings.max_history_bytes, settings.max_message_bytes) == (
        16, 4 * 1024 * 1024, 1024 * 1024)
    assert settings.embedder == "all-minilm-l6-v2" and settings.summary_model == ""


def test_flags_beat_env_beat_file_beat_defaults(tmp_path: Path):
    toml = tmp_path / "memsvc.toml"
    toml.write_text('max_history_bytes = 111\nmax_history_messages = 5\nreply_lang = "ja"\n'
                    'listen = ["unix:///a.sock"]\n')
    env = {"MEMSVC_CONFIG": str(toml), "MEMSVC_MAX_HISTORY_BYTES": "222", "MEMSVC_MAX_HISTORY_MESSAGES": "6",
           "MEMSVC_MAX_MESSAGE_BYTES": "100"}
    settings = config.load(flags("--max-history-bytes", "333", "--listen", "127.0.0.1:1", "--listen",
                                 "unix:///b.sock"), environ=env)
    assert settings.max_history_bytes == 333          # flag
    assert settings.max_history_messages == 6         # env over file
    assert settings.reply_lang == "ja"                # file over default
    assert settings.listen == ["127.0.0.1:1", "unix:///b.sock"]


def test_env_listen_is_comma_separated():
    settings = config.load({}, environ={"MEMSVC_LISTEN": "127.0.0.1:1,unix:///x.sock"})
    assert settings.listen == ["127.0.0.1:1", "unix:///x.sock"]


@pytest.mark.parametrize("env, words", [
    ({"MEMSVC_MAX_HISTORY_BYTES": "lots"}, "max_history_bytes"),
    ({"MEMSVC_MAX_HISTORY_MESSAGES": "0"}, "max_history_messages must be positive"),
    ({"MEMSVC_EMBEDDER": "magic"}, "embedder"),
    ({"MEMSVC_CONFIG": "/nonexistent/memsvc.toml"}, "cannot read settings file"),
    ({"MEMSVC_LESSONS_BACKEND": "mysql"}, "lessons_backend"),
    ({"MEMSVC_LESSONS_BACKEND": "postgres"}, "lessons_backend = postgres needs lessons_dsn"),
    ({"MEMSVC_LESSONS_DSN": "host=db"}, "are for lessons_backend = postgres"),
    ({"MEMSVC_LESSONS_PASSWORD_FILE": "/run/pw"}, "are for lessons_backend = postgres"),
    ({"MEMSVC_LESSONS_BACKEND": "postgres", "MEMSVC_LESSONS_DSN": "host=db", "MEMSVC_LESSONS_POOL_SIZE": "0"},
     "lessons_pool_size must be positive"),
    ({"MEMSVC_MAX_REPLY_BYTES": str(1024 * 1024)}, r"max_reply_bytes \(1048576\) must leave room for one message"),
    ({"MEMSVC_MAX_REPLY_BYTES": "0"}, "max_reply_bytes must be positive"),
])
def test_bad_settings_say_which(env, words):
    with pytest.raises(InvalidSetting, match=words):
        config.load({}, environ=env)


def test_unknown_toml_key_is_rejected(tmp_path: Path):
    toml = tmp_path / "memsvc.toml"
    toml.write_text("max_histroy_bytes = 1\n")
    with pytest.raises(InvalidSetting, match="max_histroy_bytes"):
        config.load({"config": str(toml)}, environ={})


def test_every_setting_has_a_flag_with_help():
    parser = argparse.ArgumentParser()
    config.add_arguments(parser)
    text = parser.format_help()
    for field in config.FIELDS:
        flag = "--" + field.name.replace("_", "-")
        assert flag in text and f"MEMSVC_{field.name.upper()}" in text


def test_the_reply_budget_keeps_under_a_default_clients_receive_limit_and_the_send_limit_above_it():
    from memsvc.rpc.server import _options

    settings = config.load({}, environ={})
    assert settings.max_reply_bytes == 4 * 1024 * 1024 - 64 * 1024
    assert dict(_options(settings, 8))["grpc.max_send_message_length"] == 8 * 1024 * 1024 + 32 * 1000
    small = config.load({"max_request_bytes": "16384"}, environ={})
    assert dict(_options(small, 8))["grpc.max_send_message_length"] == 4 * 1024 * 1024
