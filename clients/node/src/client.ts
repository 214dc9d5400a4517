/**
 * MemsvcClient: a thin, typed client over the generated Connect stubs, one
 * method per RPC. Owns the connection (TCP or unix socket), the default
 * deadline, the bearer token, the `memsvc-session` header of per-session RPCs,
 * plain arguments (enum names such as "keyword"), retries where the contract
 * allows them and turning failures into MemsvcError subclasses. Must never
 * hold memory logic.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { type CallOptions, type Client, createClient, createContextValues, type Interceptor }
  from "@connectrpc/connect";
import { createGrpcTransport, type Http2SessionManager } from "@connectrpc/connect-node";
import { type Name, named } from "./convert.js";
import { MemsvcError } from "./errors.js";
import {
  type DeleteErrorResponse,
  ErrorMemoryService,
  type ListErrorsResponse,
  type LookupErrorsResponse,
  Outcome,
  type RecordErrorRequest,
  RecordErrorRequestSchema,
  type RecordErrorResponse,
  type SearchErrorsResponse,
  type UpdateErrorActionResponse,
} from "./gen/memsvc/v1/error_memory_pb.js";
import {
  AppendRequestSchema,
  type AppendResponse,
  type CompactResponse,
  type GetContextResponse,
  type GetSummaryResponse,
  type ListSessionsResponse,
  MemoryService,
  type MessageSchema,
  type RemoveSessionResponse,
  ResetMode,
  ResetRequestSchema,
  type ResetResponse,
  Role,
  type SearchRequest,
  SearchRequestSchema,
  type SearchResponse,
  type SummarizeResponse,
  TimeRange,
  Match,
} from "./gen/memsvc/v1/memory_pb.js";
import { type GetServerInfoResponse, ShardService } from "./gen/memsvc/v1/shards_pb.js";
import { DEFAULT_RETRY, RETRY, type RetryPolicy, retrying } from "./retry.js";
import { parseTarget, sessionManager, type TlsOptions } from "./target.js";

/** The request header naming the session a per-session RPC acts on: a proxy in front of shards routes by it. */
export const SESSION_METADATA = "memsvc-session";

export const DEFAULT_TIMEOUT_MS = 10_000;

export interface ClientOptions {
  /** Deadline of every call that sets none itself; default 10 s. */
  timeoutMs?: number;
  /** Bearer token, for a server started with token_file. */
  token?: string;
  /** TLS to a TCP target: `true` trusts the system's CAs; or the server's CA and, for mTLS, a client cert and key. */
  tls?: boolean | TlsOptions;
  /** Retries after UNAVAILABLE for the RPCs the contract marks safe; `false` turns them off. */
  retry?: RetryPolicy | false;
}

/** Per-call options: a deadline (all attempts included), an AbortSignal to cancel, and `retry`
 * to override the contract's word on retrying this call. */
export interface Call {
  timeoutMs?: number;
  signal?: AbortSignal;
  retry?: boolean;
}

/** A message to append: `["user", "hello"]`, or a Message init whose role may be a name. */
export type MessageLike = readonly [Name<typeof Role>, string] |
  (Omit<MessageInitShape<typeof MessageSchema>, "role"> & { role?: Role | Name<typeof Role> });

/** The optional fields of a request, for requests made of scalars only. */
type Fields<M, Positional extends keyof M> = Partial<Omit<M, "$typeName" | "$unknown" | Positional>>;
type SearchOptions = Call & Omit<Fields<SearchRequest, "sessionId" | "query">, "match" | "timeRange"> &
  { match?: Match | Name<typeof Match>; timeRange?: TimeRange | Name<typeof TimeRange> };
type RecordErrorOptions = Call & Omit<Fields<RecordErrorRequest, "toolName" | "symptom" | "action">, "outcome"> &
  { outcome?: Outcome | Name<typeof Outcome> };

function toMessage(item: MessageLike): Record<string, unknown> {
  if (Array.isArray(item)) {
    const [role, content] = item as readonly [string, string];
    return { role, content };
  }
  return item as Record<string, unknown>;
}

/** Splits per-call options from request fields given in the same object. */
function split<T extends Call>(options: T): [Call, Omit<T, keyof Call>] {
  const { timeoutMs, signal, retry, ...fields } = options;
  return [{ timeoutMs, signal, retry }, fields];
}

/** Names the session of every unary RPC whose request has a session_id, but ErrorMemoryService's
 * (RecordError's session_id is only where a lesson came from). */
