"""A real memsvc server run inside the test's process: the gRPC server (and the HTTP listener of
--http-listen) on real ports, the same App with its journal, vector workers, jobs and model table, started
and stopped as `memsvc serve` does, with none of the process around it. It saves starting a Python process
and importing memsvc for each server, which is most of what a short test costs.

Owns `InProcessServer` (the interface of tests.support.ServerProcess), the event loop thread each one runs
on, and the routing of log lines to the server that logged them: every thread a server starts, and every
task and thread those start, carries that server as its owner, and each server's handler keeps only the
records of its own threads, so log lines never leak between servers in one process.

Must never stand in for what belongs to a process: kills, crashes, signals, the descriptor limit, failure
points (MEMSVC_FAILPOINTS is read once per process), exit codes and stderr, the metrics registry (one per
process). A server asked for one of these refuses with a ValueError naming it; those tests use
ServerProcess (the default, or a test marked `as_process`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from memsvc.cli import build_parser
from memsvc.core import config
from memsvc.rpc.server import Server, Transport
from memsvc.runtime import logs
from tests.support.logs_and_health import Readable

T = TypeVar("T")
OWNER = "memsvc_test_server"
"The attribute naming the in-process server a thread was started for (by it or by one of its threads)."
SETTING_ENV = {config.ENV_PREFIX + name for name in ("CONFIG", *(field.name.upper() for field in config.FIELDS))}
"The environment a server reads through its settings; the rest (failure points, API keys) the process reads."

_serving: contextvars.ContextVar[InProcessServer | None] = contextvars.ContextVar(OWNER, default=None)
_stamping = threading.Lock()
_live: list[InProcessServer] = []
"Servers running now: while any runs, new threads are stamped with their owner and the root logger logs info."
_saved: dict[str, Any] = {}


def owner() -> InProcessServer | None:
    """The server whose work this is: the task's (asyncio copies context into tasks and to_thread), else the
    thread's stamp."""
    return _serving.get() or getattr(threading.current_thread(), OWNER, None)


def _stamped_init(self: threading.Thread, *args: Any, **kwargs: Any) -> None:
    _saved["thread_init"](self, *args, **kwargs)
    started_for = owner()
    if started_for is not None:
        setattr(self, OWNER, started_for)


def _thread_died(args: threading.ExceptHookArgs) -> None:
    """A server's thread that dies reports to that server (health NOT_SERVING), as in `memsvc serve`."""
    started_for = getattr(args.thread, OWNER, None)
    if started_for is not None and started_for.server is not None:
        started_for.server.thread_died(args)
    else:
        _saved["excepthook"](args)


def _first_started() -> None:
    """Python 3.11 threads do not inherit context (3.14's thread_inherit_context would): stamp them."""
    root = logging.getLogger()
    _saved.update(thread_init=threading.Thread.__init__, excepthook=threading.excepthook, level=root.level)
    threading.Thread.__init__ = _stamped_init  # type: ignore[method-assign]
    threading.excepthook = _thread_died


def _last_stopped() -> None:
    threading.Thread.__init__ = _saved["thread_init"]  # type: ignore[method-assign]
    if threading.excepthook is _thread_died:
        threading.excepthook = _saved["excepthook"]
    logging.getLogger().setLevel(_saved["level"])


class _OwnLines(logging.Handler):
    """The JSON lines `memsvc serve` would write to stderr, of one server's work only."""

    def __init__(self, server: InProcessServer, level: str):
        super().__init__(level.upper())
        self.server = server
        self.setFormatter(logs.JsonFormatter())

    def filter(self, record: logging.LogRecord) -> bool:
        return owner() is self.server and super().filter(record)

    def emit(self, record: logging.LogRecord) -> None:
        self.server.log_lines.append(self.format(record) + "\n")


# Test servers of both kinds embed with the builtin features (instant, no model to load) unless the test's
# own flags, which come after these, name another embedder: only the model's own tests pay for loading it.
TEST_EMBEDDER = ("--embedder", "builtin")

