/**
 * Turns a memsvc target ("127.0.0.1:50051", "[::1]:50051", "unix:///run/memsvc.sock",
 * "unix:relative.sock") and its TLS settings into the HTTP/2 session that
 * reaches it. Owns only addressing and transport security: it must never
 * know about RPCs, deadlines or errors.
 */
import { connect, type Socket } from "node:net";
import { Http2SessionManager } from "@connectrpc/connect-node";

/** PEM material for TLS; without `ca` the system's CAs are trusted. `cert` and `key` are for mTLS. */
export interface TlsOptions {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
}

/** The base URL gRPC paths are resolved against and, for unix sockets, the socket path. */
export interface Endpoint {
  baseUrl: string;
  socketPath?: string;
}

export function parseTarget(target: string, tls = false): Endpoint {
  if (tls && target.startsWith("unix:")) {
    throw new TypeError("memsvc serves unix sockets in plaintext: drop the tls option for a unix target");
  }
  if (target.startsWith("unix://")) {
    return unixEndpoint(target.slice("unix://".length), target);
  }
  if (target.startsWith("unix:")) {
    return unixEndpoint(target.slice("unix:".length), target);
  }
  if (!/^(\[[0-9a-fA-F:.]+\]|[^:/\s]+):\d+$/.test(target)) {
    throw new TypeError(`memsvc target must be HOST:PORT or unix:///path, got ${JSON.stringify(target)}`);
  }
  return { baseUrl: `${tls ? "https" : "http"}://${target}` };
}

function unixEndpoint(socketPath: string, target: string): Endpoint {
  if (socketPath === "") {
    throw new TypeError(`memsvc unix target has no socket path: ${JSON.stringify(target)}`);
  }
  // The authority is only the :authority header here; the socket decides where bytes go.
  return { baseUrl: "http://localhost", socketPath };
}

/** One HTTP/2 session manager per client: it reconnects on demand and closes with `abort()`. */
export function sessionManager(endpoint: Endpoint, tls: TlsOptions = {}): Http2SessionManager {
  const socketPath = endpoint.socketPath;
  const nodeOptions = socketPath === undefined ? { ...tls } : { createConnection: (): Socket => connect(socketPath) };
  return new Http2SessionManager(endpoint.baseUrl, {}, nodeOptions);
}
