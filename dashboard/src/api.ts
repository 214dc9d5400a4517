/**
 * The dashboard's way in to memsvc: the contract's two services over the Connect
 * protocol (JSON), from this page's own origin, with the bearer token when one
 * was given. The token lives in this module's memory only: never in a URL, a
 * cookie or web storage, so it is gone when the tab closes or reloads.
 */
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { ErrorMemoryService } from "./gen/memsvc/v1/error_memory_pb.js";
import { MemoryService } from "./gen/memsvc/v1/memory_pb.js";

let token = "";

export function signIn(value: string): void {
  token = value.trim();
}

export function signOut(): void {
  token = "";
}

export function signedIn(): boolean {
  return token !== "";
}

const bearer: Interceptor = (next) => (request) => {
  if (token) {
    request.header.set("authorization", `Bearer ${token}`);
  }
  return next(request);
};

const transport = createConnectTransport({ baseUrl: window.location.origin, interceptors: [bearer] });

export const memory = createClient(MemoryService, transport);
export const lessons = createClient(ErrorMemoryService, transport);

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