const sessionHeader: Interceptor = (next) => (request) => {
  const sessionId = (request.message as { sessionId?: unknown }).sessionId;
  if (!request.stream && request.service.typeName !== ErrorMemoryService.typeName &&
    request.method.input.fields.some((field) => field.name === "session_id") &&
    typeof sessionId === "string" && /^[\x20-\x7e]+$/.test(sessionId)) {
    request.header.set(SESSION_METADATA, sessionId);
  }
  return next(request);
};

export class MemsvcClient {
  /** The generated MemoryService client, for anything the wrapper does not cover. */
  readonly memory: Client<typeof MemoryService>;
  /** The generated ErrorMemoryService client. */
  readonly errors: Client<typeof ErrorMemoryService>;
  /** The generated ShardService client (server info; session export, import and holds). */
  readonly shards: Client<typeof ShardService>;
  private readonly sessions: Http2SessionManager;

  constructor(target: string, options: ClientOptions = {}) {
    const tls = options.tls === true ? {} : options.tls || undefined;
    const endpoint = parseTarget(target, tls !== undefined);
    this.sessions = sessionManager(endpoint, tls);
    const interceptors: Interceptor[] = [sessionHeader];
    if (options.retry !== false) {
      interceptors.push(retrying(options.retry ?? DEFAULT_RETRY));
    }
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
    this.shards = createClient(ShardService, transport);
  }

  /** Closes the connection; calls after this reconnect. */
  close(): void {
    this.sessions.abort();
  }

  private async call<T>(invoke: (options: CallOptions) => Promise<T>, options: Call): Promise<T> {
    const { timeoutMs, signal, retry } = options;
    try {
      return await invoke({ timeoutMs, signal, contextValues: createContextValues().set(RETRY, retry) });
    } catch (error) {
      throw MemsvcError.from(error);
    }
  }

  // -- MemoryService ---------------------------------------------------------

  async append(sessionId: string, messages: readonly MessageLike[],
    options: Call & { idempotencyKey?: string } = {}): Promise<AppendResponse> {
    const [call, { idempotencyKey }] = split(options);
    const request = named(AppendRequestSchema, { sessionId, messages: messages.map(toMessage), idempotencyKey });
    return this.call((o) => this.memory.append(request, o), call);
  }

  getContext(sessionId: string, options: Call & { requestText?: string } = {}): Promise<GetContextResponse> {
    const [call, { requestText }] = split(options);
    return this.call((o) => this.memory.getContext({ sessionId, requestText }, o), call);
  }

  async search(sessionId: string, query: string, options: SearchOptions = {}): Promise<SearchResponse> {
    const [call, fields] = split(options);
    const request = named(SearchRequestSchema, { ...fields, sessionId, query });
    return this.call((o) => this.memory.search(request, o), call);
  }

  compact(sessionId: string, options: Call = {}): Promise<CompactResponse> {
    return this.call((o) => this.memory.compact({ sessionId }, o), options);
  }

  /** Not retried unless `retry: true`: each attempt may cost an LLM call. */
  summarize(sessionId: string, options: Call = {}): Promise<SummarizeResponse> {
    return this.call((o) => this.memory.summarize({ sessionId }, o), options);
  }

  getSummary(sessionId: string, options: Call = {}): Promise<GetSummaryResponse> {
    return this.call((o) => this.memory.getSummary({ sessionId }, o), options);
  }

  async reset(sessionId: string, mode: ResetMode | Name<typeof ResetMode> = ResetMode.SUMMARY,
    options: Call = {}): Promise<ResetResponse> {
    const request = named(ResetRequestSchema, { sessionId, mode });
    return this.call((o) => this.memory.reset(request, o), options);
  }

  removeSession(sessionId: string, options: Call = {}): Promise<RemoveSessionResponse> {
    return this.call((o) => this.memory.removeSession({ sessionId }, o), options);
  }

  listSessions(options: Call & { pageSize?: number; pageToken?: string } = {}): Promise<ListSessionsResponse> {
    const [call, page] = split(options);
    return this.call((o) => this.memory.listSessions(page, o), call);
  }

  // -- ErrorMemoryService ----------------------------------------------------

  async recordError(toolName: string, symptom: string, action: string,
    options: RecordErrorOptions = {}): Promise<RecordErrorResponse> {
    const [call, fields] = split(options);
    const request = named(RecordErrorRequestSchema,
      { outcome: Outcome.RESOLVED, ...fields, toolName, symptom, action });
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

  // -- ShardService ----------------------------------------------------------

  /** Which server answered: its shard name, version and data directory. With a session id the call
   * is routed like that session's calls, and says whether the server stores or holds it. */
  getServerInfo(sessionId = "", options: Call = {}): Promise<GetServerInfoResponse> {
    return this.call((o) => this.shards.getServerInfo({ sessionId }, o), options);
  }
}
