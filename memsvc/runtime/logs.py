"""JSON log lines on stderr.

Owns the log format. Must never be handed conversation text: call sites log
ids, counts and sizes only.
"""

from __future__ import annotations

import logging
import sys
import time

import msgspec

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        entry.update({key: value for key, value in vars(record).items() if key not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return msgspec.json.encode(entry, enc_hook=str).decode()


CHATTY = ("psycopg",)
"Libraries that log every call at info (psycopg_pool: each connection handed out): warnings and up only."


def configure(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    quiet_chatty(root.level)


def quiet_chatty(level: int) -> None:
    """The CHATTY libraries log at warning and up, or at `level` if higher."""
    for name in CHATTY:
        logging.getLogger(name).setLevel(max(logging.WARNING, level))
