/**
 * Retries as the contract allows them: an interceptor that calls again, after UNAVAILABLE only,
 * the RPCs whose `idempotency_level` is set (Append only with an idempotency key, DeleteMessages only
 * with ids; any RPC the caller asks for by `retry: true`), with capped exponential backoff and full jitter, all within
 * the call's one deadline. Must never decide anything about requests or results.
 */
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createContextKey, type Interceptor } from "@connectrpc/connect";

export interface RetryPolicy {
  /** Attempts in all, the first included; default 4. */
  attempts: number;
  /** First wait bound; default 100 ms, then times `multiplier` (2) up to `maxBackoffMs` (2 s). */
  initialBackoffMs: number;
  maxBackoffMs: number;
  multiplier: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, initialBackoffMs: 100, maxBackoffMs: 2_000, multiplier: 2 };

/** Per call: true or false overrides the contract's word; undefined follows it. */
export const RETRY = createContextKey<boolean | undefined>(undefined);

export function retrying(policy: RetryPolicy): Interceptor {
  return (next) => async (request) => {
    const asked = request.contextValues.get(RETRY);
    const { idempotencyKey, ids } = request.message as { idempotencyKey?: unknown; ids?: unknown };
    const safe = asked ?? (request.method.idempotency !== MethodOptions_IdempotencyLevel.IDEMPOTENCY_UNKNOWN ||
      ((request.method.name === "Append" || request.method.name === "ReplaceMessages") &&
        typeof idempotencyKey === "string" && idempotencyKey !== "") ||
      (request.method.name === "DeleteMessages" && Array.isArray(ids) && ids.length > 0));
    for (let attempt = 1; ; attempt++) {
      try {
        return await next(request);
      } catch (error) {
        const code = ConnectError.from(error).code;
        if (!safe || request.stream || code !== Code.Unavailable || attempt >= policy.attempts ||
          request.signal.aborted) {
          throw error;
        }
        const bound = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * policy.multiplier ** (attempt - 1));
        await sleep(Math.random() * bound, request.signal);
      }
    }
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve(); // the next attempt then fails with the deadline's own error
    }, { once: true });
  });
}
