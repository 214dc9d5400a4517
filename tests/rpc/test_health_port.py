"""The health-only port for probes, end to end: NOT_SERVING until ready and while draining, health alone.

The start is held at a known point by a real file the server must read
while it assembles the domain: a named pipe as llm_api_key_file, which
blocks the read until the test writes the key.
"""

import json
import os
import signal
import subprocess
import sys
import threading

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc_client import Client, MemsvcError
from tests.support import ROOT, TEST_EMBEDDER

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


class Startup:
    """A server process whose stderr events are read one at a time."""

    def __init__(self, *args: str):
        self.process = subprocess.Popen([sys.executable, "-m", "memsvc", "serve", *TEST_EMBEDDER, *args],
                                        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=ROOT)

    def until(self, event: str) -> dict:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("event") == event:
                return entry
        raise AssertionError(f"server exited ({self.process.wait()}) before {event!r}")


@pytest.fixture
def held_start(tmp_path):
    """A server held before its domain is built; yields (startup, release)."""
    key_pipe = tmp_path / "llm-key"
    os.mkfifo(key_pipe)
    startup = Startup("--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0",
                      "--health-listen", "127.0.0.1:0", "--summary-model", "m",
                      "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-api-key-file", str(key_pipe))

    def release() -> None:
        with open(key_pipe, "w") as pipe:
            pipe.write("key")

    yield startup, release
    if startup.process.poll() is None:
        threading.Thread(target=release, daemon=True).start()  # unblock a start the test left held
        startup.process.kill()
        startup.process.wait()


def check(channel: grpc.Channel, service: str = "") -> int:
    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status


def test_probes_see_not_serving_until_ready_then_serving_then_not_serving_while_draining(held_start):
    startup, release = held_start
    probes_address = startup.until("health port open")["address"]
    with grpc.insecure_channel(probes_address) as probes:
        assert check(probes) == NOT_SERVING
        assert check(probes, "memsvc.v1.MemoryService") == NOT_SERVING
        watch = health_pb2_grpc.HealthStub(probes).Watch(health_pb2.HealthCheckRequest())
        assert next(watch).status == NOT_SERVING
        release()
        serving = startup.until("serving")
        assert serving["health"] == probes_address
        assert next(watch).status == SERVING
        assert check(probes, "memsvc.v1.ErrorMemoryService") == SERVING
        main = next(address for address in serving["addresses"] if not address.startswith("unix://"))
        with Client(main) as client:
            client.append("s", [("user", "ready")])
        startup.process.send_signal(signal.SIGTERM)
        assert next(watch).status == NOT_SERVING
    assert startup.process.wait(30) == 0


def test_the_health_port_serves_health_and_nothing_else(make_server):
    server = make_server("--health-listen", "127.0.0.1:0")
    assert server.health and server.health != server.tcp
    with grpc.insecure_channel(server.health) as probes:
        assert check(probes) == SERVING
    with Client(server.health) as wrong_port, pytest.raises(MemsvcError) as caught:
        wrong_port.append("s", [("user", "not here")])
    assert caught.value.code == grpc.StatusCode.UNIMPLEMENTED
    assert not (server.data_dir / "sessions/s").exists()


def test_a_busy_health_port_stops_the_start(make_server, tmp_path):
    first = make_server("--health-listen", "127.0.0.1:0")
    with pytest.raises(RuntimeError, match=f"cannot listen on {first.health}"):
        make_server("--health-listen", first.health, directory=tmp_path / "other")
