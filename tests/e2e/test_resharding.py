"""Resharding from three shards to four under a running append load, with the real tool
(`memsvc reshard`, a subprocess), the real HAProxy of deploy/haproxy/haproxy.cfg reloaded the way
docs/sharding.md says (a fourth server line in ring-next, then the tool switches ring), and real
PostgreSQL for error memory.

Only the sessions whose owner changed move; every acknowledged Append is found exactly once
afterwards; each session is on exactly one shard, its owner; the sessions that stay are never
refused, and a moving one is only ever refused with UNAVAILABLE. Then the tool finishes moves an
earlier run left half done, and leaves alone copies it did not make.
"""

from __future__ import annotations

import collections
import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from memsvc_client import Client, MemsvcError, UnavailableError
from tests.support import ROOT, ServerProcess, wait_for
from tests.support import haproxy as haproxy_support
from tests.support.haproxy import Proxy, ring, with_server
from tests.support.postgres import PostgresServer
from tests.support.shards import lessons_flags, owner, start_shards, stop_shards, stored_sessions
from tests.support.tenancy import write_tenants

OLD = ("memsvc-0", "memsvc-1", "memsvc-2")
NEW = "memsvc-3"
NEW_SERVER = f"server {NEW} memsvc-3:50051 id 4"


@dataclass
class Cluster:
    shards: dict[str, ServerProcess]
    proxy: Proxy
    flags: list[str]
    root: object


