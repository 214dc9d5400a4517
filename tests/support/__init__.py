"""Shared test support: fixtures that build real things: a real memsvc server (a process, or in the test's
process where the module is marked in_process) on an ephemeral TCP port and a unix socket, over a data
directory in tmp_path."""

from __future__ import annotations

import os
import queue
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from memsvc.app import SessionParts
from memsvc.core import config
from memsvc.core.layout import Layout
from memsvc.core.records import Record
from memsvc.journal.journal import Journal
from memsvc.summary import llm, rolling
from memsvc.summary.decisions import Judge
from memsvc.summary.summarizer import Summarizer
from memsvc.window.appender import Appender
from memsvc.window.incoming import NewMessage
from memsvc_client import Client, MemsvcError
from tests.support.inprocess import TEST_EMBEDDER, InProcessServer
from tests.support.logs_and_health import Readable, log_entry

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


class ServerProcess(Readable):
    """`python -m memsvc serve` in a subprocess; knows its bound addresses."""

    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None, tcp_port: int = 0,
                 nofile: int | None = None, default_embedder: bool = False):
        self.data_dir = data_dir
        self.args = list(args)
        self.embedder_flags = () if default_embedder else TEST_EMBEDDER
        "The test embedder, unless the server is to run the default one, as `make serve` does."
        self.tcp_port = tcp_port
        "0 picks a free port at each start; a fixed one keeps the address across restarts (behind a proxy)."
        self.nofile = nofile
        "The process's descriptor limit (soft and hard, as `ulimit -n` sets), when not inherited."
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen[str] | None = None
        self.tcp = self.unix = ""
        self.health = self.metrics = self.http = ""
        "Addresses of the health-only, metrics and HTTP ports, when started with them."
        self.log_lines: list[str] = []

    @property
    def socket_path(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.sock"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "memsvc", "serve", "--data-dir", str(self.data_dir),
                "--listen", f"127.0.0.1:{self.tcp_port}", "--listen", f"unix://{self.socket_path}",
                *self.embedder_flags, *self.args]

    def start(self, timeout: float = 30.0) -> ServerProcess:
        """Start it and wait for its "serving" line; RuntimeError with its log if it exits first or is not
        serving within `timeout` (a hung start is left running, for a person to look at)."""
        limit = self.nofile
        self.process = subprocess.Popen(
            self.command(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=self.env, cwd=ROOT,
            preexec_fn=None if limit is None else lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._drain, args=(self.process, lines), daemon=True).start()
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                break
            if not line:  # its stderr closed: it exited
                raise RuntimeError(f"server exited ({self.process.wait()}):\n" + "".join(self.log_lines))
            entry = log_entry(line)
            if entry.get("event") == "serving":
                for address in entry["addresses"]:
                    if address.startswith("unix://"):
                        self.unix = address
                    else:
                        self.tcp = address
                self.health, self.metrics, self.http = (entry.get(port, "") for port in ("health", "metrics", "http"))
                return self
        raise RuntimeError("server did not start in time:\n" + "".join(self.log_lines))

    def _drain(self, process: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
        """Every line the server logs, read as it comes (a blocking read in start() could outwait its timeout)."""
        assert process.stderr is not None
        for line in process.stderr:
            self.log_lines.append(line)
            lines.put(line)
        lines.put("")

    def terminate(self, timeout: float = 30.0) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def restart(self) -> ServerProcess:
        if self.running:
            self.terminate()
        return self.start()

    def discard(self) -> None:
        """At the end of a test: kill it if it still runs."""
        if self.running:
            self.kill()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rss_mib(pid: int) -> float:
    """A process's resident memory."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def scrape(server: ServerProcess) -> dict[tuple[str, frozenset], float]:
    """Every sample on the server's metrics port: (name, labels) -> value."""
    reply = httpx.get(f"http://{server.metrics}/metrics", timeout=10)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(reply.text) for sample in family.samples}


def wait_for(condition: Callable[[], object], timeout: float = 60.0) -> None:
    """Poll until `condition()` is true: for background work (index builds, embedding)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.05)


def kill_during_burst(server: ServerProcess, write: Callable[[Client, int, int], T], workers: int,
                      until: int) -> list[T]:
    """Call `write(client, worker, sequence)` from `workers` threads until `until` calls were
    acknowledged, then SIGKILL the server with calls still in flight. Returns what each
    acknowledged call returned; a call may fail only because the server died (UNAVAILABLE)."""
    acknowledged: list[T] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def writer(worker: int) -> None:
        with server.client(timeout=5) as client:
            sequence = 0
            while not stop.is_set():
                try:
                    acknowledged.append(write(client, worker, sequence))
                except MemsvcError as error:
                    if error.code != grpc.StatusCode.UNAVAILABLE:
                        failures.append(error)
                    return
                sequence += 1

    threads = [threading.Thread(target=writer, args=(worker,)) for worker in range(workers)]
    for thread in threads:
        thread.start()
    while len(acknowledged) < until and not failures:
        stop.wait(0.001)
    server.kill()
    stop.set()
    for thread in threads:
        thread.join()
    assert not failures
    return acknowledged


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


IN_PROCESS = "in_process"
"""The marker (`pytestmark = pytest.mark.in_process`) of a module whose servers run in the test's process
(tests/support/inprocess.py): for tests where the process boundary is not what is tested. Without it, or
for a test marked AS_PROCESS, every server is a `memsvc serve` process: tests of kills, crashes, signals,
start-up, recovery, data-directory locks, failure points, descriptor limits, metrics, a process's memory
or environment and what a process logs keep that."""

AS_PROCESS = "as_process"
"""The marker of a test, in an in_process module, whose servers are processes all the same."""


def server_class(request: pytest.FixtureRequest) -> type[ServerProcess] | type[InProcessServer]:
    """The kind of server the test (or, for a module's shared server, its module) asked for."""
    if request.node.get_closest_marker(AS_PROCESS) or not request.node.get_closest_marker(IN_PROCESS):
        return ServerProcess
    return InProcessServer


@pytest.fixture
def make_server(data_dir: Path, request: pytest.FixtureRequest):
    started: list[ServerProcess | InProcessServer] = []
    kind = server_class(request)

    def make(*args: str, env: dict[str, str] | None = None, directory: Path | None = None,
             nofile: int | None = None) -> ServerProcess | InProcessServer:
        server = kind(directory or data_dir, *args, env=env, nofile=nofile)
        started.append(server)
        return server.start()

    yield make
    for server in started:
        server.discard()


@pytest.fixture
def server(make_server) -> ServerProcess:
    return make_server()


@pytest.fixture
def client(server: ServerProcess):
    with server.client() as memory:
        yield memory


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """One server for a module's tests that change nothing but sessions of their own (each names its own)."""
    server = server_class(request)(tmp_path_factory.mktemp("shared") / "data").start()
    yield server
    server.discard()


def stored_sessions(server: ServerProcess) -> set[str]:
    """The session directories on the server's disk."""
    root = server.data_dir / "sessions"
    return {path.name for path in root.iterdir()} if root.exists() else set()


def talk(appender: Appender, session_id: str, pairs: int, size: int = 20) -> None:
    for index in range(pairs):
        appender.append(session_id, [NewMessage(role="user", content=f"q{index} " + "x" * size),
                                     NewMessage(role="assistant", content=f"a{index}")])


def session_parts(settings: config.Settings, **kwargs) -> tuple[SessionParts, Journal]:
    """Tier 1 over the settings' data directory as a server builds it (no derived store unless given),
    and its journal, for the caller to close."""
    layout = Layout(settings.data_dir)
    layout.data_dir.mkdir(parents=True, exist_ok=True)
    journal = Journal(layout.journal, layout.data_dir)
    kwargs.setdefault("derived", [])
    kwargs.setdefault("embeddings", None)
    kwargs.setdefault("on_oversize", lambda session_id: None)
    return SessionParts(settings, layout.tenant(), journal, **kwargs), journal


# -- the summary tier, as a server would build it ---------------------------------

T0 = int(datetime(2025, 3, 1, 14, 2, 7).timestamp()) * 1_000_000_000
SECOND = 1_000_000_000


class World:
    """Sessions and a summarizer over one data directory, as a server would build them."""

    def __init__(self, tmp_path: Path, base_url: str, **overrides):
        values = {"data_dir": str(tmp_path / "data"), "llm_base_url": base_url, "summary_model": "sum",
                  "llm_max_retries": 0, **overrides}
        self.settings = config.load(values, environ={})
        self.parts, self.journal = session_parts(self.settings)
        self.sessions = self.parts.store
        summary_model, decision_model = llm.models(self.settings)
        judge = Judge(decision_model, self.settings) if decision_model else None
        self.summarizer = Summarizer(self.settings, self.sessions, self.parts.lister, self.sessions.records_after,
                                     summary_model, judge)

    def say(self, session_id: str, *turns: tuple[str, str], at: int = T0, step: int = SECOND) -> list[Record]:
        messages = [NewMessage(role=role, content=text, send_at=at + n * step) for n, (role, text) in enumerate(turns)]
        return self.parts.appender.append(session_id, messages).records

    def directory(self, session_id: str) -> Path:
        return self.sessions.directory(session_id)

    def stored(self, session_id: str) -> rolling.Summary | None:
        return rolling.load(self.directory(session_id) / "summary.json")
