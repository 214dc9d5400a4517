import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  DEFAULT_TIMEOUT_MS, FailedPreconditionError, FIT_TIMEOUT_MS, type FitContextResponse, FitOutcome, FitStage,
  InvalidArgumentError, MemsvcClient, SESSION_METADATA, TokenCounting, UnavailableError, WindowSource,
} from "../src/index.js";
import { rejection } from "./rejection.js";
import { type Server, startProxy, startServer } from "./server.js";

const QUICK = { attempts: 4, initialBackoffMs: 10, maxBackoffMs: 50, multiplier: 2 };
const SYSTEM = { role: "system", content: "You are a careful agent. Use the tools." };
const BIG = "alpha beta gamma delta ".repeat(500); // about 2,000 tokens

function call(id: string, name: string, args: Record<string, unknown>): Record<string, unknown> {
  return { role: "assistant", content: null, tool_calls: [
    { id, type: "function", function: { name, arguments: JSON.stringify(args) } }] };
}

function result(id: string, content: string): Record<string, unknown> {
  return { role: "tool", tool_call_id: id, content };
}

function stages(reply: FitContextResponse): [string, string][] {
  return reply.stages.map((s) => [FitStage[s.stage], FitOutcome[s.outcome]]);
}

function decoded(reply: FitContextResponse): unknown[] {
  return reply.messages.map((message) => JSON.parse(message));
}

