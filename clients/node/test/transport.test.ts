/**
 * What the wrapper puts on the wire, seen by a bare HTTP/2 server standing in
 * for a memsvc that never answers: deadlines (default and per call) and the
 * bearer token.
 */
import assert from "node:assert/strict";
import { createServer, type Http2Server, type IncomingHttpHeaders } from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { Code, MemsvcClient, MemsvcError } from "../src/index.js";

/** grpc-timeout ("100m", "2S", ...) in milliseconds. */
function timeoutMs(header: string | string[] | undefined): number {
  const match = /^(\d+)([HMSmun])$/.exec(String(header));
  assert.ok(match, `grpc-timeout header missing or malformed: ${String(header)}`);
  const perUnit = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 1e-3, n: 1e-6 }[match[2] as "H"];
  return Number(match[1]) * perUnit;
}

describe("MemsvcClient on the wire", () => {
  let silent: Http2Server;
  let target = "";
  const seen: IncomingHttpHeaders[] = [];

  before(async () => {
    silent = createServer();
    silent.on("stream", (stream, headers) => {
      seen.push(headers); // never answer: only the client's deadline can end the call
      stream.on("error", () => undefined); // the client resets the stream when its deadline passes
    });
    silent.on("session", (session) => session.on("error", () => undefined));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    target = `127.0.0.1:${(silent.address() as AddressInfo).port}`;
  });

  after(() => {
    silent.close();
  });

  async function deadlineExceeded(call: Promise<unknown>): Promise<IncomingHttpHeaders> {
    const before = seen.length;
    const error = await call.then(() => undefined, (caught: unknown) => caught);
    assert.ok(error instanceof MemsvcError, String(error));
    assert.equal(error.code, Code.DeadlineExceeded);
    assert.equal(error.codeName, "DEADLINE_EXCEEDED");
    assert.equal(seen.length, before + 1, "the call reached the server");
    return seen[seen.length - 1];
  }

  it("applies the client's default deadline to every call", async () => {
    const client = new MemsvcClient(target, { timeoutMs: 150 });
    try {
      const headers = await deadlineExceeded(client.getContext("s1"));
      assert.ok(timeoutMs(headers["grpc-timeout"]) <= 150);
      assert.equal(headers[":path"], "/memsvc.v1.MemoryService/GetContext");
    } finally {
      client.close();
    }
  });

  it("lets one call override the default deadline", async () => {
    const client = new MemsvcClient(target);
    try {
      const headers = await deadlineExceeded(client.append("s1", [["user", "x"]], { timeoutMs: 120 }));
      assert.ok(timeoutMs(headers["grpc-timeout"]) <= 120);
    } finally {
      client.close();
    }
  });

  it("sends a default deadline of 10 s when none is configured", async () => {
    const client = new MemsvcClient(target);
    const abort = new AbortController();
    try {
      const call = client.listSessions({ signal: abort.signal });
      while (seen.length === 0 || seen[seen.length - 1][":path"] !== "/memsvc.v1.MemoryService/ListSessions") {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      abort.abort();
      const error = await call.then(() => undefined, (caught: unknown) => caught);
      assert.ok(error instanceof MemsvcError);
      assert.equal(error.code, Code.Canceled);
      const sent = timeoutMs(seen[seen.length - 1]["grpc-timeout"]);
      assert.ok(sent > 9_000 && sent <= 10_000, `grpc-timeout ${sent} ms`);
    } finally {
      client.close();
    }
  });

  it("sends the bearer token on every call", async () => {
    const client = new MemsvcClient(target, { token: "s3cret", timeoutMs: 100 });
    try {
      const headers = await deadlineExceeded(client.searchErrors("timeout"));
      assert.equal(headers.authorization, "Bearer s3cret");
    } finally {
      client.close();
    }
  });
});
