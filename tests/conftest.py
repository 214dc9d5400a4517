"""Fixtures that build real things: a real memsvc server process on an
ephemeral TCP port and a unix socket, over a data directory in tmp_path."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memsvc.client import Client
from tests.llm_server import llm_server  # noqa: F401 - a chat-completions server on loopback, as a fixture

ROOT = Path(__file__).resolve().parent.parent


class ServerProcess:
    """`python -m memsvc serve` in a subprocess; knows its bound addresses."""

    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None):
        self.data_dir = data_dir
        self.args = list(args)
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen[str] | None = None
        self.tcp = self.unix = ""
        self.health = self.metrics = ""
        "Addresses of the health-only and metrics ports, when started with them."
        self.log_lines: list[str] = []

    @property
    def socket_path(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.sock"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "memsvc", "serve", "--data-dir", str(self.data_dir),
                "--listen", "127.0.0.1:0", "--listen", f"unix://{self.socket_path}", *self.args]

    def start(self, timeout: float = 30.0) -> ServerProcess:
        self.process = subprocess.Popen(self.command(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        text=True, env=self.env, cwd=ROOT)
        deadline = time.monotonic() + timeout
        assert self.process.stderr is not None
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                raise RuntimeError(f"server exited ({self.process.wait()}):\n" + "".join(self.log_lines))
            self.log_lines.append(line)
            entry = _json(line)
            if entry.get("event") == "serving":
                for address in entry["addresses"]:
                    if address.startswith("unix://"):
                        self.unix = address
                    else:
                        self.tcp = address
                self.health, self.metrics = entry.get("health", ""), entry.get("metrics", "")
                threading.Thread(target=self._drain, daemon=True).start()
                return self
        raise RuntimeError("server did not start in time:\n" + "".join(self.log_lines))

    def _drain(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        for line in self.process.stderr:
            self.log_lines.append(line)

    def client(self, target: str | None = None, **kwargs: object) -> Client:
        return Client(target or self.tcp, **kwargs)  # type: ignore[arg-type]

    def terminate(self, timeout: float = 30.0) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def restart(self) -> ServerProcess:
        if self.process is not None and self.process.poll() is None:
            self.terminate()
        return self.start()


def _json(line: str) -> dict:
    try:
        return json.loads(line)
    except ValueError:
        return {}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def make_server(data_dir: Path):
    started: list[ServerProcess] = []

    def make(*args: str, env: dict[str, str] | None = None, directory: Path | None = None) -> ServerProcess:
        server = ServerProcess(directory or data_dir, *args, env=env)
        started.append(server)
        return server.start()

    yield make
    for server in started:
        if server.process is not None and server.process.poll() is None:
            server.kill()


@pytest.fixture
def server(make_server) -> ServerProcess:
    return make_server()


@pytest.fixture
def client(server: ServerProcess):
    with server.client() as memory:
        yield memory
