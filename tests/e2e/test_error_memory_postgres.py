"""Error memory on PostgreSQL through a real server: a refused login stops
the start, a database down at start or later makes ErrorMemoryService
UNAVAILABLE and NOT_SERVING while the rest serves, a full disk is
RESOURCE_EXHAUSTED, and the password is never in a log line."""

from __future__ import annotations

import secrets
import subprocess

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc_client import MemsvcError
from tests.support import ServerProcess, wait_for
from tests.support.lessons import PostgresBackend
from tests.support.postgres import PASSWORD

pytestmark = pytest.mark.in_process

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
MEMORY, ERROR_MEMORY = "memsvc.v1.MemoryService", "memsvc.v1.ErrorMemoryService"


def health(server: ServerProcess, service: str) -> int:
    with grpc.insecure_channel(server.tcp) as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service)).status


def refused(call) -> MemsvcError:
    with pytest.raises(MemsvcError) as caught:
        call()
    return caught.value


def no_password_in(server: ServerProcess) -> None:
    assert server.log_lines and not any(PASSWORD in line for line in server.log_lines)


def test_a_refused_login_stops_the_start_with_exit_code_2_and_says_why(postgres, postgres_database, tmp_path):
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password\n")
    server = ServerProcess(tmp_path / "data", "--lessons-backend=postgres",
                           f"--lessons-dsn={postgres.dsn(postgres_database)}", f"--lessons-password-file={wrong}")
    with pytest.raises(RuntimeError, match=r"server exited \(2\)"):
        server.start()
    output = "".join(server.log_lines)
    assert "refused memsvc's login" in output and "password authentication failed" in output
    assert "not-the-password" not in output


@pytest.mark.as_process
def test_the_password_may_come_from_the_environment(make_server, postgres, postgres_database):
    server = make_server("--lessons-backend=postgres", f"--lessons-dsn={postgres.dsn(postgres_database)}",
                         env={"MEMSVC_LESSONS_PASSWORD": PASSWORD})
    with server.client() as client:
        assert client.record_error("git", "rejected: non-fast-forward", "git pull --rebase").stored
    no_password_in(server)


def test_a_database_down_makes_only_error_memory_unavailable_until_it_is_back(make_server, private_postgres):
    database = private_postgres.start().create_database()
    private_postgres.stop()
    server = make_server(*PostgresBackend(private_postgres, database).server_args)
    with server.client() as client:
        assert (health(server, ""), health(server, MEMORY), health(server, ERROR_MEMORY)) == (
            SERVING, SERVING, NOT_SERVING)
        client.append("s", [("user", "sessions never wait for the lesson database")])
        error = refused(lambda: client.record_error("git", "rejected: non-fast-forward", "git pull --rebase"))
        assert (error.code, error.reason) == (grpc.StatusCode.UNAVAILABLE, "LESSONS_DATABASE_UNAVAILABLE")

        private_postgres.start()
        wait_for(lambda: health(server, ERROR_MEMORY) == SERVING)
        record = client.record_error("git", "rejected: non-fast-forward", "git pull --rebase").record

        private_postgres.stop()  # an outage while serving
        error = refused(lambda: client.lookup_errors("git", "! [rejected] (non-fast-forward)"))
        assert (error.code, error.reason) == (grpc.StatusCode.UNAVAILABLE, "LESSONS_DATABASE_UNAVAILABLE")
        wait_for(lambda: health(server, ERROR_MEMORY) == NOT_SERVING)
        assert [m.content for m in client.get_context("s").window] == ["sessions never wait for the lesson database"]

        private_postgres.start()
        wait_for(lambda: health(server, ERROR_MEMORY) == SERVING)
        assert [r.id for r in client.lookup_errors("git", "! [rejected] (non-fast-forward)").records] == [record.id]
    assert any('"error memory not serving"' in line for line in server.log_lines)
    no_password_in(server)


@pytest.fixture
def small_tablespace(postgres, postgres_database, tmp_path):
    """A 1 MiB filesystem for the lessons table, so the database's disk really fills."""
    mount = postgres.root / f"small-{postgres_database}"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,uid=postgres,gid=postgres", "tmpfs", str(mount)],
                      capture_output=True).returncode:
        pytest.skip("mounting a small filesystem needs root")
    try:
        with postgres.admin() as admin:
            admin.execute(f"CREATE TABLESPACE small_{postgres_database} LOCATION '{mount}'")
        yield f"small_{postgres_database}"
    finally:
        postgres.drop_database(postgres_database)
        with postgres.admin() as admin:
            admin.execute(f"DROP TABLESPACE IF EXISTS small_{postgres_database}")
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_database_disk_is_resource_exhausted_and_keeps_what_was_stored(make_server, postgres,
                                                                              postgres_database, small_tablespace):
    server = make_server(*PostgresBackend(postgres, postgres_database).server_args)
    with server.client() as client:
        acknowledged = [client.record_error("shell", "first", "fix").record.id]
        with postgres.admin(postgres_database) as admin:
            admin.execute(f"ALTER TABLE memsvc_lessons SET TABLESPACE {small_tablespace}")
        for attempt in range(200):
            text = secrets.token_urlsafe(12_000)  # does not compress: every lesson takes its room
            try:
                acknowledged.append(client.record_error("shell", f"{attempt} {text}", text, cause=text).record.id)
            except MemsvcError as error:
                assert (error.code, error.reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "DISK_FULL")
                assert "free space" in error.message
                break
        else:
            pytest.fail("the disk never filled")
        assert sorted(r.id for r in client.list_errors(page_size=500).records) == sorted(acknowledged)
        with postgres.admin(postgres_database) as admin:
            admin.execute("ALTER TABLE memsvc_lessons SET TABLESPACE pg_default")  # space again
        assert client.record_error("shell", "after space returned", "fix").stored
    no_password_in(server)
