"""ShardService over HTTP/JSON with the real curl: GetServerInfo as unary JSON, ExportSession as a
Connect server stream and ImportSession as a Connect client stream, against a real server; a
failed stream ends with the Connect error gRPC would give."""

from __future__ import annotations

from tests.support import curl


def test_export_and_import_stream_over_http_as_over_grpc(make_server, tmp_path) -> None:
    server = make_server("--http-listen", "127.0.0.1:0", "--shard-name", "web")
    base = f"http://{server.http}"
    with server.client() as client:
        client.append("s", [("user", "Wir deployen freitags nie."), ("assistant", "Gut.")], idempotency_key="k")
        grpc_parts = list(client.export_session("s", page_size=1))
    info = curl.post(base, "ShardService/GetServerInfo", {"sessionId": "s"})
    assert info.status == 200 and info.body["shardName"] == "web" and info.body["sessionStored"] is True

    exported = curl.stream(base, "ShardService/ExportSession", [{"sessionId": "s", "pageSize": 1}])
    assert exported.status == 200 and exported.end == {}
    assert [list(part) for part in exported.messages] == [["head"], ["messages"], ["messages"], ["end"]]
    assert exported.messages[1]["messages"][0]["message"]["content"] == "Wir deployen freitags nie."
    assert exported.messages[-1]["end"]["sha256"] == grpc_parts[-1].end.sha256

    with server.client() as client:
        client.remove_session("s")
    imported = curl.stream(base, "ShardService/ImportSession", exported.messages)
    assert imported.status == 200 and imported.messages[0]["sessionId"] == "s"
    assert imported.messages[0]["sha256"] == grpc_parts[-1].end.sha256
    with server.client() as client:
        assert [m.content for m in client.get_context("s").window] == ["Wir deployen freitags nie.", "Gut."]

    again = curl.stream(base, "ShardService/ImportSession", exported.messages)
    assert again.end["error"]["code"] == "already_exists"
    assert again.end["error"]["details"][0]["debug"]["reason"] == "SESSION_EXISTS"
    missing = curl.stream(base, "ShardService/ExportSession", [{"sessionId": "nobody"}])
    assert missing.messages == [] and missing.end["error"]["code"] == "not_found"
    cut = curl.stream(base, "ShardService/ImportSession", [{"head": {"sessionId": "t", "nextId": "1"}}])
    assert cut.end["error"]["details"][0]["debug"]["reason"] == "IMPORT_INCOMPLETE"
