"""A real HAProxy for the sharding tests and benchmark: Debian's `haproxy` (scripts/install-proxies.sh,
run by `make test`), started in master-worker mode from deploy/haproxy/haproxy.cfg with only its
addresses moved: the listeners to free loopback ports, the shards to the test servers', the
sockets to a temp directory. Everything else in the file is what a deployment runs.

The proxy is our own child and dies with us (a parent-death signal), so a test run killed midway
leaves none behind. Without the package the tests that need it are skipped, unless
MEMSVC_REQUIRE_HAPROXY is set (`make test` sets it): then they fail.

    python -m tests.support.haproxy reload MASTER_SOCKET CONFIG NEW_CONFIG

copies NEW_CONFIG over CONFIG, reloads the proxy and returns once no worker of the previous
configuration is left: the switch command the resharding test hands to `memsvc reshard`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support import ROOT, free_port

CONFIG = ROOT / "deploy" / "haproxy" / "haproxy.cfg"
INSTALL = "scripts/install-proxies.sh"
FRONTENDS = {"memsvc": ":50051", "memsvc-next": ":50052", "stats": ":8404"}
"The deploy file's listeners, by frontend."


def missing() -> str:
    return "" if shutil.which("haproxy") else f"HAProxy is not installed (run {INSTALL} as root, or make test)"


def require() -> None:
    """Skip the calling test when there is no HAProxy, or fail when the run requires it."""
    reason = missing()
    if reason:
        if os.environ.get("MEMSVC_REQUIRE_HAPROXY"):
            pytest.fail(f"MEMSVC_REQUIRE_HAPROXY is set, but {reason}")
        pytest.skip(reason)


def with_server(config: str, backend: str, line: str) -> str:
    """`config` with `line` (a `server ...` line) added at the end of `backend`'s servers."""
    lines = config.splitlines()
    start = lines.index(f"backend {backend}")
    end = next((index for index in range(start + 1, len(lines)) if not lines[index].startswith(" ")), len(lines))
    last = max(index for index in range(start, end) if lines[index].lstrip().startswith("server "))
    return "\n".join(lines[:last + 1] + [f"    {line}"] + lines[last + 1:]) + "\n"


def ring(config: str, backend: str) -> list[str]:
    """The `server` lines of one backend, as written."""
    lines = config.splitlines()
    start = lines.index(f"backend {backend}")
    found = []
    for line in lines[start + 1:]:
        if not line.startswith(" "):
            break
        if line.lstrip().startswith("server "):
            found.append(line.strip())
    return found


class Proxy:
    """One HAProxy (master and worker) running the deploy configuration with local addresses."""

    def __init__(self, shards: Mapping[str, str], config: str | None = None):
        self.root = Path(tempfile.mkdtemp(prefix="memsvc-haproxy-"))
        self.ports = {frontend: free_port() for frontend in FRONTENDS}
        self.target = f"127.0.0.1:{self.ports['memsvc']}"
        "Where clients connect: the ring of the current shards."
        self.next_target = f"127.0.0.1:{self.ports['memsvc-next']}"
        "The ring after a resharding (`memsvc reshard --next-proxy`)."
        self.stats_url = f"http://127.0.0.1:{self.ports['stats']}"
        self.config_path = self.root / "haproxy.cfg"
        self.master_socket = self.root / "master.sock"
        self.shards = dict(shards)
        self.config_path.write_text(self.localized(config or CONFIG.read_text()))
        self.process: subprocess.Popen[bytes] | None = None

    def localized(self, config: str) -> str:
        """The deploy file's text with its listeners, sockets and shards moved to this machine."""
        for frontend, address in FRONTENDS.items():
            config = re.sub(rf"(?m)^(\s*bind ){re.escape(address)}\b", rf"\g<1>127.0.0.1:{self.ports[frontend]}",
                            config)
        config = config.replace("/var/run/haproxy/admin.sock", str(self.root / "admin.sock"))
        for name, address in self.shards.items():
            config = re.sub(rf"(?m)^(\s*server {re.escape(name)} )\S+", rf"\g<1>{address}", config)
        return config

    def start(self, timeout: float = 30.0) -> Proxy:
        log = (self.root / "haproxy.log").open("ab")
        self.process = subprocess.Popen(["setpriv", "--pdeathsig=SIGTERM", "--", "haproxy", "-W", "-db", "-S",
                                         str(self.master_socket), "-f", str(self.config_path)],
                                        stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not accepts(self.target):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("HAProxy did not start:\n" + self.log())
            time.sleep(0.05)
        return self

    def log(self) -> str:
        return (self.root / "haproxy.log").read_text(errors="replace")

    def write(self, config: str) -> Path:
        """A configuration file beside the live one, localized, for `reload`."""
        path = self.root / f"next-{time.monotonic_ns()}.cfg"
        path.write_text(self.localized(config))
        return path

    def reload(self, new_config: Path) -> None:
        reload(self.master_socket, self.config_path, new_config)

    def states(self, backend: str) -> dict[str, tuple[str, str]]:
        """Server -> (status, last check) in `backend`, from the stats socket."""
        rows = _command(self.root / "admin.sock", "show stat").splitlines()
        header = rows[0].lstrip("# ").split(",")
        found = {}
        for row in rows[1:]:
            fields = dict(zip(header, row.split(","), strict=False))
            if fields.get("pxname") == backend and fields.get("svname") not in ("FRONTEND", "BACKEND"):
                found[fields["svname"]] = (fields["status"], fields["check_status"])
        return found

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
        self.process = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def accepts(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


def _command(path: Path, command: str, timeout: float = 10.0) -> str:
    """One command on a HAProxy CLI socket; the master's is away for a moment while it reloads."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.socket(socket.AF_UNIX) as connection:
                connection.settimeout(timeout)
                connection.connect(str(path))
                connection.sendall(command.encode() + b"\n")
                connection.shutdown(socket.SHUT_WR)
                reply = b""
                while chunk := connection.recv(65536):
                    reply += chunk
                return reply.decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _workers(master_socket: Path) -> tuple[list[str], list[str]]:
    """(current workers, old workers still finishing calls), by pid."""
    current: list[str] = []
    old: list[str] = []
    section = current
    for line in _command(master_socket, "show proc").splitlines():
        if line.startswith("# old workers"):
            section = old
        elif line.startswith("#"):
            section = current if line.startswith("# workers") else []
        elif line.split() and line.split()[0].isdigit() and "worker" in line:
            section.append(line.split()[0])
    return current, old


def reload(master_socket: Path, config: Path, new_config: Path, timeout: float = 60.0) -> None:
    """Put `new_config` in place of `config`, reload, and wait until no old worker is left."""
    before, _ = _workers(master_socket)
    shutil.copyfile(new_config, config)
    _command(master_socket, "reload")
    deadline = time.monotonic() + timeout
    while True:
        current, old = _workers(master_socket)
        if current and not set(current) & set(before) and not old:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"HAProxy did not finish reloading: workers {current}, old {old}")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.haproxy")
    commands = parser.add_subparsers(dest="command", required=True)
    switch = commands.add_parser("reload")
    switch.add_argument("master_socket", type=Path)
    switch.add_argument("config", type=Path)
    switch.add_argument("new_config", type=Path)
    args = parser.parse_args()
    reload(args.master_socket, args.config, args.new_config)
    print(f"reloaded {args.config}", file=sys.stderr)


if __name__ == "__main__":
    main()
