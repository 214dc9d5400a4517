/**
 * MemsvcClient: a thin, typed client over the generated Connect stubs, one
 * method per RPC. Owns the connection (TCP or unix socket), the default
 * deadline, the bearer token, the `memsvc-tenant` header of an admin acting for a
 * tenant, the `memsvc-session` header of per-session RPCs,
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
import { type FitContextRequest, type FitContextResponse, FitService } from "./gen/memsvc/v1/fit_pb.js";
import {
  AppendRequestSchema,
  type AppendResponse,
  type CompactResponse,
  type DeleteMessagesResponse,
  type GetContextResponse,
  type GetSummaryResponse,
  type ListMessagesResponse,
  type ListSessionsResponse,
  MemoryService,
  type MessageSchema,
  type RemoveSessionResponse,
  ReplaceMessagesRequestSchema,
  type ReplaceMessagesResponse,
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

/** The request header naming the tenant an admin of every tenant acts for. */
export const TENANT_METADATA = "memsvc-tenant";

/** The request header naming the session a per-session RPC acts on: a proxy in front of shards routes by it. */
export const SESSION_METADATA = "memsvc-session";

export const DEFAULT_TIMEOUT_MS = 10_000;

/** fitContext's default deadline (or the client's, when longer): its stages may wait for the summary model. */
export const FIT_TIMEOUT_MS = 300_000;