class InProcessServer(Readable):
    """`memsvc serve`'s server on an event loop thread of the test's process; knows its bound addresses."""

    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None, tcp_port: int = 0,
                 nofile: int | None = None):
        if nofile is not None:
            raise ValueError("a descriptor limit is a process's: use a server process (AS_PROCESS)")
        unread = sorted(set(env or {}) - SETTING_ENV)
        if unread:
            raise ValueError(f"{', '.join(unread)} would not reach an in-process server (the process reads it): "
                             "use a server process (AS_PROCESS)")
        self.data_dir = data_dir
        self.args = list(args)
        self.env = dict(env or {})
        self.tcp_port = tcp_port
        self.process = None
        "No process of its own: tests that signal or kill one are AS_PROCESS."
        self.server: Server | None = None
        self.tcp = self.unix = ""
        self.health = self.metrics = self.http = ""
        self.log_lines: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._handler: _OwnLines | None = None

    @property
    def socket_path(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.sock"

    @property
    def running(self) -> bool:
        return self._thread is not None

    def settings(self) -> config.Settings:
        """What `memsvc serve` would run with, given these flags and this environment."""
        flags = vars(build_parser().parse_args([
            "serve", "--data-dir", str(self.data_dir), "--listen", f"127.0.0.1:{self.tcp_port}",
            "--listen", f"unix://{self.socket_path}", *TEST_EMBEDDER, *self.args]))
        flags.pop("command")
        if flags.get("metrics_listen"):
            raise ValueError("the metrics registry is the process's: use a server process (AS_PROCESS)")
        return config.load(flags, environ={**os.environ, **self.env})

    def start(self, timeout: float = 30.0) -> InProcessServer:
        """Start it and wait until it serves; RuntimeError with its log if it cannot start."""
        settings = self.settings()
        transports: list[Transport] = []
        if settings.http_listen:
            from memsvc.http.listener import HttpListener

            transports.append(HttpListener(settings))
        with _stamping:
            if not _live:
                _first_started()
            _live.append(self)
            root = logging.getLogger()
            root.setLevel(min(root.level, logging.getLevelName(settings.log_level.upper())))
            logs.quiet_chatty(root.level)
        self._handler = _OwnLines(self, settings.log_level)
        logging.getLogger().addHandler(self._handler)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"memsvc-{self.data_dir.name}",
                                        daemon=True)
        setattr(self._thread, OWNER, self)
        self._thread.start()
        self.server = Server(settings, transports)
        try:
            bound = self._call(self._start(self.server), timeout)
        except Exception as exc:
            with contextlib.suppress(Exception):  # what it opened before it failed; a process would just exit
                self._call(self._stop(self.server), timeout)
            self._end()
            raise RuntimeError(f"server did not start ({exc!r}):\n" + "".join(self.log_lines)) from exc
        for address in bound:
            if address.startswith("unix://"):
                self.unix = address
            else:
                self.tcp = address
        serving = self.logged("serving")[-1]
        self.health, self.metrics, self.http = (serving.get(port, "") for port in ("health", "metrics", "http"))
        return self

    async def _start(self, server: Server) -> list[str]:
        _serving.set(self)  # this task's context: every task and to_thread call the server makes inherits it
        return await server.start()

    def _call(self, work: Coroutine[Any, Any, T], timeout: float | None) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout)

    def terminate(self, timeout: float = 30.0) -> int:
        """What SIGTERM does to `memsvc serve`: drain, flush every store, stop every thread; its exit code (0)."""
        assert self.server is not None
        try:
            self._call(self._stop(self.server), timeout)
        finally:
            self._end()
        return 0

    async def _stop(self, server: Server) -> None:
        _serving.set(self)
        await server.stop()

    def _end(self) -> None:
        """Close the loop and its thread (and the default executor's threads), and stop taking log lines."""
        assert self._loop is not None and self._thread is not None
        loop = self._loop
        asyncio.run_coroutine_threadsafe(loop.shutdown_default_executor(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(30)
        loop.close()
        self._loop = self._thread = None
        if self._handler is not None:
            logging.getLogger().removeHandler(self._handler)
            self._handler = None
        with _stamping:
            _live.remove(self)
            if not _live:
                _last_stopped()

    def kill(self) -> None:
        raise ValueError("an in-process server cannot be killed: use a server process (AS_PROCESS)")

    def restart(self) -> InProcessServer:
        if self.running:
            self.terminate()
        return self.start()

    def discard(self) -> None:
        """At the end of a test: stop it if it still runs."""
        if self.running:
            self.terminate()
