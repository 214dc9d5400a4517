"""A real PostgreSQL server for error memory's tests and benchmark: Debian's
`postgresql` (scripts/install-postgresql.sh, run by `make test`), a cluster
made by initdb in a temp directory, on a free port, as the `postgres` user
when we are root (PostgreSQL refuses to run as root).

One server per test session (`postgres`), one fresh database per test. The
server is our own child and dies with us (a parent-death signal), so a test
run killed midway leaves no server behind. Without the package the tests
that need it are skipped, unless MEMSVC_REQUIRE_POSTGRES is set (`make test`
sets it): then they fail.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.support import free_port

ROLE = "memsvc"
PASSWORD = "only-tests-know-this-9c2f"
"memsvc's password on every test server: tests check that it never shows in a log."
INSTALL = "scripts/install-postgresql.sh"
_databases = itertools.count()


def bin_dir() -> Path | None:
    """The newest installed PostgreSQL's programs (Debian: /usr/lib/postgresql/<major>/bin)."""
    found = [path.parent for path in Path("/usr/lib/postgresql").glob("*/bin/postgres")]
    return max(found, key=lambda path: int(path.parent.name), default=None)


class PostgresServer:
    """One cluster in a temp directory. `fsync` off makes tests quicker; the benchmark keeps it on."""

    def __init__(self, *, fsync: bool = False):
        programs = bin_dir()
        if programs is None:
            raise RuntimeError(f"PostgreSQL is not installed: run {INSTALL} (as root)")
        self.programs = programs
        self.fsync = fsync
        self.root = Path(tempfile.mkdtemp(prefix="memsvc-postgres-"))
        self.as_owner: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
            self.as_owner = ["setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups",
                             "--pdeathsig=SIGQUIT", "--"]
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.password_file = self.root / "password"
        self.password_file.write_text(PASSWORD + "\n")
        subprocess.run([*self.as_owner, str(programs / "initdb"), "-D", str(self.data), "-U", "postgres",
                        "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8",
                        "--no-sync"], check=True, capture_output=True)
        self._role_made = False

    @property
    def data(self) -> Path:
        return self.root / "data"

    def start(self, timeout: float = 30.0) -> PostgresServer:
        log = (self.root / "server.log").open("ab")
        settings = ["-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", f"fsync={self.fsync}"]
        self.process = subprocess.Popen([*self.as_owner, str(self.programs / "postgres"), "-D", str(self.data),
                                         "-p", str(self.port), "-k", str(self.root), *settings],
                                        stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self.admin():
                    break
            except psycopg.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("PostgreSQL did not start:\n" + (self.root / "server.log").read_text()) from None
                time.sleep(0.05)
        if not self._role_made:
            with self.admin() as admin:
                admin.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'")
            self._role_made = True
        return self

    def stop(self) -> None:
        """Fast shutdown: connected clients are cut off, as in a real outage."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(60)
        self.process = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def admin(self, database: str = "postgres") -> psycopg.Connection:
        """A superuser connection over the unix socket."""
        return psycopg.connect(host=str(self.root), port=self.port, user="postgres", dbname=database, autocommit=True)

    def create_database(self) -> str:
        name = f"lessons_{next(_databases)}"
        with self.admin() as admin:
            admin.execute(f"CREATE DATABASE {name} OWNER {ROLE}")
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def dsn(self, database: str) -> str:
        """How memsvc reaches `database`: TCP with a password (given apart, never in the DSN)."""
        return f"host=127.0.0.1 port={self.port} dbname={database} user={ROLE}"


def missing() -> str:
    """Why no PostgreSQL test server can run here, or ""."""
    if bin_dir() is None:
        return f"PostgreSQL is not installed (run {INSTALL} as root, or make test)"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is needed to run PostgreSQL as the postgres user"
    return ""


def require() -> None:
    """Skip the calling test when there is no PostgreSQL, or fail when the run requires it."""
    reason = missing()
    if reason:
        if os.environ.get("MEMSVC_REQUIRE_POSTGRES"):
            pytest.fail(f"MEMSVC_REQUIRE_POSTGRES is set, but {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    require()
    server = PostgresServer().start()
    yield server
    server.close()


@pytest.fixture
def postgres_database(postgres: PostgresServer) -> Iterator[str]:
    """A fresh, empty database owned by memsvc's role."""
    name = postgres.create_database()
    yield name
    postgres.drop_database(name)


@pytest.fixture
def private_postgres() -> Iterator[PostgresServer]:
    """A server of the test's own, not yet started: to stop, start or reconfigure at will."""
    require()
    server = PostgresServer()
    yield server
    server.close()
