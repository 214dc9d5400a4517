/** The bearer token and TLS, end to end through real memsvc servers started with token_file and tls_* settings. */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, MemsvcClient, MemsvcError } from "../src/index.js";
import { type Certificates, makeCertificates } from "./certs.js";
import { type Server, startServer } from "./server.js";

async function refusal(promise: Promise<unknown>): Promise<MemsvcError> {
  const error = await promise.then(() => undefined, (caught: unknown) => caught);
  assert.ok(error instanceof MemsvcError, `expected a MemsvcError, got ${String(error)}`);
  return error;
}

async function using<T>(client: MemsvcClient, body: (client: MemsvcClient) => Promise<T>): Promise<T> {
  try {
    return await body(client);
  } finally {
    client.close();
  }
}

describe("a server started with token_file", () => {
  const token = "s3cret-token-0123456789abcdef";
  let directory: string;
  let server: Server;

  before(async () => {
    directory = mkdtempSync(join(tmpdir(), "memsvc-node-token-"));
    writeFileSync(join(directory, "token"), `${token}\n`);
    server = await startServer("--token-file", join(directory, "token"));
  });

  after(async () => {
    await server?.stop();
    rmSync(directory, { recursive: true, force: true });
  });

  it("lets in a client with the token, over TCP and the unix socket", async () => {
    for (const target of [server.tcp, server.unix]) {
      await using(new MemsvcClient(target, { token }), async (member) => {
        await member.append("node-guarded", [["user", `via ${target}`]]);
      });
    }
    const context = await using(new MemsvcClient(server.tcp, { token }), (m) => m.getContext("node-guarded"));
    assert.equal(context.window.length, 2);
  });

  it("refuses a missing or wrong token with UNAUTHENTICATED and its reason, storing nothing", async () => {
    const missing = await using(new MemsvcClient(server.tcp), (c) => refusal(c.append("node-guarded",
      [["user", "should not land"]])));
    assert.equal(missing.code, Code.Unauthenticated);
    assert.equal(missing.reason, "MISSING_TOKEN");
    const wrong = await using(new MemsvcClient(server.unix, { token: `${token}x` }),
      (c) => refusal(c.getContext("node-guarded")));
    assert.equal(wrong.codeName, "UNAUTHENTICATED");
    assert.equal(wrong.reason, "INVALID_TOKEN");
    const context = await using(new MemsvcClient(server.tcp, { token }), (m) => m.getContext("node-guarded"));
    assert.equal(context.window.length, 2);
  });
});

describe("a server started with TLS", () => {
  let certificates: Certificates;
  let tlsServer: Server;
  let mtlsServer: Server;

  before(async () => {
    certificates = makeCertificates();
    const tls = ["--tls-cert-file", certificates.serverCertFile, "--tls-key-file", certificates.serverKeyFile];
    tlsServer = await startServer(...tls);
    mtlsServer = await startServer(...tls, "--tls-client-ca-file", certificates.caFile);
  });

  after(async () => {
    await tlsServer?.stop();
    await mtlsServer?.stop();
    certificates?.remove();
  });

  it("serves TCP over TLS to a client trusting its CA, and the unix socket in plaintext", async () => {
    const appended = await using(new MemsvcClient(tlsServer.tcp, { tls: { ca: certificates.ca } }),
      (c) => c.append("node-tls", [["user", "encrypted"]]));
    assert.equal(appended.messages.length, 1);
    const context = await using(new MemsvcClient(tlsServer.unix), (c) => c.getContext("node-tls"));
    assert.deepEqual(context.window.map((m) => m.content), ["encrypted"]);
  });

  // Refusals at the TLS layer carry no gRPC status from the server, so no reason: Connect names an untrusted
  // server certificate INTERNAL, and a connection the server drops (plaintext to a TLS port, no client
  // certificate under mTLS) CANCELED, from the HTTP/2 reset.
  it("refuses a client that does not trust the server or speaks plaintext, and stores nothing", async () => {
    const untrusted = await using(new MemsvcClient(tlsServer.tcp, { tls: true, timeoutMs: 5_000 }),
      (c) => refusal(c.append("node-tls-refused", [["user", "should not land"]])));
    assert.equal(untrusted.code, Code.Internal, untrusted.message);
    assert.match(untrusted.detail, /certificate/);
    const plaintext = await using(new MemsvcClient(tlsServer.tcp, { timeoutMs: 5_000 }),
      (c) => refusal(c.append("node-tls-refused", [["user", "should not land"]])));
    assert.equal(plaintext.code, Code.Canceled, plaintext.message);
    assert.deepEqual([untrusted.reason, plaintext.reason], ["", ""]);
    const never = await using(new MemsvcClient(tlsServer.unix), (c) => refusal(c.getSummary("node-tls-refused")));
    assert.equal(never.reason, "SESSION_NOT_FOUND");
  });

  it("admits only clients with a certificate the server's client CA signed (mTLS)", async () => {
    const anonymous = await using(new MemsvcClient(mtlsServer.tcp, { tls: { ca: certificates.ca }, timeoutMs: 5_000 }),
      (c) => refusal(c.append("node-mtls", [["user", "should not land"]])));
    assert.equal(anonymous.code, Code.Canceled, anonymous.message);
    assert.equal(anonymous.reason, "");
    const member = new MemsvcClient(mtlsServer.tcp, { tls: { ca: certificates.ca, cert: certificates.clientCert,
      key: certificates.clientKey } });
    await using(member, async () => {
      await member.append("node-mtls", [["user", "mutually trusted"]]);
      assert.deepEqual((await member.getContext("node-mtls")).window.map((m) => m.content), ["mutually trusted"]);
    });
  });

  it("refuses TLS options for a unix target, which memsvc serves in plaintext", () => {
    assert.throws(() => new MemsvcClient(tlsServer.unix, { tls: true }), TypeError);
  });
});