export interface ClientOptions {
  /** Deadline of every call that sets none itself; default 10 s. */
  timeoutMs?: number;
  /** Bearer token, for a server started with token_file or tenants_file. */
  token?: string;
  /** The tenant an admin of every tenant (a tenants file's tenant "*") acts for, sent as `memsvc-tenant` on every
   * call, streams included; any other token may name only its own tenant. */
  tenant?: string;
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
/** fitContext's options: `overflow` after a context-length error, `previousModel` once after a switch of
 * models, `contextWindow` to override the model table, `reservedTokens` taken off the budget. */
export type FitOptions = Call & Fields<FitContextRequest, "sessionId" | "vendor" | "model" | "messages">;

/** A run's message for fitContext: an OpenAI chat-completions message, or its JSON text (kept byte for byte). */
export type ChatMessage = string | Readonly<Record<string, unknown>>;

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

/**
 * The id as `SESSION_METADATA` carries it: its UTF-8 bytes, A-Z a-z 0-9 - . _ ~ as they are and every
 * other byte as %XX (upper-case hex), as the Python and Go clients write it; ids made only of the first
 * kind travel unchanged. (encodeURIComponent leaves ! ' ( ) * as they are: those are escaped too.)
 */
export function sessionHeader(sessionId: string): string {
  return encodeURIComponent(sessionId).replace(/[!'()*]/g,
    (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** The services whose session_id names the session a call acts on (RecordError's is only provenance). */
const PER_SESSION = new Set([MemoryService.typeName, FitService.typeName, ShardService.typeName]);

/** Names the session of every per-session unary RPC whose request has a session_id. */
const routeBySession: Interceptor = (next) => (request) => {
  const sessionId = (request.message as { sessionId?: unknown }).sessionId;
  if (!request.stream && PER_SESSION.has(request.service.typeName) &&
    request.method.input.fields.some((field) => field.name === "session_id") &&
    typeof sessionId === "string" && sessionId !== "") {
    request.header.set(SESSION_METADATA, sessionHeader(sessionId));
  }
  return next(request);
};

export class MemsvcClient {
  /** The generated MemoryService client, for anything the wrapper does not cover. */
  readonly memory: Client<typeof MemoryService>;
  /** The generated ErrorMemoryService client. */
  readonly errors: Client<typeof ErrorMemoryService>;
  /** The generated FitService client. */
  readonly fit: Client<typeof FitService>;
  /** The generated ShardService client (server info; session export, import and holds). */
  readonly shards: Client<typeof ShardService>;
  private readonly sessions: Http2SessionManager;
  private readonly timeoutMs: number;

  constructor(target: string, options: ClientOptions = {}) {
    const tls = options.tls === true ? {} : options.tls || undefined;
    const endpoint = parseTarget(target, tls !== undefined);
    this.sessions = sessionManager(endpoint, tls);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const interceptors: Interceptor[] = [routeBySession];
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
    if (options.tenant) {
      const tenant = options.tenant;
      interceptors.push((next) => (request) => {
        request.header.set(TENANT_METADATA, tenant);
        return next(request);
      });
    }
    const transport = createGrpcTransport({
      baseUrl: endpoint.baseUrl,
      sessionManager: this.sessions,
      defaultTimeoutMs: this.timeoutMs,
      interceptors,
    });
    this.memory = createClient(MemoryService, transport);
    this.errors = createClient(ErrorMemoryService, transport);
    this.fit = createClient(FitService, transport);
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

  /** The window and the turn context. A window too large for one reply (the server's max_reply_bytes) comes
   * without its oldest messages: `omittedMessages` counts them, and listMessages with `newestFirst` and
   * `pageToken: olderPageToken` reads them. `omitPayloads` leaves every payloadJson out. */
  getContext(sessionId: string, options: Call & { requestText?: string; omitPayloads?: boolean } = {}):
    Promise<GetContextResponse> {
    const [call, { requestText, omitPayloads }] = split(options);
    return this.call((o) => this.memory.getContext({ sessionId, requestText, omitPayloads }, o), call);
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

  /** One page of every message the session stores (archive and history.json), with payloads unless
   * `omitPayloads`; `newestFirst` pages from the newest back (each page still oldest first). A page also ends
   * before the server's max_reply_bytes: follow nextPageToken. */
  listMessages(sessionId: string,
    options: Call & { pageSize?: number; pageToken?: string; newestFirst?: boolean; omitPayloads?: boolean } = {}):
    Promise<ListMessagesResponse> {
    const [call, page] = split(options);
    return this.call((o) => this.memory.listMessages({ ...page, sessionId }, o), call);
  }

  /** Deletes the messages with these ids, or the newest `last`, from every store; returns them.
   * Retried only with ids (a retry then deletes nothing more), unless `retry` says otherwise. */
  deleteMessages(sessionId: string, target: { ids?: readonly bigint[]; last?: number },
    options: Call = {}): Promise<DeleteMessagesResponse> {
    const ids = [...(target.ids ?? [])];
    return this.call((o) => this.memory.deleteMessages({ sessionId, ids, last: target.last ?? 0 }, o), options);
  }

  /** Replaces the session's whole history with `messages` in one step (the rolling summary is deleted);
   * with `expectedLastId` (0n: none), only while that is still its newest message, else FAILED_PRECONDITION
   * HISTORY_CHANGED. Retried only with an `idempotencyKey`, unless `retry` says otherwise. */
  replaceMessages(sessionId: string, messages: readonly MessageLike[],
    options: Call & { idempotencyKey?: string; expectedLastId?: bigint } = {}): Promise<ReplaceMessagesResponse> {
    const [call, { idempotencyKey, expectedLastId }] = split(options);
    const request = named(ReplaceMessagesRequestSchema, { sessionId, messages: messages.map(toMessage),
      idempotencyKey, expectedLastId });
    return this.call((o) => this.memory.replaceMessages(request, o), call);
  }

  // -- FitService ------------------------------------------------------------

  /**
   * A run's messages fitted to `model`'s window, before calling it: each returned message is JSON
   * text (`JSON.parse` it), byte for byte as sent when no stage changed it. The default deadline is
   * FIT_TIMEOUT_MS (5 min), or the client's when longer. Retried after UNAVAILABLE (the contract
   * marks it IDEMPOTENT) unless `retry: false`.
   */
  fitContext(sessionId: string, vendor: string, model: string, messages: readonly ChatMessage[],
    options: FitOptions = {}): Promise<FitContextResponse> {
    const [call, fields] = split(options);
    const request = {
      ...fields, sessionId, vendor, model,
      messages: messages.map((message) => (typeof message === "string" ? message : JSON.stringify(message))),
    };
    const timeoutMs = call.timeoutMs ?? Math.max(this.timeoutMs, FIT_TIMEOUT_MS);
    return this.call((o) => this.fit.fitContext(request, o), { ...call, timeoutMs });
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
