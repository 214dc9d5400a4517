"""Semantic and hybrid search end to end: a real server (a process where one crashes), real index files,
a real HTTP embedding endpoint on loopback, and the local model when installed."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.vectors import files
from memsvc.vectors.embedders import local
from memsvc_client import MemsvcError
from tests.support import wait_for
from tests.support.embedding_server import EmbeddingServer

pytestmark = pytest.mark.in_process

HAS_LOCAL_MODEL = local.installed()
FAST_BUILDS = ("--vector-rebuild-rows", "8", "--vector-trees", "4")


def _read(path: Path) -> str:
    """The file's text, or "" while a rebuild has it removed."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def index_dir(server, session_id: str) -> Path:
    return server.data_dir / ".store" / "vectors" / session_id


def generation(server, session_id: str) -> dict:
    try:
        manifest = json.loads((index_dir(server, session_id) / "manifest.json").read_text())
    except FileNotFoundError:
        return {}
    return manifest.get("generation") or {}


def rows(hits) -> list[tuple[int, bool, int]]:
    return [(hit.message.id, hit.is_context, hit.run) for hit in hits]


def test_a_chinese_query_finds_chinese_messages_with_the_builtin_embedder(server):
    with server.client() as client:
        client.append("zh", [("user", "We tested the new parser in the sandbox yesterday"),
                             ("assistant", "我們在沙盒裡測試了新的資料庫遷移"),
                             ("user", "今天午餐吃了拉麵，很好吃"),
                             ("assistant", "データベースの移行は明日です"),
                             ("user", "沙盒環境的權限需要調整嗎？")])
        reply = client.search("zh", "沙盒測試", include_window=True, limit=2)
        matches = sorted((hit for hit in reply.hits if not hit.is_context), key=lambda hit: -hit.score)
        assert [hit.message.id for hit in matches] == [2, 5]
        assert reply.unsearched == 0
        assert all(hit.source == "recent" for hit in reply.hits)


def test_expansion_is_two_before_one_after_clamped_merged_and_excludes_the_window(make_server):
    server = make_server("--max-history-messages", "3")
    with server.client() as client:
        client.append("s", [("user" if n % 2 else "assistant", f"message token{n:02d} here") for n in range(1, 31)])

        def search(query: str, **options):
            return client.search("s", query, **options).hits

        assert rows(search("token15", limit=1)) == [(13, True, 1), (14, True, 1), (15, False, 1), (16, True, 1)]
        assert rows(search("token01", limit=1)) == [(1, False, 1), (2, True, 1)]
        assert rows(search("token30", limit=1, include_window=True)) == [(28, True, 1), (29, True, 1),
                                                                          (30, False, 1)]
        assert 30 not in [hit.message.id for hit in search("token30", limit=5) if not hit.is_context]
        merged = search("token10 token12", limit=2)
        assert rows(merged) == [(8, True, 1), (9, True, 1), (10, False, 1), (11, True, 1), (12, False, 1),
                                (13, True, 1)]
        apart = search("token05 token20", limit=2)
        assert [hit.run for hit in apart] == [1, 1, 1, 1, 2, 2, 2, 2]


def test_hits_appended_after_the_last_build_are_found_in_the_tail(make_server):
    server = make_server(*FAST_BUILDS)
    with server.client() as client:
        client.append("s", [("user", f"routine status update number {n}") for n in range(24)])
        wait_for(lambda: generation(server, "s").get("items", 0) >= 16)
        built = generation(server, "s")["items"]
        stored = client.append("s", [("assistant", "a kangaroo escaped from the zoo")]).messages[0]
        client.append("s", [("user", f"filler {n}") for n in range(3)])
        hits = client.search("s", "kangaroo zoo", limit=1, include_window=True).hits
        assert [hit.message.id for hit in hits if not hit.is_context] == [stored.id]
        assert stored.id > built, "the hit was not in the Annoy generation"


