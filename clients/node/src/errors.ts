/**
 * MemsvcError, and one subclass per status code: a failed memsvc RPC as the status code plus the stable
 * `google.rpc.ErrorInfo` reason the server attaches to every error (read from
 * the `grpc-status-details-bin` trailer). Must never decide retries or
 * recovery: callers switch on `code` and `reason`.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";

export class MemsvcError extends Error {
  /** The gRPC status code (Connect's `Code` uses the same numbers). */
  readonly code: Code;
  /** The status code's gRPC name, e.g. "INVALID_ARGUMENT". */
  readonly codeName: string;
  /** The stable UPPER_SNAKE reason to switch on, e.g. "INVALID_SESSION_ID"; "" when the server sent none. */
  readonly reason: string;
  /** ErrorInfo metadata (extra facts such as a limit), when the server sent some. */
  readonly metadata: Readonly<Record<string, string>>;
  /** The server's message, for people. */
  readonly detail: string;

  constructor(code: Code, reason: string, detail: string, metadata: Record<string, string> = {}, cause?: unknown) {
    const codeName = grpcCodeName(code);
    super(`${codeName} ${reason}: ${detail}`, { cause });
    this.name = new.target.name;
    this.code = code;
    this.codeName = codeName;
    this.reason = reason;
    this.detail = detail;
    this.metadata = metadata;
  }

  /** The subclass for the error's code (`InvalidArgumentError`, `NotFoundError`, ...). */
  static from(error: unknown): MemsvcError {
    const connectError = ConnectError.from(error);
    const [info] = connectError.findDetails(ErrorInfoSchema);
    const Class = ERRORS[connectError.code] ?? MemsvcError;
    return new Class(connectError.code, info?.reason ?? "", connectError.rawMessage, info?.metadata ?? {}, error);
  }
}

/** CANCELED: the call was aborted, or the connection dropped. */
export class CanceledError extends MemsvcError {}
/** UNKNOWN: memsvc never sends it; a proxy or a transport failure may. */
export class UnknownError extends MemsvcError {}
/** INVALID_ARGUMENT: bad input; the same call fails the same way. */
export class InvalidArgumentError extends MemsvcError {}
/** DEADLINE_EXCEEDED: no answer in time; the call may or may not have happened. */
export class DeadlineExceededError extends MemsvcError {}
/** NOT_FOUND: a session or lesson that must exist does not. */
export class NotFoundError extends MemsvcError {}
/** ALREADY_EXISTS. */
export class AlreadyExistsError extends MemsvcError {}
/** PERMISSION_DENIED. */
export class PermissionDeniedError extends MemsvcError {}
/** RESOURCE_EXHAUSTED: a size limit, a quota, overload, or a full disk (reason DISK_FULL). */
export class ResourceExhaustedError extends MemsvcError {}
/** FAILED_PRECONDITION: a setting is missing (no LLM configured). */
export class FailedPreconditionError extends MemsvcError {}
/** ABORTED. */
export class AbortedError extends MemsvcError {}
/** OUT_OF_RANGE. */
export class OutOfRangeError extends MemsvcError {}
/** UNIMPLEMENTED: the server's contract is older than this client's. */
export class UnimplementedError extends MemsvcError {}
/** INTERNAL: a bug in the server, or a TLS certificate that is not trusted. */
export class InternalError extends MemsvcError {}
/** UNAVAILABLE: server down, starting, draining, or a storage error; nothing was stored. */
export class UnavailableError extends MemsvcError {}
/** DATA_LOSS. */
export class DataLossError extends MemsvcError {}
/** UNAUTHENTICATED: the token is missing (MISSING_TOKEN) or wrong (INVALID_TOKEN). */
export class UnauthenticatedError extends MemsvcError {}

type ErrorClass = new (code: Code, reason: string, detail: string, metadata?: Record<string, string>,
  cause?: unknown) => MemsvcError;

/** The class thrown for each status code. */
export const ERRORS: Partial<Record<Code, ErrorClass>> = {
  [Code.Canceled]: CanceledError,
  [Code.Unknown]: UnknownError,
  [Code.InvalidArgument]: InvalidArgumentError,
  [Code.DeadlineExceeded]: DeadlineExceededError,
  [Code.NotFound]: NotFoundError,
  [Code.AlreadyExists]: AlreadyExistsError,
  [Code.PermissionDenied]: PermissionDeniedError,
  [Code.ResourceExhausted]: ResourceExhaustedError,
  [Code.FailedPrecondition]: FailedPreconditionError,
  [Code.Aborted]: AbortedError,
  [Code.OutOfRange]: OutOfRangeError,
  [Code.Unimplemented]: UnimplementedError,
  [Code.Internal]: InternalError,
  [Code.Unavailable]: UnavailableError,
  [Code.DataLoss]: DataLossError,
  [Code.Unauthenticated]: UnauthenticatedError,
};

/** "InvalidArgument" -> "INVALID_ARGUMENT": the names every other gRPC language prints. */
export function grpcCodeName(code: Code): string {
  const name = Code[code] ?? `CODE_${code}`;
  return name.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}
