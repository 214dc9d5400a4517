"""`memsvc reshard`: move exactly the sessions whose owner changes when the shards change.

The proxy decides owners: each session's new owner is the shard that answers GetServerInfo for it
on the proxy's next-ring listener (`--next-proxy`), so this tool never re-implements a proxy's hash
(HAProxy's, nginx's or Envoy's alike). A run, which is safe to repeat:

 1. pauses session creation on every shard (a lease it renews; it lapses if the tool dies), waits
    for Appends already creating one, and lists what every shard stores and holds;
 2. asks the next ring for each session's owner, and holds each session that moves on its new owner
    (refused there, UNAVAILABLE, so nothing can create it before it arrives);
 3. unless the live proxy (`--proxy`) routes every moving session to its new owner already, runs
    `--switch-command` (which must return once no proxy process routes by the old ring) and checks;
    then lets sessions be created again: from here on new ones are born on their owners;
 4. moves each session: holds it on its old shard (writes in flight end first; from then on it is
    UNAVAILABLE there), pipes its export into an import on the new owner (stored whole or not at
    all, its count and SHA-256 checked), releases it there, and drops the old copy.

Every hold it takes is a lease it renews (each third of the shortest hold_lease_seconds of the
shards) until it releases it; if the tool dies, the holds lapse by themselves, the new owner's
first, aborting an import it made, so no session is left refused, nor served twice.

Every tenant's sessions move: the tool lists the shards' tenants (ListTenants, so its token must be
an admin of every tenant, `*`, where shards have a tenants file) and acts for each by naming it in
the `memsvc-tenant` metadata; the same session id in two tenants is two sessions, each moved with
its tenant's calls (the proxy routes by the id alone, so both have the same owner).

A session is thus readable throughout, or refused with UNAVAILABLE while it moves, and never in two
places serving writes. A run that stops anywhere is finished by the next: a session held on its
old shard whose new owner has it already is compared (SHA-256) and dropped, a new owner's copy
still held is released, stale holds are released. Copies the tool did not make (two shards serving
the same session) are reported and left alone. Must never decide ownership itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from memsvc.cli.connection import add_connection_arguments, client_arguments
from memsvc.tenancy.tenants import DEFAULT

PAUSE_SECONDS = 120
SETTLE_SECONDS = 1.0
"After pausing creation, how long Appends that were creating a session get to finish."
SWITCH_CHECK_SECONDS = 60.0
DEFAULT_LEASE_SECONDS = 600.0
"A shard's hold lease when it does not say (an earlier version's shards, whose holds never lapse)."

Key = tuple[str, str]
"(tenant, session id): one session; the same id in two tenants is two sessions."


def label(key: Key) -> str:
    """How the report and the log name a session: its id, after its tenant and a slash unless the default's
    (a tenant's name has no slash)."""
    tenant, session = key
    return session if tenant == DEFAULT else f"{tenant}/{session}"


@dataclass
class Plan:
    owners: dict[Key, str] = field(default_factory=dict)
    "Session -> its shard on the next ring."
    stored: dict[Key, set[str]] = field(default_factory=dict)
    "Session -> the shards storing it."
    held: dict[str, set[Key]] = field(default_factory=dict)
    "Shard -> the sessions held there."

    def moves(self) -> dict[Key, str]:
        """Session -> a shard it leaves: one storing it that is not its owner."""
        return {session: next(iter(shards - {self.owners[session]}))
                for session, shards in self.stored.items() if shards - {self.owners[session]}}


@dataclass
class Report:
    moved: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    "Moves an earlier run left half done, completed."
    conflicts: dict[str, str] = field(default_factory=dict)
    released: list[str] = field(default_factory=list)
    "Stale holds released (shard/session)."
    switched: bool = False


class Resharding:
    """`shards(name, tenant)`: that shard's client acting for that tenant (the default tenant's for the
    server-wide calls)."""

    def __init__(self, shards: Callable[[str, str], Any], names: list[str], next_proxy: Any, live_proxy: Any,
                 switch_command: str | None, log: Any = print):
        self.shards = shards
        self.names = names
        self.next_proxy = next_proxy
        self.live_proxy = live_proxy
        self.switch_command = switch_command
        self.log = log
        self.report = Report()
        self.lease_seconds = 0.0
        "The shortest hold lease among the shards (check_names reads it)."
        self._holding: set[tuple[str, Key]] = set()
        "(shard, session) held by this run and not released yet: renewed until they are."
        self._holding_lock = threading.Lock()
        self._owners: dict[Key, str] = {}
        "Session -> its new owner, once surveyed: its reservation there is renewed before its source's hold."

    # -- survey and plan ------------------------------------------------------------------

    def check_names(self) -> None:
        leases = []
        for name in self.names:
            info = self.shards(name, DEFAULT).get_server_info()
            if info.shard_name != name:
                raise SystemExit(f"memsvc: --shard {name} answers as shard {info.shard_name!r}: check the address "
                                 "(and the shard_name setting)")
            leases.append(info.hold_lease_seconds or DEFAULT_LEASE_SECONDS)
        self.lease_seconds = min(leases, default=DEFAULT_LEASE_SECONDS)

    def tenants(self) -> list[str]:
        """Every tenant any shard serves (a shard predating tenants serves the default one)."""
        from memsvc_client import UnimplementedError

        found = {DEFAULT}
        for name in self.names:
            try:
                found.update(self.shards(name, DEFAULT).list_tenants().tenants)
            except UnimplementedError:
                pass
        return sorted(found)

    def survey(self) -> Plan:
        plan = Plan()
        for tenant in self.tenants():
            for name in self.names:
                client = self.shards(name, tenant)
                for session in _pages(lambda token, c=client: c.list_sessions(page_size=1000, page_token=token),
                                      "sessions"):
                    plan.stored.setdefault((tenant, session.session_id), set()).add(name)
                plan.held.setdefault(name, set()).update(
                    (tenant, held) for held in _pages(lambda token, c=client: c.list_held_sessions(
                        page_size=1000, page_token=token), "session_ids"))
        keys = set(plan.stored) | set().union(*plan.held.values())
        ids = sorted({session for _, session in keys})  # the proxy routes by the id: one question per id
        with ThreadPoolExecutor(8) as pool:
            owners = dict(zip(ids, pool.map(lambda session: self.next_proxy.get_server_info(session).shard_name,
                                            ids), strict=True))
        plan.owners = {key: owners[key[1]] for key in keys}
        unknown = set(plan.owners.values()) - set(self.names)
        if unknown:
            raise SystemExit(f"memsvc: the next ring routes sessions to {sorted(unknown)}, which no --shard names")
        return plan

    # -- the run ----------------------------------------------------------------------------

    def run(self, dry_run: bool = False) -> Report:
        self.check_names()
        if dry_run:
            plan = self.survey()
            for key, source in sorted(self._movable(plan).items()):
                self.log(f"would move {label(key)}: {source} -> {plan.owners[key]}")
            return self.report
        with self._renewing_holds():
            with self._creation_paused():
                time.sleep(SETTLE_SECONDS)
                plan = self.survey()
                self._owners = plan.owners
                moves = self._movable(plan)
                self.log(f"{len(plan.owners)} sessions, {len(moves)} to move, {len(self.report.conflicts)} "
                         "conflicts")
                for key in moves:
                    if plan.owners[key] not in plan.stored[key]:
                        self._hold(plan.owners[key], key)
                self._switch(sorted(moves), plan.owners)
            for key, source in sorted(moves.items()):
                self._move(key, source, plan)
            self._release_stale(plan, set(moves))
        return self.report

    def _movable(self, plan: Plan) -> dict[Key, str]:
        """The moves to make; the sessions no run of this tool left as they are go to the conflicts."""
        moves = {}
        for key, source in plan.moves().items():
            owner, copies = plan.owners[key], plan.stored[key]
            if len(copies - {owner}) > 1:
                self.report.conflicts[label(key)] = f"stored on {', '.join(sorted(copies))}: keep one by hand"
            elif owner in copies and key not in plan.held[source]:
                self.report.conflicts[label(key)] = (f"served by both {source} and {owner}: export both, merge them "
                                                     "by hand and remove one")
            else:
                moves[key] = source
        return moves

    def _switch(self, moving: list[Key], owners: dict[Key, str]) -> None:
        """Make the live proxy route every moving session to its new owner."""
        if self._live_agrees(moving, owners):
            return
        if not self.switch_command:
            raise SystemExit("memsvc: the live proxy still routes sessions by the old ring; give --switch-command "
                             "(it makes ring the ring-next) or switch it and run again")
        self.log(f"switching the proxy: {self.switch_command}")
        subprocess.run(self.switch_command, shell=True, check=True)
        self.report.switched = True
        deadline = time.monotonic() + SWITCH_CHECK_SECONDS
        while not self._live_agrees(moving, owners):
            if time.monotonic() > deadline:
                raise SystemExit("memsvc: after the switch command the live proxy still routes by the old ring")
            time.sleep(0.2)

    def _live_agrees(self, moving: list[Key], owners: dict[Key, str]) -> bool:
        return all(self.live_proxy.get_server_info(session).shard_name == owners[tenant, session]
                   for tenant, session in moving)

    def _move(self, key: Key, source: str, plan: Plan) -> None:
        owner, (tenant, session) = plan.owners[key], key
        old, new = self.shards(source, tenant), self.shards(owner, tenant)
        self._hold(source, key)  # from here on its old shard refuses it; writes in flight ended first
        self._hold(owner, key)  # renewed with it, the new owner's first
        if owner in plan.stored[key]:
            # An earlier run imported it and stopped: the copies must be the same one.
            mine, theirs = _end(old.export_session(session)), _end(new.export_session(session))
            if (mine.messages, mine.sha256) != (theirs.messages, theirs.sha256):
                self.report.conflicts[label(key)] = (f"{source} and {owner} hold different copies: both stay held; "
                                                     "compare them (memsvc export) and release one by hand")
                return
            messages, digest = theirs.messages, theirs.sha256
            self.report.finished.append(label(key))
        else:
            imported = new.import_session(old.export_session(session))
            messages, digest = imported.messages, imported.sha256
            self.report.moved.append(label(key))
        self._release(owner, key)
        self._release(source, key, drop=True)
        self.log(f"moved {label(key)}: {source} -> {owner} ({messages} messages, sha256 {digest[:12]})")

    def _release_stale(self, plan: Plan, moved: set[Key]) -> None:
        """Holds no move needs any more: on a session's owner, or on a shard that does not store it."""
        for name, keys in plan.held.items():
            for key in sorted(keys - moved):
                if label(key) in self.report.conflicts:
                    continue
                if name == plan.owners.get(key) or name not in plan.stored.get(key, set()):
                    self._release(name, key)
                    self.report.released.append(f"{name}/{label(key)}")

    # -- holds, leased ----------------------------------------------------------------------

    def _hold(self, shard: str, key: Key) -> None:
        self.shards(shard, key[0]).hold_session(key[1])
        with self._holding_lock:
            self._holding.add((shard, key))

    def _release(self, shard: str, key: Key, drop: bool = False) -> None:
        self.shards(shard, key[0]).release_session(key[1], drop=drop)
        with self._holding_lock:
            self._holding.discard((shard, key))

    @contextmanager
    def _renewing_holds(self) -> Iterator[None]:
        """The holds this run takes, renewed for the block: a reservation before the hold of the same
        session's source, so the source's lease always outlasts it."""
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait((self.lease_seconds or DEFAULT_LEASE_SECONDS) / 3):
                with self._holding_lock:
                    held = sorted(self._holding, key=lambda pair: (pair[1], pair[0] != self._owner_of(pair)))
                for shard, (tenant, session) in held:
                    self.shards(shard, tenant).hold_session(session)

        renewing = threading.Thread(target=renew, name="hold-renewal", daemon=True)
        renewing.start()
        try:
            yield
        finally:
            stop.set()
            renewing.join()

    def _owner_of(self, pair: tuple[str, Key]) -> str:
        return self._owners.get(pair[1], "")

    # -- pausing creation ---------------------------------------------------------------------

    @contextmanager
    def _creation_paused(self) -> Iterator[None]:
        """Session creation paused on every shard for the block, the lease renewed meanwhile."""
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(PAUSE_SECONDS / 3):
                self._pause(PAUSE_SECONDS)

        self._pause(PAUSE_SECONDS)
        renewing = threading.Thread(target=renew, name="pause-renewal", daemon=True)
        renewing.start()
        try:
            yield
        finally:
            stop.set()
            renewing.join()
            self._pause(0)

    def _pause(self, seconds: int) -> None:
        for name in self.names:
            self.shards(name, DEFAULT).pause_session_creation(seconds)


def _pages(fetch: Any, items: str) -> Iterator[Any]:
    token = ""
    while True:
        page = fetch(token)
        yield from getattr(page, items)
        if not (token := page.next_page_token):
            return


def _end(parts: Iterator[Any]) -> Any:
    """The end part of an export, read through."""
    end = None
    for part in parts:
        end = part.end or end
    return end


def add_command(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "reshard", help="move the sessions whose shard changes when the shards change",
        description=__doc__.split("\n\n", 1)[1].split(" Must never")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_connection_arguments(parser, target=False)
    parser.add_argument("--shard", action="append", required=True, metavar="NAME=ADDRESS",
                        help="every shard of the old and the new ring: its shard_name and its own address "
                             "(not the proxy's); repeat for each")
    parser.add_argument("--next-proxy", required=True, metavar="HOST:PORT",
                        help="the proxy's listener routing by the new ring (HAProxy: frontend memsvc-next)")
    parser.add_argument("--proxy", required=True, metavar="HOST:PORT", help="the proxy's live listener")
    parser.add_argument("--switch-command", help="a shell command that makes the live ring the new one and returns "
                                                 "once no proxy process routes by the old ring")
    parser.add_argument("--dry-run", action="store_true", help="only print which sessions would move")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(main=run)


def run(args: argparse.Namespace) -> int:
    from memsvc_client import Client, MemsvcError

    addresses = dict(item.split("=", 1) for item in args.shard if "=" in item)
    if len(addresses) != len(args.shard):
        print("memsvc: --shard takes NAME=ADDRESS", file=sys.stderr)
        return 2
    if args.tenant:
        print("memsvc: reshard moves every tenant's sessions (it asks the shards which, as an admin of every "
              "tenant): drop --tenant", file=sys.stderr)
        return 2
    options = client_arguments(args)
    clients: dict[tuple[str, str], Any] = {}
    making = threading.Lock()  # the hold renewal's thread asks too

    def shard(name: str, tenant: str) -> Any:
        """The shard's client acting for the tenant: named in memsvc-tenant, but for the default one."""
        with making:
            if (name, tenant) not in clients:
                clients[name, tenant] = Client(addresses[name], **{
                    **options, "tenant": None if tenant == DEFAULT else tenant})
            return clients[name, tenant]

    next_proxy, live_proxy = Client(args.next_proxy, **options), Client(args.proxy, **options)
    try:
        tool = Resharding(shard, list(addresses), next_proxy, live_proxy, args.switch_command,
                          log=lambda line: print(line, file=sys.stderr))
        report = tool.run(dry_run=args.dry_run)
    except MemsvcError as error:
        print(f"memsvc: {error}", file=sys.stderr)
        return 1
    finally:
        for client in (*clients.values(), next_proxy, live_proxy):
            client.close()
    if args.json:
        print(json.dumps(report.__dict__, indent=2, sort_keys=True))
    else:
        print(f"moved {len(report.moved)} sessions, finished {len(report.finished)} earlier moves, "
              f"released {len(report.released)} stale holds; {len(report.conflicts)} conflicts")
        for session, why in sorted(report.conflicts.items()):
            print(f"conflict {session}: {why}")
    return 1 if report.conflicts else 0
