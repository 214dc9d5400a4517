"""Every listener bounds its connections and their idle time, the HTTP ones their header and body time, and
descriptors stay in reserve for storage: idle and slow connections against a real server under a low
descriptor limit (`ulimit -n`, set in the server process as it starts)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import pytest
from grpc_health.v1 import health_pb2

from tests.support import ServerProcess, scrape, wait_for

SERVING = health_pb2.HealthCheckResponse.SERVING
APPEND = "/memsvc.v1.MemoryService/Append"
STALLED_POST = (f"POST {APPEND} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Content-Length: 100\r\n\r\n{").encode()
"A request's headers and the first byte of its body, the rest never sent."


def connect(address: str, count: int, payload: bytes = b"") -> list[socket.socket]:
    host, port = address.rsplit(":", 1)
    opened = []
    for _ in range(count):
        connection = socket.create_connection((host, int(port)), timeout=10)
        if payload:
            connection.sendall(payload)
        opened.append(connection)
    return opened


def closed_by_server(connection: socket.socket) -> bool:
    """True once the server closed it (EOF or reset); answers at once either way."""
    connection.setblocking(False)
    try:
        while data := connection.recv(65536):
            del data  # a 408 or a GOAWAY before the close
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def slow_request(address: str) -> bytes:
    """A GET whose headers take 13 s at 20 bytes a second."""
    return f"GET /metrics HTTP/1.1\r\nHost: {address}\r\nX-Padding: {'x' * 200}\r\n\r\n".encode()


def dripped(address: str) -> int:
    """Send `slow_request` a byte at a time, 20 a second, until the server closes the connection; returns the
    bytes it took."""
    connection = connect(address, 1)[0]
    request, sent = slow_request(address), 0
    while sent < len(request) and not closed_by_server(connection):
        connection.setblocking(True)
        try:
            connection.sendall(request[sent:sent + 1])
        except OSError:
            break
        sent += 1
        time.sleep(0.05)
    connection.close()
    return sent


def http_append(server: ServerProcess, session_id: str, text: str) -> httpx.Response:
    return httpx.post(f"http://{server.http}{APPEND}", timeout=10, json={
        "sessionId": session_id, "messages": [{"role": "ROLE_USER", "content": text}]})


def test_idle_connections_under_a_low_descriptor_limit_starve_neither_storage_nor_grpc(make_server):
    """The audit: 120 HTTP connections each sending headers and one body byte, under `ulimit -n 128`, made
    Appends fail UNAVAILABLE "Too many open files", a new client's health check time out, and wrote 145,000
    "accept() out of system resource" lines in 35 s."""
    server = make_server("--http-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                         "--header-timeout-seconds", "3", "--body-timeout-seconds", "3", nofile=128)
    stalled = connect(server.http, 120, STALLED_POST)
    stalled += connect(server.metrics, 40, b"GET /metrics HTTP/1.1\r\n")  # a thread each, before
    with server.client() as client:
        for index in range(40):
            client.append("s", [("user", f"while held {index}"), ("assistant", "stored")])
        assert len(client.get_context("s").window) == 16
    assert server.health_status() == SERVING  # a new client, on a new connection
    with server.client() as fresh:
        assert fresh.list_sessions().sessions[0].message_count == 80
    # The stalled ones are closed as their deadlines pass, those waiting in the queue then in turn.
    wait_for(lambda: all(closed_by_server(connection) for connection in stalled), timeout=60)
    assert http_append(server, "s", "over HTTP again").status_code == 200
    assert scrape(server)  # the metrics port serves again too
    time.sleep(1)
    lines = list(server.log_lines)
    assert len(lines) < 20, lines[-5:]
    assert all(line.startswith("{") for line in lines)
    assert not [line for line in lines if '"level":"error"' in line or "out of system resource" in line]
    for connection in stalled:
        connection.close()


def test_a_listener_past_max_connections_makes_new_ones_wait_and_slow_requests_are_cut(make_server):
    server = make_server("--http-listen", "127.0.0.1:0", "--max-connections", "8", "--header-timeout-seconds", "2",
                         "--body-timeout-seconds", "2", "--connection-idle-seconds", "2")
    held = connect(server.http, 8)  # the listener's eight places, taken by connections sending nothing
    waiting = connect(server.http, 1)  # accepted by the kernel only: no request of it is read meanwhile
    waiting[0].sendall(f"GET / HTTP/1.1\r\nHost: {server.http}\r\n\r\n".encode())
    time.sleep(1)
    assert not closed_by_server(waiting[0])
    waiting[0].setblocking(True)
    waiting[0].settimeout(0.5)
    with pytest.raises(TimeoutError):
        waiting[0].recv(1)  # not answered while the eight hold their places
    waiting[0].settimeout(10)
    assert waiting[0].recv(12) == b"HTTP/1.1 200"  # answered once the header deadline closed them
    wait_for(lambda: all(closed_by_server(connection) for connection in held), timeout=5)

    # A request's headers a byte at a time: the deadline runs from the first byte, not the last.
    assert dripped(server.http) < len(slow_request(server.http))
    # A body a byte at a time: cut at its own deadline, and the call stores nothing.
    slow_body = connect(server.http, 1, STALLED_POST)[0]
    wait_for(lambda: closed_by_server(slow_body), timeout=10)
    with server.client() as client:
        assert client.list_sessions().sessions == []

    # Kept alive between requests: closed after connection_idle_seconds.
    kept = connect(server.http, 1)[0]
    kept.sendall(f"GET / HTTP/1.1\r\nHost: {server.http}\r\n\r\n".encode())
    assert kept.recv(12) == b"HTTP/1.1 200"
    wait_for(lambda: closed_by_server(kept), timeout=10)


def test_the_metrics_port_bounds_its_connections_and_their_request_time(make_server):
    server = make_server("--metrics-listen", "127.0.0.1:0", "--header-timeout-seconds", "2")
    silent = connect(server.metrics, 60)  # a thread each, unbounded, before
    time.sleep(1)
    assert sum(map(closed_by_server, silent)) == 60 - 32  # past its 32 places, closed at once
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://{server.metrics}/metrics", timeout=10)  # as is a scrape while they are held
    wait_for(lambda: all(map(closed_by_server, silent)), timeout=10)  # until their deadline
    assert scrape(server)
    assert dripped(server.metrics) < len(slow_request(server.metrics))
    assert all(line.startswith("{") for line in server.log_lines)  # no traceback of a timed-out request


def test_the_grpc_listeners_bound_their_connections_and_handshakes(make_server):
    server = make_server("--health-listen", "127.0.0.1:0", "--max-connections", "8",
                         "--header-timeout-seconds", "2")
    silent = connect(server.tcp, 20)  # TCP connections that never start HTTP/2
    probes = connect(server.health, 20)
    time.sleep(1)
    # Past each server's limit a connection is closed at once (the health port keeps a few for probes).
    assert sum(map(closed_by_server, silent)) >= 12
    assert sum(map(closed_by_server, probes)) >= 12
    # The rest when their handshake deadline passes; then clients are served again.
    wait_for(lambda: all(map(closed_by_server, silent + probes)), timeout=10)
    assert server.health_status() == SERVING == server.health_status(target=server.health)
    with server.client() as client:
        client.append("s", [("user", "served")])


@pytest.mark.parametrize(("nofile", "flags", "words"), [
    (64, (), "reserved_fds (64)"),
    (256, ("--reserved-fds", "250"), "reserved_fds (250)"),
])
def test_a_descriptor_limit_too_low_for_any_connection_stops_the_start(tmp_path, nofile, flags, words):
    server = ServerProcess(tmp_path / "data", *flags, nofile=nofile)
    with pytest.raises(RuntimeError, match="exited"):
        server.start()
    assert server.process is not None and server.process.wait() == 2
    refused = [json.loads(line) for line in server.log_lines if line.startswith("{")]
    assert any("descriptor limit" in entry.get("reason", "") and words in entry["reason"] for entry in refused)


def test_max_connections_is_lowered_to_what_the_descriptor_limit_leaves(make_server):
    server = make_server("--http-listen", "127.0.0.1:0", nofile=256)
    (serving,) = server.logged("serving")
    assert serving["max_connections"] == (256 - 64) // 2
    (lowered,) = server.logged("max_connections lowered to fit the descriptor limit")
    assert (lowered["descriptor_limit"], lowered["reserved_fds"]) == (256, 64)


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one(tmp_path):
    """Many systems start services at a soft limit of 1024 under a far higher hard one."""
    probe = ("import resource; from memsvc.net import descriptors; "
             "resource.setrlimit(resource.RLIMIT_NOFILE, (256, 4096)); print(descriptors.limit(), "
             "resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["4096", "4096"]
