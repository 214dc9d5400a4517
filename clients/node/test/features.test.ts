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

  it("throws one error class per status code, with the stable reason", async () => {
    const invalid = await rejection(memory.append("bad id!", [["user", "x"]]), InvalidArgumentError);
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
      "Summarize=UNAVAILABLE:1");
    const client = new MemsvcClient(proxy.target, { retry: QUICK });
    try {
      assert.equal((await client.getContext("retry")).window.length, 1);
      await rejection(client.append("retry", [["user", "no key"]]), UnavailableError);
      await client.append("retry", [["user", "keyed"]], { idempotencyKey: "k1" });
      await rejection(client.summarize("retry"), UnavailableError);
    } finally {
      client.close();
    }
    const calls = (await proxy.stop()).map((call) => call.method.split("/").pop());
    assert.equal(calls.filter((name) => name === "GetContext").length, 3);
    assert.equal(calls.filter((name) => name === "Append").length, 3, "one without a key, two with");
    assert.equal(calls.filter((name) => name === "Summarize").length, 1);
    assert.deepEqual((await memory.getContext("retry")).window.map((m) => m.content), ["hello", "keyed"]);
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