describe("fitContext against a real server without an LLM", () => {
  let server: Server;
  let memory: MemsvcClient;

  before(async () => {
    server = await startServer();
    memory = new MemsvcClient(server.unix);
  });

  after(async () => {
    memory?.close();
    await server?.stop();
  });

  it("returns a run under budget byte for byte, with its window and exact count", async () => {
    const sent = [JSON.stringify(SYSTEM), '{"role":"user",  "content":"list /srv", "x-client": {"trace": [1, 2]}}',
      call("c1", "ls", { path: "/srv" }), result("c1", "a b c")];
    const reply = await memory.fitContext("s", "openai", "gpt-4o", sent);
    assert.deepEqual(reply.messages, [sent[0], sent[1], JSON.stringify(sent[2]), JSON.stringify(sent[3])]);
    assert.deepEqual(stages(reply), [["CHECK_THRESHOLD", "UNCHANGED"]]);
    assert.deepEqual([reply.contextWindow, reply.windowSource, reply.windowEntry, reply.budgetTokens],
      [128000, WindowSource.SHIPPED, "openai/gpt-4o", 102400]);
    assert.deepEqual([reply.counting, reply.tokenizer, reply.fits, reply.changed],
      [TokenCounting.EXACT, "o200k_base", true, false]);
    assert.ok(reply.tokensBefore === reply.tokensAfter && reply.tokensBefore > 0);
  });

  it("gives an unknown model 128K and an estimate, and takes a window from the call", async () => {
    const unknown = await memory.fitContext("s", "acme", "rocket-9", [SYSTEM, { role: "user", content: "我們週五部署嗎？" }]);
    assert.deepEqual([unknown.contextWindow, unknown.windowSource, unknown.windowEntry, unknown.counting],
      [128000, WindowSource.FALLBACK, "", TokenCounting.ESTIMATE]);
    const mine = await memory.fitContext("s", "acme", "rocket-9", [SYSTEM], { contextWindow: 8000, reservedTokens: 400 });
    assert.deepEqual([mine.windowSource, mine.budgetTokens], [WindowSource.REQUEST, 6000]);
  });

  it("over budget without an LLM skips the LLM stages, says so and keeps every message", async () => {
    const sent = [SYSTEM, { role: "user", content: "go" }, call("c1", "dump", {}), result("c1", BIG)];
    const reply = await memory.fitContext("s", "openai", "gpt-4o", sent, { contextWindow: 1000 });
    assert.deepEqual(stages(reply), [["CHECK_THRESHOLD", "UNCHANGED"], ["EXTRACT_OLD_HISTORIES", "SKIPPED"],
      ["TOOL_HISTORY", "SKIPPED"]]);
    assert.deepEqual(reply.stages.slice(1).map((s) => s.reason), ["LLM_NOT_CONFIGURED", "LLM_NOT_CONFIGURED"]);
    assert.deepEqual([reply.fits, reply.changed, reply.unfitReason], [false, false, "LLM_NOT_CONFIGURED"]);
    assert.deepEqual(decoded(reply), sent);
  });

  it("on overflow drops the oldest exchange, then fails with CONTEXT_TOO_LARGE when nothing is left", async () => {
    const question = { role: "user", content: "summarize the logs" };
    const second = [call("c2", "tail", {}), result("c2", "ok")];
    const sent = [SYSTEM, question, call("c1", "read_log", {}), result("c1", BIG), ...second];
    const trimmed = await memory.fitContext("s", "openai", "gpt-4o", sent, { overflow: true });
    assert.deepEqual(stages(trimmed).at(-1), ["TRIM_FALLBACK", "COMPACTED"]);
    assert.deepEqual(decoded(trimmed), [SYSTEM, question, ...second]);
    const again = await memory.fitContext("s", "openai", "gpt-4o", trimmed.messages, { overflow: true });
    assert.deepEqual(decoded(again), [SYSTEM, question]);
    const failure = await rejection(memory.fitContext("s", "openai", "gpt-4o", again.messages, { overflow: true }),
      FailedPreconditionError);
    assert.equal(failure.reason, "CONTEXT_TOO_LARGE");
    assert.match(failure.detail, /nothing is left to compact/);
    const invalid = await rejection(memory.fitContext("s", "openai", "gpt-4o", ["{not json"]), InvalidArgumentError);
    assert.equal(invalid.reason, "INVALID_CHAT_MESSAGE");
  });

  it("rewrites the tool history as plain text after a switch of models", async () => {
    const sent = [SYSTEM, { role: "user", content: "what is in a.txt?" }, call("c1", "read_file", { path: "a.txt" }),
      result("c1", "hello")];
    const reply = await memory.fitContext("s", "openai", "gpt-4o", sent, { previousModel: "claude-3-5-sonnet" });
    assert.deepEqual(stages(reply), [["CHECK_THRESHOLD", "UNCHANGED"], ["RAW_TOOL_FALLBACK", "COMPACTED"]]);
    assert.deepEqual(decoded(reply).slice(2), [
      { role: "assistant", content: `[tool call read_file id=c1] ${JSON.stringify({ path: "a.txt" })}` },
      { role: "user", content: "[tool result read_file id=c1]\nhello" }]);
  });

  it("is retried after UNAVAILABLE, names its session and waits five minutes by default", async () => {
    const proxy = await startProxy(server.tcp, "FitContext=UNAVAILABLE:2");
    const client = new MemsvcClient(proxy.target, { retry: QUICK });
    const patient = new MemsvcClient(proxy.target, { timeoutMs: 900_000 });
    try {
      await rejection(client.fitContext("r", "openai", "gpt-4o", [SYSTEM], { retry: false }), UnavailableError);
      assert.ok((await client.fitContext("r", "openai", "gpt-4o", [SYSTEM])).fits);
      await client.getContext("r");
      await client.fitContext("r", "openai", "gpt-4o", [SYSTEM], { timeoutMs: 3_000 });
      await patient.fitContext("r", "openai", "gpt-4o", [SYSTEM]);
    } finally {
      client.close();
      patient.close();
    }
    const calls = await proxy.stop();
    const fits = calls.filter((c) => c.method.endsWith("/FitContext"));
    assert.equal(fits.length, 5, "one not retried, a failed attempt and its retry, then two");
    assert.ok(fits.every((c) => c.metadata[SESSION_METADATA] === "r"));
    // grpc-timeout travels rounded up, in its own units: a second's slack.
    const seconds = fits.map((c) => c.deadline_seconds ?? Infinity);
    assert.ok(seconds.slice(0, 3).every((s) => s > FIT_TIMEOUT_MS / 1000 - 60 && s < FIT_TIMEOUT_MS / 1000 + 1),
      `default deadlines ${seconds}`);
    assert.ok(seconds[3] < 4 && seconds[4] > FIT_TIMEOUT_MS / 1000 + 1, `explicit deadlines ${seconds}`);
    const getContext = calls.find((c) => c.method.endsWith("/GetContext"));
    assert.ok((getContext?.deadline_seconds ?? Infinity) < DEFAULT_TIMEOUT_MS / 1000 + 1);
  });
});