@pytest.mark.as_process
def test_a_corrupted_annoy_file_is_detected_rebuilt_and_never_crashes_the_server(make_server):
    server = make_server(*FAST_BUILDS)
    topics = ["billing invoices", "kubernetes pods", "coffee beans", "unicode normalisation"]
    with server.client() as client:
        for session_id in ("cut", "garbled"):
            client.append(session_id, [("user", f"{topics[n % 4]} discussion {n}") for n in range(20)])
        for session_id in ("cut", "garbled"):
            wait_for(lambda session_id=session_id: generation(server, session_id).get("items") == 20)
        before = {session_id: rows(client.search(session_id, "coffee beans", include_window=True).hits)
                  for session_id in ("cut", "garbled")}
    server.terminate()
    cut = index_dir(server, "cut") / "gen-1.ann"
    cut.write_bytes(cut.read_bytes()[:cut.stat().st_size // 2])
    garbled = index_dir(server, "garbled") / "gen-1.ann"
    garbled.write_bytes(bytes(reversed(garbled.read_bytes())))
    server.start()
    with server.client() as client:
        for session_id in ("cut", "garbled"):
            assert rows(client.search(session_id, "coffee beans", include_window=True).hits) == before[session_id]
            wait_for(lambda session_id=session_id: generation(server, session_id).get("number", 0) >= 2)
            assert rows(client.search(session_id, "coffee beans", include_window=True).hits) == before[session_id]
        with grpc.insecure_channel(server.tcp) as channel:
            status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest()).status
            assert status == health_pb2.HealthCheckResponse.SERVING
    assert server.process.poll() is None
    for session_id in ("cut", "garbled"):
        info = generation(server, session_id)
        for expected in info["files"]:
            assert files.sha256(index_dir(server, session_id) / expected["name"]) == expected["sha256"]
    assert sum("Annoy file damaged" in line for line in server.log_lines) == 2


@pytest.mark.skipif(not HAS_LOCAL_MODEL,
                    reason=f"the local-model extra is not installed ({local.LOCAL_MODEL_EXTRA})")
def test_a_paraphrase_finds_its_message_with_the_local_model(make_server):
    server = make_server("--embedder", "sentence-transformers")
    with server.client(timeout=120) as client:
        client.append("s", [("user", "The release pipeline broke because the Docker image grew past 2 GB"),
                            ("assistant", "Let's book the team dinner for Thursday evening"),
                            ("user", "Our quarterly revenue grew eleven percent"),
                            ("assistant", "Remember to water the office plants")])
        hits = client.search("s", "why did the deployment build fail?", limit=1, include_window=True).hits
        assert [hit.message.id for hit in hits if not hit.is_context] == [1]


def test_client_supplied_vectors_must_match_the_dimension(make_server):
    server = make_server("--embedding-dimensions", "8")
    axis = [[1.0 if i == n else 0.0 for i in range(8)] for n in range(8)]
    with server.client() as client:
        with pytest.raises(MemsvcError) as wrong:
            client.append("s", [dict(role="user", content="seven", embedding=[1.0] * 7)])
        assert (wrong.value.code, wrong.value.reason) == (grpc.StatusCode.INVALID_ARGUMENT,
                                                          "VECTOR_DIMENSION_MISMATCH")
        assert list(client.get_context("s").window) == []
        with pytest.raises(MemsvcError) as invalid:
            client.append("s", [dict(role="user", content="nan", embedding=[float("nan")] * 8)])
        assert invalid.value.reason == "INVALID_EMBEDDING"
        client.append("s", [dict(role="user", content=f"vector {n}", embedding=axis[n])
                            for n in range(4)])
        hits = client.search("s", "", query_embedding=axis[2], limit=1, include_window=True).hits
        assert [(hit.message.id, round(hit.score, 4)) for hit in hits if not hit.is_context] == [(3, 1.0)]
        with pytest.raises(MemsvcError) as mismatch:
            client.search("s", "", query_embedding=[1.0] * 9)
        assert (mismatch.value.code, mismatch.value.reason) == (grpc.StatusCode.INVALID_ARGUMENT,
                                                                "VECTOR_DIMENSION_MISMATCH")
        with pytest.raises(MemsvcError) as empty:
            client.search("s", "  ")
        assert (empty.value.code, empty.value.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_QUERY")
    server.terminate()
    server.args = ["--embedding-dimensions", "16"]
    server.start()
    with server.client() as client:
        hits = client.search("s", "vector 3", limit=1, include_window=True).hits
        assert [hit.message.id for hit in hits if not hit.is_context] == [4]
        with pytest.raises(MemsvcError) as old:
            client.search("s", "", query_embedding=axis[2])
        # a query embedding of the old embedder's dimension: a bad argument now, naming the dimension expected
        assert (old.value.code, old.value.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "VECTOR_DIMENSION_MISMATCH")
        assert old.value.metadata["expected"] == "16" and "16" in old.value.message
    # the index of the old dimension is replaced in the background
    wait_for(lambda: json.loads(_read(index_dir(server, "s") / "manifest.json") or "{}").get("dimension") == 16)


@pytest.fixture
def endpoint():
    with EmbeddingServer(dimension=32) as server:
        yield server


def test_an_openai_compatible_endpoint_failing_is_reported_then_caught_up(make_server, endpoint):
    server = make_server("--embedder", "openai", "--embedding-base-url", endpoint.base_url,
                         "--embedding-dimensions", "32", "--embedding-model", "loopback-model")
    query = endpoint.embedder.vectors(["invoice overdue"])[0].tolist()
    with server.client() as client:
        endpoint.fail(100_000)
        client.append("s", [("user", "the invoice is overdue"), ("assistant", "I will pay the invoice today"),
                            ("user", "thanks")])
        with pytest.raises(MemsvcError) as down:
            client.search("s", "invoice overdue")
        assert (down.value.code, down.value.reason) == (grpc.StatusCode.UNAVAILABLE, "EMBEDDER_UNAVAILABLE")
        reply = client.search("s", "", query_embedding=query, include_window=True)
        assert list(reply.hits) == [] and reply.unsearched == 3
        endpoint.fail(0)
        wait_for(lambda: client.search("s", "", query_embedding=query, include_window=True).unsearched == 0)
        hits = client.search("s", "invoice overdue", include_window=True, limit=1).hits
        assert [hit.message.id for hit in hits if not hit.is_context] == [1]
    assert {request.body["model"] for request in endpoint.received} == {"loopback-model"}


def test_hybrid_fuses_keyword_and_semantic_hits_across_the_archive(make_server):
    server = make_server("--max-history-messages", "4")
    with server.client() as client:
        client.append("s", [("user", "the staging cluster uses flag --no-verify-ssl for now"),
                            ("assistant", "noted, we will remove it later")])
        client.append("s", [("user" if n % 2 else "assistant", f"unrelated chatter {n}") for n in range(1, 11)])
        client.compact("s")
        client.append("s", [("user", "ssl certificates for the staging cluster expire soon"),
                            ("assistant", "renew the certificates then"),
                            ("user", "what about the flag"), ("assistant", "later")])
        hits = client.search("s", "staging cluster ssl", match="hybrid", limit=4, include_window=True).hits
        matched = {(hit.message.id, hit.source) for hit in hits if not hit.is_context}
        assert (1, "archive") in matched and (13, "recent") in matched
        archived = [(hit.message.id, hit.is_context, hit.run) for hit in hits if hit.source == "archive"]
        assert archived[:2] == [(1, False, 1), (2, True, 1)]  # the archived hit reads with its archived reply
        assert all(hit.run > 1 for hit in hits if hit.source == "recent")
        semantic = client.search("s", "staging cluster ssl", match="semantic", include_window=True).hits
        assert all(hit.source == "recent" for hit in semantic)


def test_reset_remove_and_compaction_reach_the_vectors(make_server):
    server = make_server(*FAST_BUILDS, "--max-history-messages", "4")
    with server.client() as client:
        client.append("s", [("user" if n % 2 else "assistant", f"planning topic {n}") for n in range(1, 31)])
        wait_for(lambda: generation(server, "s").get("items") == 30)
        first_kept = 31 - 4
        client.compact("s")
        hits = client.search("s", "planning topic", match="semantic", limit=32, include_window=True).hits
        assert hits and min(hit.message.id for hit in hits) >= first_kept
        wait_for(lambda: generation(server, "s").get("items") == 4)
        deleted = client.reset("s").deleted
        assert deleted.vectors == 4
        assert not index_dir(server, "s").exists()
        assert list(client.search("s", "planning topic", match="semantic", include_window=True).hits) == []
        client.append("t", [("user", "temporary thoughts")])
        wait_for(lambda: (index_dir(server, "t") / "manifest.json").exists())  # embedded in the background
        assert client.remove_session("t").deleted.vectors == 1
        assert not index_dir(server, "t").exists()
