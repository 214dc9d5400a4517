import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, MemsvcClient, Role } from "../src/index.js";
import { rejection } from "./rejection.js";
import { type Server, startServer } from "./server.js";

describe("MemsvcClient against a real memsvc server", () => {
  let server: Server;
  let tcp: MemsvcClient;
  let unix: MemsvcClient;

  before(async () => {
    server = await startServer();
    tcp = new MemsvcClient(server.tcp);
    unix = new MemsvcClient(server.unix);
  });

  after(async () => {
    tcp?.close();
    unix?.close();
    await server?.stop();
  });

  it("appends over TCP and reads the window back in order", async () => {
    const appended = await tcp.append("node-tcp", [["user", "We deploy on Fridays?"],
      ["assistant", "No: never on Fridays."]]);
    // acknowledged by id, role and time; the contents are not echoed back
    assert.deepEqual(appended.messages.map((m) => [m.role, m.content]), [[Role.USER, ""], [Role.ASSISTANT, ""]]);
    assert.ok(appended.messages[0].id < appended.messages[1].id, "ids increase in append order");
    assert.ok(appended.messages.every((m) => m.sendAtUnixNano > 0n), "the server stamps send times");

    const context = await tcp.getContext("node-tcp");
    assert.deepEqual(context.window.map((m) => m.id), appended.messages.map((m) => m.id));
    assert.deepEqual(context.window.map((m) => m.content), ["We deploy on Fridays?", "No: never on Fridays."]);
    assert.equal(context.turnContext, undefined, "no summary yet, so no turn context");
  });

  it("reaches the same store over the unix socket", async () => {
    const sendAt = 1_735_732_800_000_000_000n;
    await unix.append("node-unix", [{ role: Role.USER, content: "hello from a socket", sender: "ada",
      sendAtUnixNano: sendAt }]);
    const [message] = (await tcp.getContext("node-unix")).window;
    assert.equal(message.content, "hello from a socket");
    assert.equal(message.sender, "ada");
    assert.equal(message.sendAtUnixNano, sendAt, "int64 send times survive as bigint");
  });

  it("replays an Append retried with the same idempotency key", async () => {
    const first = await tcp.append("node-retry", [["user", "charge the card once"]], { idempotencyKey: "pay-1" });
    const retried = await unix.append("node-retry", [["user", "charge the card once"]], { idempotencyKey: "pay-1" });
    assert.equal(first.replayed, false);
    assert.equal(retried.replayed, true);
    assert.deepEqual(retried.messages.map((m) => m.id), first.messages.map((m) => m.id));
    assert.equal((await tcp.getContext("node-retry")).window.length, 1, "the retry stored nothing");
  });

  it("replaces a whole history in one step, refusing it once another writer changed the session", async () => {
    const [first] = (await tcp.append("node-replace", [["user", "old words"]])).messages;
    const replaced = await tcp.replaceMessages("node-replace", [["system", "be brief"], ["user", "new words"]],
      { expectedLastId: first.id, idempotencyKey: "rewrite-1" });
    assert.deepEqual(replaced.messages.map((m) => m.id), [2n, 3n], "ids are never reused");
    const retried = await unix.replaceMessages("node-replace", [["system", "be brief"], ["user", "new words"]],
      { expectedLastId: first.id, idempotencyKey: "rewrite-1" });
    assert.equal(retried.replayed, true);
    assert.deepEqual((await tcp.listMessages("node-replace")).messages.map((m) => m.content),
      ["be brief", "new words"]);
    await tcp.append("node-replace", [["user", "another writer"]]);
    const refused = await rejection(tcp.replaceMessages("node-replace", [["user", "stale"]],
      { expectedLastId: 3n }));
    assert.deepEqual([refused.code, refused.reason], [Code.FailedPrecondition, "HISTORY_CHANGED"]);
  });

  it("rejects bad input with INVALID_ARGUMENT and a stable reason, storing nothing", async () => {
    await tcp.append("node-bad", [["user", "kept"]]);
    const cases: [() => Promise<unknown>, string][] = [
      [() => tcp.append("bad\nid", [["user", "x"]]), "INVALID_SESSION_ID"],
      [() => tcp.append("node-bad", []), "NO_MESSAGES"],
      [() => tcp.append("node-bad", [{ content: "who said this?" }]), "INVALID_ROLE"],
      [() => tcp.append("node-bad", [["user", ""]]), "EMPTY_CONTENT"],
      [() => tcp.getContext(".."), "INVALID_SESSION_ID"],
    ];
    for (const [call, reason] of cases) {
      const error = await rejection(call());
      assert.equal(error.code, Code.InvalidArgument, `${reason}: ${error.message}`);
      assert.equal(error.codeName, "INVALID_ARGUMENT");
      assert.equal(error.reason, reason);
      assert.ok(error.detail.length > 0, "the message explains the error to a person");
    }
    assert.deepEqual((await tcp.getContext("node-bad")).window.map((m) => m.content), ["kept"]);
  });

  it("reports NOT_FOUND with its reason for a session that must exist", async () => {
    const error = await rejection(unix.getSummary("node-never-written"));
    assert.equal(error.code, Code.NotFound);
    assert.equal(error.codeName, "NOT_FOUND");
    assert.equal(error.reason, "SESSION_NOT_FOUND");
  });

  it("reads an empty summary of an existing session", async () => {
    await tcp.append("node-summary", [["user", "anything"]]);
    const reply = await tcp.getSummary("node-summary");
    assert.equal(reply.summary, undefined);
    assert.equal(reply.cursorUnixNano, 0n);
  });

  it("pages through sessions in id order", async () => {
    for (const id of ["node-page-b", "node-page-a", "node-page-c"]) {
      await tcp.append(id, [["user", `in ${id}`]]);
    }
    const seen: string[] = [];
    let pageToken = "";
    do {
      const page = await unix.listSessions({ pageSize: 2, pageToken });
      assert.ok(page.sessions.length <= 2);
      seen.push(...page.sessions.map((s) => s.sessionId));
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    assert.deepEqual(seen, [...seen].sort());
    const pages = seen.filter((id) => id.startsWith("node-page-"));
    assert.deepEqual(pages, ["node-page-a", "node-page-b", "node-page-c"]);
    const [info] = (await tcp.listSessions({ pageSize: 1000 })).sessions.filter((s) => s.sessionId === "node-page-a");
    assert.equal(info.messageCount, 1);
    assert.ok(info.historyBytes > 0n);
  });

});
