/**
 * The dashboard's way in to memsvc: the contract's two services over the Connect
 * protocol (JSON), from this page's own origin, with the bearer token when one
 * was given, and the tenant an admin of every tenant picked (`memsvc-tenant` on
 * every call), and the server's metrics history (GET /dashboard/history, the same headers).
 * The token lives in this module's memory only: never in a URL, a
 * cookie or web storage, so it is gone when the tab closes or reloads.
 */
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { errorFromJson } from "@connectrpc/connect/protocol-connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { ErrorMemoryService } from "./gen/memsvc/v1/error_memory_pb.js";
import { MemoryService } from "./gen/memsvc/v1/memory_pb.js";
import { ShardService } from "./gen/memsvc/v1/shards_pb.js";

/** The request header naming the tenant an admin of every tenant acts for. */
const TENANT_HEADER = "memsvc-tenant";
/** The tenant a call naming none acts for: an admin of every tenant's without a pick. */
export const DEFAULT_TENANT = "default";

let token = "";
let tenant = "";

export function signIn(value: string): void {
  token = value.trim();
}

export function signOut(): void {
  token = "";
  tenant = "";
}

/** Act for this tenant from the next call on (an admin of every tenant's pick). */
export function actFor(name: string): void {
  tenant = name === DEFAULT_TENANT ? "" : name;
}

export function actingFor(): string {
  return tenant || DEFAULT_TENANT;
}

export function signedIn(): boolean {
  return token !== "";
}

const bearer: Interceptor = (next) => (request) => {
  if (token) {
    request.header.set("authorization", `Bearer ${token}`);
  }
  if (tenant) {
    request.header.set(TENANT_HEADER, tenant);
  }
  return next(request);
};

const transport = createConnectTransport({ baseUrl: window.location.origin, interceptors: [bearer] });

export const memory = createClient(MemoryService, transport);
export const lessons = createClient(ErrorMemoryService, transport);
/** ListTenants only: the tenant picker's choices (an admin's call). */
export const shards = createClient(ShardService, transport);

/** A failed call as a person reads it: the server's own message, its code and its ErrorInfo reason. */
export interface Failure {
  message: string;
  code: string;
  reason: string;
  unauthenticated: boolean;
}

export function failure(error: unknown): Failure {
  const connect = ConnectError.from(error);
  const reason = connect.findDetails(ErrorInfoSchema)[0]?.reason ?? "";
  const code = Code[connect.code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
  return { message: connect.rawMessage, code, reason, unauthenticated: connect.code === Code.Unauthenticated };
}

/** The server's metrics history of one tenant (all tenants for an admin of every tenant who picked none). */
export interface History {
  key: string;
  step_seconds: number;
  /** Unix seconds, oldest first. */
  times: number[];
  /** Series name -> a value per time; null where the server was not sampling or measured nothing. */
  series: Record<string, (number | null)[]>;
  /** False for a tenant past the server's cap of tenants tracked by name. */
  tracked: boolean;
}

export async function history(): Promise<History> {
  const headers = new Headers();
  if (token) {
    headers.set("authorization", `Bearer ${token}`);
  }
  if (tenant) {
    headers.set(TENANT_HEADER, tenant);
  }
  const reply = await fetch("/dashboard/history", { headers, cache: "no-store" });
  if (!reply.ok) {
    // Refusals come as Connect error JSON, as every call's: failure() reads them alike.
    throw errorFromJson(await reply.json(), undefined, new ConnectError(`HTTP ${reply.status}`, Code.Unknown));
  }
  return (await reply.json()) as History;
}
