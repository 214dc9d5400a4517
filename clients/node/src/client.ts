/**
 * MemsvcClient: a thin, typed client over the generated Connect stubs, one
 * method per RPC. Owns the connection (TCP or unix socket), the default
 * deadline, the bearer token and turning failures into MemsvcError. Must
 * never hold memory logic or retry on its own: see README for what is safe
 * to retry.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { type CallOptions, type Client, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, type Http2SessionManager } from "@connectrpc/connect-node";
import { MemsvcError } from "./errors.js";
import {
  type DeleteErrorResponse,
  ErrorMemoryService,
  type ListErrorsResponse,
  type LookupErrorsResponse,
  Outcome,
  type RecordErrorRequest,
  type RecordErrorResponse,
  type SearchErrorsResponse,
  type UpdateErrorActionResponse,
} from "./gen/memsvc/v1/error_memory_pb.js";
import {
  type AppendResponse,
  type CompactResponse,
  type GetContextResponse,
  type GetSummaryResponse,
  type ListSessionsResponse,
  MemoryService,
  type MessageSchema,
  type RemoveSessionResponse,
  ResetMode,
  type ResetResponse,
  Role,
  type SearchRequest,
  type SearchResponse,
  type SummarizeResponse,
} from "./gen/memsvc/v1/memory_pb.js";
import { parseTarget, sessionManager, type TlsOptions } from "./target.js";

export const DEFAULT_TIMEOUT_MS = 10_000;

export interface ClientOptions {
  /** Deadline of every call that sets none itself; default 10 s. */
  timeoutMs?: number;
  /** Bearer token, for a server started with token_file. */
  token?: string;
  /** TLS to a TCP target: `true` trusts the system's CAs; or the server's CA and, for mTLS, a client cert and key. */
  tls?: boolean | TlsOptions;
}

/** Per-call options: a deadline overriding the default, and an AbortSignal to cancel. */
export interface Call {
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** A message to append: `["user", "hello"]`, or a Message init with any field set. */
export type MessageLike = readonly ["user" | "assistant", string] | MessageInitShape<typeof MessageSchema>;

/** The optional fields of a request, for requests made of scalars only. */
type Fields<M, Positional extends keyof M> = Partial<Omit<M, "$typeName" | "$unknown" | Positional>>;
type SearchOptions = Call & Fields<SearchRequest, "sessionId" | "query">;
type RecordErrorOptions = Call & Fields<RecordErrorRequest, "toolName" | "symptom" | "action">;

const ROLES = { user: Role.USER, assistant: Role.ASSISTANT } as const;

function toMessage(item: MessageLike): MessageInitShape<typeof MessageSchema> {
  if (Array.isArray(item)) {
    const [role, content] = item as readonly ["user" | "assistant", string];
    return { role: ROLES[role], content };
  }
  return item as MessageInitShape<typeof MessageSchema>;
}

/** Splits per-call options from request fields given in the same object. */
function split<T extends Call>(options: T): [CallOptions, Omit<T, keyof Call>] {
  const { timeoutMs, signal, ...fields } = options;
  return [{ timeoutMs, signal }, fields];
}

export class MemsvcClient {
  /** The generated MemoryService client, for anything the wrapper does not cover. */
  readonly memory: Client<typeof MemoryService>;
  /** The generated ErrorMemoryService client. */
  readonly errors: Client<typeof ErrorMemoryService>;
  private readonly sessions: Http2SessionManager;

  constructor(target: string, options: ClientOptions = {}) {
    const tls = options.tls === true ? {} : options.tls || undefined;
    const endpoint = parseTarget(target, tls !== undefined);
    this.sessions = sessionManager(endpoint, tls);
    const interceptors: Interceptor[] = [];
    if (options.token) {
      const authorization = `Bearer ${options.token}`;
      interceptors.push((next) => (request) => {
        request.header.set("authorization", authorization);
        return next(request);
      });
    }
    const transport = createGrpcTransport({
      baseUrl: endpoint.baseUrl,
      sessionManager: this.sessions,
      defaultTimeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      interceptors,
    });
    this.memory = createClient(MemoryService, transport);
    this.errors = createClient(ErrorMemoryService, transport);
  }

