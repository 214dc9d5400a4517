import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  FailedPreconditionError, InvalidArgumentError, Match, MemsvcClient, NotFoundError, Role,
  SESSION_METADATA, UnavailableError,
} from "../src/index.js";
import { rejection } from "./rejection.js";
import { type Server, startProxy, startServer } from "./server.js";

const QUICK = { attempts: 4, initialBackoffMs: 10, maxBackoffMs: 50, multiplier: 2 };

describe("plain arguments, error classes and retries against a real server", () => {
  let server: Server;
  let memory: MemsvcClient;

  before(async () => {
    server = await startServer();
    memory = new MemsvcClient(server.tcp);
  });

  after(async () => {
    memory?.close();
    await server?.stop();
  });

  it("takes enum names: roles, match modes, time ranges, reset modes, outcomes", async () => {
    await memory.append("names", [["user", "We deploy on Fridays?"],
      { role: "assistant", content: "Never on Fridays.", sender: "planner" }]);
    const { window } = await memory.getContext("names");
    assert.deepEqual(window.map((m) => [m.role, m.sender]), [[Role.USER, ""], [Role.ASSISTANT, "planner"]]);
    const { hits } = await memory.search("names", "fridays", { match: "keyword", timeRange: "week" });
    assert.equal(hits.length, 2);
    assert.ok(hits.every((hit) => hit.message?.content.includes("Fridays")));
    assert.equal((await memory.search("names", "fridays", { match: Match.KEYWORD })).hits.length, hits.length);
    const failed = await memory.recordError("shell", "jq: not found", "install jq", { outcome: "failed" });
    assert.equal(failed.stored, false);
    const { deleted } = await memory.reset("names", "all");
    assert.equal(deleted?.historyMessages, 2);
    await assert.rejects(memory.search("names", "x", { match: "kw" as "keyword" }),
      /SearchRequest.match must be one of semantic, keyword, hybrid, got "kw"/);
  });

  it("passes the keyword options: requireAllWords narrows, withContext adds the neighbours", async () => {
    await memory.append("words", [["user", "a blue car passed a grey heron"], ["assistant", "blue skies today"],
      ["user", "lunch was pasta"]]);
    assert.equal((await memory.search("words", "heron blue", { match: "keyword" })).hits.length, 2);
    const strict = await memory.search("words", "heron blue", { match: "keyword", requireAllWords: true });
    assert.deepEqual(strict.hits.map((hit) => hit.message?.content), ["a blue car passed a grey heron"]);
    const around = await memory.search("words", "pasta", { match: "keyword", withContext: true });
    assert.deepEqual(around.hits.map((hit) => [hit.isContext, hit.run]), [[true, 1], [true, 1], [false, 1]]);
  });

  it("keeps system and tool roles and payloads exactly, pages through messages and deletes them", async () => {
    const payload = '{"tool_calls": [{"id": "call_1", "args": {"city": "Z\\u00fcrich"}}]}';
    await memory.append("framework", [["system", "Be brief."], ["user", "Weather in Zurich?"],
      { role: "assistant", content: "get_weather(Zurich)", payloadJson: payload },
      { role: Role.TOOL, content: "sunny", payloadJson: '"sunny"' }]);
    const first = await memory.listMessages("framework", { pageSize: 3 });
    assert.deepEqual(first.messages.map((m) => m.role), [Role.SYSTEM, Role.USER, Role.ASSISTANT]);
    assert.equal(first.messages[2].payloadJson, payload);
    const rest = await memory.listMessages("framework", { pageToken: first.nextPageToken });
    assert.deepEqual(rest.messages.map((m) => [m.role, m.payloadJson]), [[Role.TOOL, '"sunny"']]);
    assert.equal(rest.nextPageToken, "");
    const newest = await memory.listMessages("framework", { pageSize: 1, newestFirst: true });
    assert.equal(newest.messages[0].content, "sunny");
    const popped = await memory.deleteMessages("framework", { last: 1 });
    assert.deepEqual(popped.messages.map((m) => m.content), ["sunny"]);
    const byId = await memory.deleteMessages("framework", { ids: [1n, 99n] });
    assert.deepEqual(byId.messages.map((m) => m.content), ["Be brief."]);
    assert.equal(byId.deleted?.historyMessages, 1);
    assert.deepEqual((await memory.listMessages("framework")).messages.map((m) => m.id), [2n, 3n]);
    const both = await rejection(memory.deleteMessages("framework", { ids: [2n], last: 1 }), InvalidArgumentError);
    assert.equal(both.reason, "DELETE_TARGET_AMBIGUOUS");
  });

  it("throws one error class per status code, with the stable reason", async () => {
    const invalid = await rejection(memory.append("bad\u0000id", [["user", "x"]]), InvalidArgumentError);
    assert.equal(invalid.reason, "INVALID_SESSION_ID");
    assert.equal(invalid.name, "InvalidArgumentError");
    const missing = await rejection(memory.getSummary("never"), NotFoundError);
    assert.equal(missing.reason, "SESSION_NOT_FOUND");
    await memory.append("llm", [["user", "x"]]);
    const noModel = await rejection(memory.summarize("llm"), FailedPreconditionError);
    assert.equal(noModel.reason, "SUMMARY_MODEL_NOT_CONFIGURED");
  });

  it("retries the RPCs the contract marks safe after UNAVAILABLE, Append only with a key", async () => {
    await memory.append("retry", [["user", "hello"]]);
    const proxy = await startProxy(server.tcp, "GetContext=UNAVAILABLE:2", "Append=UNAVAILABLE:2",
      "Summarize=UNAVAILABLE:1", "DeleteMessages=UNAVAILABLE:2", "ReplaceMessages=UNAVAILABLE:2");
    const client = new MemsvcClient(proxy.target, { retry: QUICK });
    try {
      assert.equal((await client.getContext("retry")).window.length, 1);
      await rejection(client.append("retry", [["user", "no key"]]), UnavailableError);
      await client.append("retry", [["user", "keyed"]], { idempotencyKey: "k1" });
      await rejection(client.summarize("retry"), UnavailableError);
      await rejection(client.deleteMessages("retry", { last: 1 }), UnavailableError);
      await client.deleteMessages("retry", { ids: [2n] });
      await rejection(client.replaceMessages("retry-replaced", [["user", "no key"]]), UnavailableError);
      await client.replaceMessages("retry-replaced", [["user", "keyed"]], { idempotencyKey: "k2" });
    } finally {
      client.close();
    }
    const calls = (await proxy.stop()).map((call) => call.method.split("/").pop());
    assert.equal(calls.filter((name) => name === "GetContext").length, 3);
    assert.equal(calls.filter((name) => name === "Append").length, 3, "one without a key, two with");
    assert.equal(calls.filter((name) => name === "Summarize").length, 1);
    assert.equal(calls.filter((name) => name === "DeleteMessages").length, 3, "one by last, two by ids");
    assert.equal(calls.filter((name) => name === "ReplaceMessages").length, 3, "one without a key, two with");
    assert.deepEqual((await memory.getContext("retry")).window.map((m) => m.content), ["hello"]);
  });

  it("sends no retry when retries are off, and names the session on per-session calls", async () => {
    const proxy = await startProxy(server.tcp, "ListSessions=UNAVAILABLE:1");
    const client = new MemsvcClient(proxy.target, { retry: false });
    try {
      await rejection(client.listSessions(), UnavailableError);
      await client.getContext("retry");
    } finally {
      client.close();
    }
    const calls = await proxy.stop();
    assert.deepEqual(calls.map((call) => [call.method.split("/").pop(), call.metadata[SESSION_METADATA]]),
      [["ListSessions", undefined], ["GetContext", "retry"]]);
  });
});

