import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseTarget } from "../src/target.js";

describe("parseTarget", () => {
  it("reads TCP targets as host:port", () => {
    assert.deepEqual(parseTarget("127.0.0.1:50051"), { baseUrl: "http://127.0.0.1:50051" });
    assert.deepEqual(parseTarget("memsvc.agents.svc:7000"), { baseUrl: "http://memsvc.agents.svc:7000" });
    assert.deepEqual(parseTarget("[::1]:50051"), { baseUrl: "http://[::1]:50051" });
  });

  it("reads absolute and relative unix socket targets", () => {
    assert.deepEqual(parseTarget("unix:///run/memsvc.sock"), { baseUrl: "http://localhost", socketPath: "/run/memsvc.sock" });
    assert.deepEqual(parseTarget("unix:memsvc.sock"), { baseUrl: "http://localhost", socketPath: "memsvc.sock" });
  });

  it("uses https for TLS targets", () => {
    assert.deepEqual(parseTarget("127.0.0.1:50051", true), { baseUrl: "https://127.0.0.1:50051" });
  });

  it("rejects targets it cannot reach", () => {
    for (const bad of ["", "localhost", "http://127.0.0.1:50051", "unix://", "127.0.0.1:port"]) {
      assert.throws(() => parseTarget(bad), TypeError, bad);
    }
  });
});