@pytest.fixture(scope="module")
def cluster(postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    haproxy_support.require()
    database = postgres.create_database()
    flags = lessons_flags(postgres, database)
    root = tmp_path_factory.mktemp("resharding")
    shards = start_shards(root, OLD, *flags)
    proxy = Proxy({name: shard.tcp for name, shard in shards.items()})
    try:
        proxy.start()
        yield Cluster(shards, proxy, flags, root)
    finally:
        proxy.close()
        stop_shards(shards.values())
        postgres.drop_database(database)


def reshard(cluster: Cluster, *extra: str) -> subprocess.CompletedProcess[str]:
    shards = [flag for name, shard in cluster.shards.items() for flag in ("--shard", f"{name}={shard.tcp}")]
    return subprocess.run([sys.executable, "-m", "memsvc", "reshard", *shards, "--next-proxy",
                           cluster.proxy.next_target, "--proxy", cluster.proxy.target, "--json", *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)


@dataclass
class Load:
    """Writers appending through the proxy (each Append retried with its key until acknowledged), a
    reader reading the sessions, and what each saw."""

    target: str
    sessions: list[str]
    acknowledged: dict[str, list[str]] = field(default_factory=lambda: collections.defaultdict(list))
    refused: collections.Counter[str] = field(default_factory=collections.Counter)
    "Session -> UNAVAILABLE answers its calls got."
    wrong: list[str] = field(default_factory=list)
    "Anything but an acknowledgement or UNAVAILABLE, or a read that found nothing."
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    created: int = 0

    def start(self, writers: int = 3) -> Load:
        self.threads = [threading.Thread(target=self._write, args=(number,)) for number in range(writers)]
        self.threads.append(threading.Thread(target=self._read))
        for thread in self.threads:
            thread.start()
        return self

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(120)

    def _write(self, writer: int) -> None:
        chooser = random.Random(writer)
        with Client(self.target, timeout=5) as client:
            sequence = 0
            while not self.stop.is_set():
                if sequence % 25 == 24:  # now and then a session that did not exist: creation goes on throughout
                    with self.lock:
                        self.created += 1
                        self.sessions.append(f"born-{writer}-{self.created}")
                session = chooser.choice(self.sessions)
                key = f"w{writer}-{sequence}"
                while True:  # the same key until acknowledged: a retry never stores twice
                    try:
                        client.append(session, [("user", f"message {key}")], idempotency_key=key)
                        break
                    except UnavailableError:
                        self.refused[session] += 1
                        time.sleep(0.05)
                    except MemsvcError as error:
                        self.wrong.append(f"append {session}: {error}")
                        time.sleep(0.05)
                with self.lock:
                    self.acknowledged[session].append(key)
                sequence += 1

    def _read(self) -> None:
        with Client(self.target, timeout=5, retry=None) as client:
            while not self.stop.is_set():
                with self.lock:
                    written = [session for session, keys in self.acknowledged.items() if keys]
                if not written:
                    time.sleep(0.01)
                    continue
                session = random.choice(written)
                try:
                    if not client.get_context(session).window:
                        self.wrong.append(f"read {session}: empty, after acknowledged appends")
                except UnavailableError:
                    self.refused[session] += 1
                except MemsvcError as error:
                    self.wrong.append(f"read {session}: {error}")


def exported_keys(client: Client, session: str) -> list[str]:
    """The idempotency keys of a session's messages, from its export (archived and recent), in id order."""
    ids, keys = [], []
    for part in client.export_session(session):
        for item in part.messages:
            ids.append(item.message.id)
            keys.append(item.message.content.removeprefix("message "))
    assert ids == sorted(set(ids)), f"{session}: ids increase and never repeat"
    return keys


def test_resharding_from_three_to_four_under_load_moves_only_the_sessions_whose_owner_changed(
        cluster: Cluster) -> None:
    before = [f"s-{number}" for number in range(40)]
    with Client(cluster.proxy.target) as client:
        for session in before:
            client.append(session, [("user", "message first")], idempotency_key="first")
        owners_before = {session: owner(client, session) for session in before}
    load = Load(cluster.proxy.target, list(before))
    for session in before:
        load.acknowledged[session].append("first")
    load.start()
    try:
        time.sleep(2)
        cluster.shards[NEW] = start_shards(cluster.root, [NEW], *cluster.flags)[NEW]
        cluster.proxy.shards[NEW] = cluster.shards[NEW].tcp
        live = haproxy_support.CONFIG.read_text()
        planned = with_server(with_server(live, "ring-next", f"{NEW_SERVER} proto h2"), "any", NEW_SERVER)
        switched = with_server(planned, "ring", f"{NEW_SERVER} proto h2")
        assert ring(switched, "ring") == ring(switched, "ring-next")
        cluster.proxy.reload(cluster.proxy.write(planned))
        switch = (f"{sys.executable} -m tests.support.haproxy reload {cluster.proxy.master_socket} "
                  f"{cluster.proxy.config_path} {cluster.proxy.write(switched)}")
        done = reshard(cluster, "--switch-command", switch)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        time.sleep(2)
    finally:
        load.finish()

    assert not load.wrong, load.wrong[:10]
    assert report["switched"] and not report["conflicts"] and not report["finished"]
    with Client(cluster.proxy.target) as client:
        owners_after = {session: owner(client, session) for session in load.sessions}
        changed = {session for session in before if owners_before[session] != owners_after[session]}
        assert changed and set(report["moved"]) & set(before) == changed, "only, and all, the new owner's sessions"
        assert {owners_after[session] for session in changed} == {NEW}, "3 -> 4: sessions move only to the new one"
        stored = {name: stored_sessions(shard) for name, shard in cluster.shards.items()}
        for session in load.sessions:
            if not load.acknowledged[session]:
                continue
            places = [name for name, sessions in stored.items() if session in sessions]
            assert places == [owners_after[session]], f"{session} lives on its owner alone"
            found = collections.Counter(exported_keys(client, session))
            assert set(found) == set(load.acknowledged[session]), f"{session}: every acknowledged message"
            assert set(found.values()) == {1}, f"{session}: each exactly once"
    unmoved = [session for session in before if session not in changed]
    assert not [session for session in unmoved if load.refused[session]], "a session that stays is never refused"
    assert load.created, "sessions were created before, during and after the switch"
    for name, shard in cluster.shards.items():
        with shard.client() as direct:
            info = direct.get_server_info()
            assert info.held_sessions == 0 and info.session_creation_paused_until_unix_nano == 0, name


def test_the_next_run_finishes_a_move_an_earlier_run_left_half_done(cluster: Cluster) -> None:
    """Two moves interrupted at different steps, made with the same RPCs the tool uses, and a copy
    no tool made: the next run finishes the first two and reports the third, touching nothing of it."""
    wait_for(lambda: NEW in cluster.shards)
    with Client(cluster.proxy.target) as proxy:
        home = {}
        for number in range(60):
            session = f"later-{number}"
            proxy.append(session, [("user", f"{session} one"), ("assistant", f"{session} two")])
            home.setdefault(owner(proxy, session), []).append(session)
    imported, reserved, twice = (home[NEW][0], home[NEW][1], home[NEW][2])
    elsewhere = cluster.shards["memsvc-0"]
    with cluster.shards[NEW].client() as owner_shard, elsewhere.client() as other:
        # `imported`: stopped after the import into its owner, before the releases: held on both.
        other.import_session(list(owner_shard.export_session(imported)))
        other.hold_session(imported)
        owner_shard.hold_session(imported)
        # `reserved`: stopped after holding its owner, before the import: only the old copy is stored.
        other.import_session(list(owner_shard.export_session(reserved)))
        owner_shard.hold_session(reserved)
        owner_shard.release_session(reserved, drop=True)
        owner_shard.hold_session(reserved)
        # `twice`: served by two shards, which no run of the tool leaves behind.
        other.import_session(list(owner_shard.export_session(twice)))

    done = reshard(cluster)
    assert done.returncode == 1, done.stderr  # the conflict is reported
    report = json.loads(done.stdout)
    assert report["finished"] == [imported] and report["moved"] == [reserved] and not report["switched"]
    assert list(report["conflicts"]) == [twice]
    with Client(cluster.proxy.target) as proxy:
        for session in (imported, reserved):
            assert [m.content for m in proxy.get_context(session).window] == [f"{session} one", f"{session} two"]
            assert session not in stored_sessions(elsewhere)
        assert twice in stored_sessions(elsewhere) and twice in stored_sessions(cluster.shards[NEW])
    for shard in cluster.shards.values():
        with shard.client() as direct:
            assert not direct.list_held_sessions().session_ids


# -- tenants ---------------------------------------------------------------------------------------

TENANT_TOKENS = [("reshard-admin", "*", "admin"), ("alpha-writer", "alpha", "write"), ("beta-writer", "beta", "write")]


def stored_for(shard: ServerProcess, token: str) -> set[str]:
    """The sessions of the token's tenant the shard stores, asked directly."""
    with shard.client(token=token) as client:
        return {info.session_id for info in client.list_sessions(page_size=1000).sessions}


def test_every_tenants_sessions_move_each_within_its_tenant(tmp_path) -> None:
    """Three shards to four, each with the same tenants file: the same session ids in alpha, beta and the
    default tenant, each its own session, each moved to its owner within its tenant, none merged."""
    haproxy_support.require()
    flags = ["--tenants-file", str(write_tenants(tmp_path / "tenants.toml", TENANT_TOKENS))]
    admin_token = tmp_path / "admin-token"
    admin_token.write_text("reshard-admin\n")
    shards = start_shards(tmp_path, OLD, *flags)
    proxy = Proxy({name: shard.tcp for name, shard in shards.items()})
    try:
        proxy.start()
        sessions = [f"t-{number}" for number in range(30)]
        writers = {"alpha": "alpha-writer", "beta": "beta-writer", "default": "reshard-admin"}
        for team, token in writers.items():
            with Client(proxy.target, token=token) as client:
                for session in sessions:
                    client.append(session, [("user", f"{team} {session}")])
        shards[NEW] = start_shards(tmp_path, [NEW], *flags)[NEW]
        proxy.shards[NEW] = shards[NEW].tcp
        planned = with_server(with_server(haproxy_support.CONFIG.read_text(), "ring-next", f"{NEW_SERVER} proto h2"),
                              "any", NEW_SERVER)
        switched = with_server(planned, "ring", f"{NEW_SERVER} proto h2")
        proxy.reload(proxy.write(planned))
        switch = (f"{sys.executable} -m tests.support.haproxy reload {proxy.master_socket} {proxy.config_path} "
                  f"{proxy.write(switched)}")
        addresses = [flag for name, shard in shards.items() for flag in ("--shard", f"{name}={shard.tcp}")]
        done = subprocess.run([sys.executable, "-m", "memsvc", "reshard", *addresses, "--next-proxy",
                               proxy.next_target, "--proxy", proxy.target, "--token-file", str(admin_token),
                               "--switch-command", switch, "--json"],
                              capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)

        with Client(proxy.target, token="reshard-admin") as admin:
            owners = {session: owner(admin, session) for session in sessions}
        moving = sorted(session for session in sessions if owners[session] == NEW)
        assert moving, "some sessions change owner"
        assert sorted(report["moved"]) == sorted([*moving, *(f"{team}/{s}" for team in ("alpha", "beta")
                                                             for s in moving)])
        assert not report["conflicts"]
        for team, token in writers.items():
            stored = {name: stored_for(shard, token) for name, shard in shards.items()}
            with Client(proxy.target, token=token) as client:
                for session in sessions:
                    assert [name for name, held in stored.items() if session in held] == [owners[session]], (
                        f"{team}/{session} lives on its owner alone")
                    assert [m.content for m in client.get_context(session).window] == [f"{team} {session}"]
        for name, shard in shards.items():
            with shard.client(token="reshard-admin") as direct:
                assert direct.get_server_info().session_creation_paused_until_unix_nano == 0, name
                for team in ("alpha", "beta"):
                    with shard.client(token="reshard-admin", tenant=team) as acting:
                        assert not acting.list_held_sessions().session_ids, f"{name}/{team}"
    finally:
        proxy.close()
        stop_shards(shards.values())


def test_reshard_refuses_to_move_one_tenant_only() -> None:
    """Moving one tenant's sessions and switching the ring would strand every other tenant's: refused
    before any call (the addresses are never dialled)."""
    done = subprocess.run([sys.executable, "-m", "memsvc", "reshard", "--shard", "memsvc-0=127.0.0.1:1",
                           "--next-proxy", "127.0.0.1:1", "--proxy", "127.0.0.1:1", "--tenant", "alpha"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, check=False)
    assert done.returncode == 2
    assert "reshard moves every tenant's sessions" in done.stderr and "drop --tenant" in done.stderr
