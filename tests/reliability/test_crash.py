"""kill -9 right after a burst of acknowledged Appends loses none of them; the seeded kill loop, short."""

import msgspec

from tests.support import kill_during_burst


def test_sigkill_during_a_burst_loses_no_acknowledged_append(make_server):
    # A window wide enough to read every message back through GetContext.
    server = make_server("--max-history-messages", "100000")

    def append_pair(client, worker: int, sequence: int) -> tuple[str, str]:
        session_id, text = f"s{worker % 4}", f"w{worker}-{sequence}"
        client.append(session_id, [("user", text), ("assistant", text + "-reply")])
        return session_id, text

    acknowledged: dict[str, list[str]] = {f"s{n}": [] for n in range(4)}
    for session_id, text in kill_during_burst(server, append_pair, workers=8, until=400):
        acknowledged[session_id].append(text)
    server.start()
    with server.client() as client:
        for session_id, texts in acknowledged.items():
            window = client.get_context(session_id).window
            users = [m.content for m in window if m.role == "user"]
            assert all(users.count(text) == 1 for text in texts), session_id
            assert [m.id for m in window] == list(range(1, len(window) + 1))
            # one Append is one line on disk: a user message never survives without its reply
            assert [m.role for m in window] == ["user", "assistant"] * (len(window) // 2)
            history = server.data_dir / "sessions" / session_id / "history.json"
            assert len(msgspec.json.decode(history.read_bytes())) == len(window)


def test_acknowledged_appends_survive_a_power_cut_through_the_journal(make_server):
    """`history.write=drop`: every write into history.json vanishes, as unsynced writes do when the
    machine loses power; only the journal's synced frames are on disk when the server is killed."""
    server = make_server("--max-history-messages", "100000", env={"MEMSVC_FAILPOINTS": "history.write=drop"})

    def append_pair(client, worker: int, sequence: int) -> tuple[str, str]:
        session_id, text = f"s{worker % 5}", f"w{worker}-{sequence}"
        client.append(session_id, [("user", text), ("assistant", text + "-reply")])
        return session_id, text

    acknowledged: dict[str, list[str]] = {f"s{n}": [] for n in range(5)}
    for session_id, text in kill_during_burst(server, append_pair, workers=10, until=300):
        acknowledged[session_id].append(text)
    server.env.pop("MEMSVC_FAILPOINTS")
    server.start()
    assert server.logged("journal replayed")
    with server.client() as client:
        for session_id, texts in acknowledged.items():
            window = client.get_context(session_id).window
            users = [m.content for m in window if m.role == "user"]
            assert all(users.count(text) == 1 for text in texts), session_id
            assert [m.id for m in window] == list(range(1, len(window) + 1))
            history = server.data_dir / "sessions" / session_id / "history.json"
            assert len(msgspec.json.decode(history.read_bytes())) == len(window)
            assert not list(history.parent.glob("*.damaged-*")), "replayed whole, never repaired"


def test_short_kill_loop_loses_nothing(tmp_path):
    """A few iterations of the seeded kill -9 loop (make test-crash runs the long one)."""
    from tests.reliability import crashloop

    findings = crashloop.run(iterations=6, seed=20261129, data_dir=tmp_path / "data")
    assert findings.iterations == 6 and findings.acknowledged > 0
    assert findings.problems == []
    assert findings.verified == findings.acknowledged
    assert sum(findings.clears.values()) > 0, "the clients reset and removed their sessions too"


def test_short_kill_loop_with_two_tenants_sharing_every_session_id(tmp_path):
    """The loop with a tenants file: each acknowledged message is in its own tenant's session, and never in
    the other tenant's session of the same id."""
    from tests.reliability import crashloop

    findings = crashloop.run(iterations=4, seed=20261202, data_dir=tmp_path / "data", tenants=True)
    assert findings.iterations == 4 and findings.acknowledged > 0
    assert findings.problems == []
    assert findings.verified == findings.acknowledged == findings.isolated