describe("replies within the server's max_reply_bytes", () => {
  let server: Server;
  let memory: MemsvcClient;

  before(async () => {
    server = await startServer("--max-reply-bytes", "1200000");
    memory = new MemsvcClient(server.tcp);
  });

  after(async () => {
    memory?.close();
    await server?.stop();
  });

  it("leaves the oldest window messages out and says so; payloads only when asked", async () => {
    for (const n of [1, 2, 3]) {
      await memory.append("big", [{ role: Role.TOOL, content: `result ${n}`,
        payloadJson: JSON.stringify({ output: "r".repeat(500_000) }) }]);
    }
    const context = await memory.getContext("big");
    assert.deepEqual(context.window.map((m) => m.id), [2n, 3n]);
    assert.equal(context.omittedMessages, 1);
    const older = await memory.listMessages("big", { newestFirst: true, pageToken: context.olderPageToken });
    assert.deepEqual(older.messages.map((m) => m.id), [1n]);
    const light = await memory.getContext("big", { omitPayloads: true });
    assert.deepEqual(light.window.map((m) => [m.id, m.payloadJson]), [[1n, ""], [2n, ""], [3n, ""]]);
    assert.equal(light.omittedMessages, 0);
    const found = await memory.search("big", "result", { match: "keyword", limit: 3 });
    assert.equal(found.hits.length + found.omittedHits, 3);
    assert.ok(found.omittedHits > 0);
  });
});
