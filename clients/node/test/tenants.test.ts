/** Tenants end to end: a real memsvc with a tenants file, tokens of two tenants, and an admin of every tenant
 * naming the tenant it acts for with the `tenant` option, on unary calls and on streams. */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Code, MemsvcClient, MemsvcError } from "../src/index.js";
import { type Server, startServer } from "./server.js";

/** A tenants file's text for (token, tenant, role) entries: only each token's SHA-256. */
function tenantsFile(tokens: [string, string, string][]): string {
  return tokens.map(([token, tenant, role]) => `[[tokens]]\nsha256 = "${createHash("sha256").update(token)
    .digest("hex")}"\ntenant = "${tenant}"\nrole = "${role}"\n`).join("\n");
}

async function using<T>(client: MemsvcClient, body: (client: MemsvcClient) => Promise<T>): Promise<T> {
  try {
    return await body(client);
  } finally {
    client.close();
  }
}

async function refusal(promise: Promise<unknown>): Promise<MemsvcError> {
  const error = await promise.then(() => undefined, (caught: unknown) => caught);
  assert.ok(error instanceof MemsvcError, `expected a MemsvcError, got ${String(error)}`);
  return error;
}

const windowOf = (client: MemsvcClient, session: string) =>
  client.getContext(session).then((context) => context.window.map((message) => message.content));

describe("a server with a tenants file", () => {
  let directory: string;
  let server: Server;

  before(async () => {
    directory = mkdtempSync(join(tmpdir(), "memsvc-node-tenants-"));
    writeFileSync(join(directory, "tenants.toml"), tenantsFile([
      ["alpha-writer-token", "alpha", "write"], ["beta-writer-token", "beta", "write"],
      ["every-tenant-admin", "*", "admin"]]));
    server = await startServer("--tenants-file", join(directory, "tenants.toml"));
    await using(new MemsvcClient(server.tcp, { token: "alpha-writer-token" }),
      (alpha) => alpha.append("node-shared", [["user", "alpha's secret"]]));
    await using(new MemsvcClient(server.unix, { token: "beta-writer-token" }),
      (beta) => beta.append("node-shared", [["user", "beta's note"]]));
  });

  after(async () => {
    await server?.stop();
    rmSync(directory, { recursive: true, force: true });
  });

  it("keeps each tenant's session of the same id apart", async () => {
    assert.deepEqual(await using(new MemsvcClient(server.tcp, { token: "alpha-writer-token" }),
      (alpha) => windowOf(alpha, "node-shared")), ["alpha's secret"]);
    assert.deepEqual(await using(new MemsvcClient(server.tcp, { token: "beta-writer-token" }),
      (beta) => windowOf(beta, "node-shared")), ["beta's note"]);
  });

  it("lets an admin of every tenant act for the tenant it names, on unary calls and streams", async () => {
    await using(new MemsvcClient(server.tcp, { token: "every-tenant-admin", tenant: "beta" }), async (admin) => {
      assert.deepEqual(await windowOf(admin, "node-shared"), ["beta's note"]);
      let tenant = "";
      const exported: string[] = [];
      for await (const part of admin.shards.exportSession({ sessionId: "node-shared" })) {
        tenant = part.head?.tenant ?? tenant;
        exported.push(...part.messages.map((item) => item.message?.content ?? ""));
      }
      assert.equal(tenant, "beta");
      assert.deepEqual(exported, ["beta's note"]);
    });
    const unknown = await using(new MemsvcClient(server.tcp, { token: "every-tenant-admin", tenant: "gamma" }),
      (admin) => refusal(admin.getContext("node-shared")));
    assert.equal(unknown.code, Code.PermissionDenied);
    assert.equal(unknown.reason, "TENANT_FORBIDDEN");
  });

  it("refuses a tenant's token naming another tenant, storing nothing", async () => {
    const refused = await using(new MemsvcClient(server.tcp, { token: "alpha-writer-token", tenant: "beta" }),
      (alpha) => refusal(alpha.append("node-shared", [["user", "should not land"]])));
    assert.equal(refused.code, Code.PermissionDenied);
    assert.equal(refused.reason, "TENANT_FORBIDDEN");
    assert.deepEqual(await using(new MemsvcClient(server.tcp, { token: "beta-writer-token" }),
      (beta) => windowOf(beta, "node-shared")), ["beta's note"]);
  });
});