  /** Closes the connection; calls after this reconnect. */
  close(): void {
    this.sessions.abort();
  }

  private async call<T>(invoke: (options: CallOptions) => Promise<T>, options: CallOptions): Promise<T> {
    try {
      return await invoke(options);
    } catch (error) {
      throw MemsvcError.from(error);
    }
  }

  // -- MemoryService ---------------------------------------------------------

  append(sessionId: string, messages: readonly MessageLike[],
    options: Call & { idempotencyKey?: string } = {}): Promise<AppendResponse> {
    const [call, { idempotencyKey }] = split(options);
    const request = { sessionId, messages: messages.map(toMessage), idempotencyKey };
    return this.call((o) => this.memory.append(request, o), call);
  }

  getContext(sessionId: string, options: Call & { requestText?: string } = {}): Promise<GetContextResponse> {
    const [call, { requestText }] = split(options);
    return this.call((o) => this.memory.getContext({ sessionId, requestText }, o), call);
  }

  search(sessionId: string, query: string, options: SearchOptions = {}): Promise<SearchResponse> {
    const [call, fields] = split(options);
    return this.call((o) => this.memory.search({ ...fields, sessionId, query }, o), call);
  }

  compact(sessionId: string, options: Call = {}): Promise<CompactResponse> {
    return this.call((o) => this.memory.compact({ sessionId }, o), options);
  }

  summarize(sessionId: string, options: Call = {}): Promise<SummarizeResponse> {
    return this.call((o) => this.memory.summarize({ sessionId }, o), options);
  }

  getSummary(sessionId: string, options: Call = {}): Promise<GetSummaryResponse> {
    return this.call((o) => this.memory.getSummary({ sessionId }, o), options);
  }

  reset(sessionId: string, mode: ResetMode = ResetMode.SUMMARY, options: Call = {}): Promise<ResetResponse> {
    return this.call((o) => this.memory.reset({ sessionId, mode }, o), options);
  }

  removeSession(sessionId: string, options: Call = {}): Promise<RemoveSessionResponse> {
    return this.call((o) => this.memory.removeSession({ sessionId }, o), options);
  }

  listSessions(options: Call & { pageSize?: number; pageToken?: string } = {}): Promise<ListSessionsResponse> {
    const [call, page] = split(options);
    return this.call((o) => this.memory.listSessions(page, o), call);
  }

  // -- ErrorMemoryService ----------------------------------------------------

  recordError(toolName: string, symptom: string, action: string,
    options: RecordErrorOptions = {}): Promise<RecordErrorResponse> {
    const [call, fields] = split(options);
    const request = { outcome: Outcome.RESOLVED, ...fields, toolName, symptom, action };
    return this.call((o) => this.errors.recordError(request, o), call);
  }

  lookupErrors(toolName: string, errorText: string,
    options: Call & { limit?: number } = {}): Promise<LookupErrorsResponse> {
    const [call, { limit }] = split(options);
    return this.call((o) => this.errors.lookupErrors({ toolName, errorText, limit }, o), call);
  }

  searchErrors(query: string, options: Call & { limit?: number } = {}): Promise<SearchErrorsResponse> {
    const [call, { limit }] = split(options);
    return this.call((o) => this.errors.searchErrors({ query, limit }, o), call);
  }

  listErrors(options: Call & { pageSize?: number; pageToken?: string; toolName?: string } = {}):
    Promise<ListErrorsResponse> {
    const [call, page] = split(options);
    return this.call((o) => this.errors.listErrors(page, o), call);
  }

  updateErrorAction(id: string, action: string, options: Call = {}): Promise<UpdateErrorActionResponse> {
    return this.call((o) => this.errors.updateErrorAction({ id, action }, o), options);
  }

  deleteError(id: string, options: Call = {}): Promise<DeleteErrorResponse> {
    return this.call((o) => this.errors.deleteError({ id }, o), options);
  }
}
