/**
 * The package's public surface: the client, its error type and every
 * generated memsvc.v1 message, enum and service descriptor. Must never add
 * behaviour of its own.
 */
export {
  type Call, type ChatMessage, type ClientOptions, DEFAULT_TIMEOUT_MS, FIT_TIMEOUT_MS, type FitOptions, MemsvcClient,
  type MessageLike, SESSION_METADATA, sessionHeader, TENANT_METADATA,
} from "./client.js";
export { enumLabel, type Name } from "./convert.js";
export {
  AbortedError, AlreadyExistsError, CanceledError, DataLossError, DeadlineExceededError, ERRORS,
  FailedPreconditionError, grpcCodeName, InternalError, InvalidArgumentError, MemsvcError, NotFoundError,
  OutOfRangeError, PermissionDeniedError, ResourceExhaustedError, UnauthenticatedError, UnavailableError,
  UnimplementedError, UnknownError,
} from "./errors.js";
export { DEFAULT_RETRY, type RetryPolicy } from "./retry.js";
export type { TlsOptions } from "./target.js";
export { Code } from "@connectrpc/connect";
export * from "./gen/memsvc/v1/error_memory_pb.js";
export * from "./gen/memsvc/v1/fit_pb.js";
export * from "./gen/memsvc/v1/memory_pb.js";
export * from "./gen/memsvc/v1/shards_pb.js";
