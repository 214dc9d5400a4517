/**
 * Starts a real memsvc server (`python -m memsvc serve`) on an ephemeral TCP
 * port and a unix socket over a fresh data directory, and stops it. Mirrors
 * tests/conftest.py; must never fake the server.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** The repo root: this file runs from clients/node/dist/test/. */
export const ROOT = resolve(fileURLToPath(import.meta.url), "../../../../..");
const PYTHON = process.env.MEMSVC_PYTHON ?? join(ROOT, ".venv/bin/python");
const START_TIMEOUT_MS = 30_000;

export interface Server {
  tcp: string;
  unix: string;
  stop(): Promise<void>;
}

export async function startServer(...args: string[]): Promise<Server> {
  const directory = mkdtempSync(join(tmpdir(), "memsvc-node-"));
  const child = spawn(PYTHON, ["-m", "memsvc", "serve", "--data-dir", join(directory, "data"),
    "--listen", "127.0.0.1:0", "--listen", `unix://${join(directory, "sock")}`, ...args],
  { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
  const log: string[] = [];
  try {
    const addresses = await serving(child, log);
    return {
      tcp: addresses.find((address) => !address.startsWith("unix://")) ?? "",
      unix: addresses.find((address) => address.startsWith("unix://")) ?? "",
      stop: async () => {
        await stop(child);
        rmSync(directory, { recursive: true, force: true });
      },
    };
  } catch (error) {
    child.kill("SIGKILL");
    rmSync(directory, { recursive: true, force: true });
    throw new Error(`memsvc did not start: ${String(error)}\n${log.join("\n")}`);
  }
}

function serving(child: ChildProcess, log: string[]): Promise<string[]> {
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error("timed out waiting for the serving log line")), START_TIMEOUT_MS);
    const fail = (error: Error): void => {
      clearTimeout(timer);
      reject(error);
    };
    child.once("exit", (code) => fail(new Error(`server exited with ${code}`)));
    child.once("error", fail);
    // Keep reading stderr after startup so the server never blocks on a full pipe.
    createInterface({ input: child.stderr! }).on("line", (line) => {
      log.push(line);
      const entry = parse(line);
      if (entry?.event === "serving") {
        clearTimeout(timer);
        resolvePromise(entry.addresses as string[]);
      }
    });
  });
}

function parse(line: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve();
  }
  return new Promise((resolvePromise) => {
    child.once("exit", () => resolvePromise());
    child.kill("SIGTERM");
  });
}

/** One call the proxy saw: its path, request metadata, and the seconds left of its deadline on arrival. */
export interface ProxiedCall {
  method: string;
  metadata: Record<string, string>;
  deadline_seconds: number | null;
}

export interface Proxy {
  target: string;
  /** Stops the proxy and returns the calls it saw, in order. */
  stop(): Promise<ProxiedCall[]>;
}

/**
 * Starts the repo's recording gRPC proxy (tests/support/grpc_proxy.py) in front of `upstream`;
 * each `fail` is METHOD=CODE:TIMES, answered by the proxy instead of forwarded.
 */
export async function startProxy(upstream: string, ...fail: string[]): Promise<Proxy> {
  const child = spawn(PYTHON, ["-m", "tests.support.grpc_proxy", upstream, ...fail.flatMap((rule) => ["--fail", rule])],
    { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, GRPC_VERBOSITY: "ERROR" } });
  const lines: string[] = [];
  const target = await new Promise<string>((resolvePromise, reject) => {
    child.once("exit", (code) => reject(new Error(`proxy exited with ${code}`)));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      lines.push(line);
      const entry = parse(line);
      if (entry?.event === "serving") resolvePromise(entry.target as string);
    });
  });
  return {
    target,
    stop: async () => {
      await stop(child);
      return lines.map(parse).filter((entry) => entry?.method !== undefined) as unknown as ProxiedCall[];
    },
  };
}
