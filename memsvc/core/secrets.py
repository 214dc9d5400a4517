"""Reading a secret (an API key) named by a setting: from its file, else from
an environment variable.

Must never log, echo or keep a secret's value anywhere but the caller's
memory: errors name the setting and the file, never what is in it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from memsvc.core.errors import InvalidSetting


def read_secret(setting: str, path: str, env_var: str, environ: Mapping[str, str] | None = None) -> str:
    """The secret in `path` (the value of `setting`), else in `env_var`, else "" (local servers need none).

    Surrounding whitespace is dropped: a trailing newline is not part of a key.
    """
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InvalidSetting(f"cannot read {setting} {path}: {exc.strerror}") from exc
    return (os.environ if environ is None else environ).get(env_var, "").strip()
