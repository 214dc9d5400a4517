"""memsvc shards for the sharding tests and benchmark: real servers, each with its own data
directory, its shard_name and a fixed port (a proxy's configuration names it, so a restarted
shard comes back where the proxy looks), sharing one PostgreSQL database for error memory."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

from memsvc_client import Client
from tests.support import ServerProcess, free_port
from tests.support.postgres import PostgresServer


def lessons_flags(postgres: PostgresServer, database: str) -> list[str]:
    return ["--lessons-backend", "postgres", "--lessons-dsn", postgres.dsn(database),
            "--lessons-password-file", str(postgres.password_file)]


def start_shards(root: Path, names: Iterable[str], *flags: str) -> dict[str, ServerProcess]:
    """One server per name under `root`, started side by side (each takes a few seconds)."""
    shards = {name: ServerProcess(root / name, "--shard-name", name, *flags, tcp_port=free_port()) for name in names}
    failures: list[BaseException] = []

    def start(server: ServerProcess) -> None:
        try:
            server.start()
        except BaseException as error:  # reported below, on the caller's thread
            failures.append(error)

    threads = [threading.Thread(target=start, args=(server,)) for server in shards.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        stop_shards(shards.values())
        raise failures[0]
    return shards


def stop_shards(shards: Iterable[ServerProcess]) -> None:
    for server in shards:
        if server.process is not None and server.process.poll() is None:
            server.kill()


def stored_sessions(shard: ServerProcess) -> set[str]:
    """Every session the shard stores, asked directly (not through a proxy)."""
    found: set[str] = set()
    token = ""
    with shard.client() as client:
        while True:
            page = client.list_sessions(page_size=1000, page_token=token)
            found.update(info.session_id for info in page.sessions)
            if not (token := page.next_page_token):
                return found


def owner(proxy: Client, session_id: str) -> str:
    """The shard a proxy routes the session to: the one that answers GetServerInfo for it."""
    return proxy.get_server_info(session_id).shard_name
