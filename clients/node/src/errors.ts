/**
 * MemsvcError: a failed memsvc RPC as the status code plus the stable
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
    this.name = "MemsvcError";
    this.code = code;
    this.codeName = codeName;
    this.reason = reason;
    this.detail = detail;
    this.metadata = metadata;
  }

  static from(error: unknown): MemsvcError {
    const connectError = ConnectError.from(error);
    const [info] = connectError.findDetails(ErrorInfoSchema);
    return new MemsvcError(connectError.code, info?.reason ?? "", connectError.rawMessage, info?.metadata ?? {},
      error);
  }
}

/** "InvalidArgument" -> "INVALID_ARGUMENT": the names every other gRPC language prints. */
export function grpcCodeName(code: Code): string {
  const name = Code[code] ?? `CODE_${code}`;
  return name.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}
