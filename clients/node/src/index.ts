/**
 * The package's public surface: the client, its error type and every
 * generated memsvc.v1 message, enum and service descriptor. Must never add
 * behaviour of its own.
 */
export { type Call, type ClientOptions, DEFAULT_TIMEOUT_MS, MemsvcClient, type MessageLike } from "./client.js";
export { grpcCodeName, MemsvcError } from "./errors.js";
export type { TlsOptions } from "./target.js";
export { Code } from "@connectrpc/connect";
export * from "./gen/memsvc/v1/error_memory_pb.js";
export * from "./gen/memsvc/v1/memory_pb.js";
