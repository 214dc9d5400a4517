/**
 * LangChain.js's chat message history (`BaseListChatMessageHistory` of @langchain/core) kept in
 * memsvc, one session per history: `import { MemsvcChatMessageHistory } from "@memsvc/client/langchain"`.
 * Owns how a LangChain message is stored: its role (human -> user, ai -> assistant, system,
 * tool and function -> tool, a generic message by its role), its text as memsvc's content (what
 * search, the window and the summary read; its tool calls when it has no text), and the message as
 * `mapChatMessagesToStoredMessages` writes it, less that text, in payloadJson (`payloads`), from
 * which it is read back: ids, names, tool calls, additional_kwargs. Needs the optional peer
 * dependency @langchain/core; the package's main entry never imports it. Must never reach memsvc but
 * through MemsvcClient.
 */
import { BaseListChatMessageHistory } from "@langchain/core/chat_history";
import {
  type BaseMessage, mapChatMessagesToStoredMessages, mapStoredMessagesToChatMessages, type StoredMessage,
} from "@langchain/core/messages";
import { randomUUID } from "node:crypto";
import type { MemsvcClient } from "./client.js";
import { NotFoundError } from "./errors.js";
import type { Message } from "./gen/memsvc/v1/memory_pb.js";
import { Role } from "./gen/memsvc/v1/memory_pb.js";
import { pack, type Piece, unpack } from "./payloads.js";

/** LangChain message types to memsvc roles. */
const ROLES: Record<string, Role> = {
  human: Role.USER, ai: Role.ASSISTANT, system: Role.SYSTEM, developer: Role.SYSTEM, tool: Role.TOOL,
  function: Role.TOOL,
};
/** A generic message's free-form role to a memsvc role; any other is user. */
const GENERIC_ROLES: Record<string, Role> = {
  user: Role.USER, human: Role.USER, assistant: Role.ASSISTANT, ai: Role.ASSISTANT, system: Role.SYSTEM,
  developer: Role.SYSTEM, tool: Role.TOOL, function: Role.TOOL,
};
/** How a message stored without a payload (by another client) reads back: the stored type of its role. */
const READ_BACK: Partial<Record<Role, string>> = { [Role.ASSISTANT]: "ai", [Role.SYSTEM]: "system" };
/** The largest page the server gives: the fewest round trips. */
const PAGE_SIZE = 1000;

export interface HistoryOptions {
  /** What `clear` deletes: "all" (the default) the rolling summary too, "summary" keeps it. */
  resetMode?: "all" | "summary";
}

/**
 * The messages of one memsvc session, for `RunnableWithMessageHistory` and any LangChain.js code
 * that takes a chat message history. `client` is a MemsvcClient the caller owns (and closes).
 * `addMessages` is one Append with an idempotency key (a retry never stores a message twice);
 * `clear` is a Reset of the session.
 */
export class MemsvcChatMessageHistory extends BaseListChatMessageHistory {
  lc_namespace = ["memsvc", "langchain"];
  private readonly resetMode: "all" | "summary";

  constructor(readonly sessionId: string, private readonly client: MemsvcClient, options: HistoryOptions = {}) {
    super();
    this.resetMode = options.resetMode ?? "all";
  }

  /** Every message of the session, oldest first, as LangChain stored it. */
  async getMessages(): Promise<BaseMessage[]> {
    const messages: BaseMessage[] = [];
    let pageToken = "";
    do {
      let page;
      try {
        page = await this.client.listMessages(this.sessionId, { pageSize: PAGE_SIZE, pageToken });
      } catch (error) {
        if (error instanceof NotFoundError) return [];
        throw error;
      }
      messages.push(...page.messages.map(toLangChain));
      pageToken = page.nextPageToken;
    } while (pageToken);
    return messages;
  }

  async addMessage(message: BaseMessage): Promise<void> {
    await this.addMessages([message]);
  }

  /** Append the messages in one Append: durable when this resolves. */
  async addMessages(messages: BaseMessage[]): Promise<void> {
    if (messages.length > 0) {
      await this.client.append(this.sessionId, messages.map(toMemsvc), { idempotencyKey: randomUUID() });
    }
  }

  async clear(): Promise<void> {
    try {
      await this.client.reset(this.sessionId, this.resetMode);
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error; // never written: nothing to clear
    }
  }
}

/** The memsvc message of a LangChain message: role, its text as content, the rest as payload. */
export function toMemsvc(message: BaseMessage): { role: Role; content: string; payloadJson: string } {
  const [stored] = mapChatMessagesToStoredMessages([message]);
  const role = stored.type === "generic" ? GENERIC_ROLES[String(stored.data.role).toLowerCase()] ?? Role.USER
    : ROLES[stored.type];
  if (role === undefined) {
    throw new TypeError(`memsvc cannot store LangChain messages of type ${JSON.stringify(stored.type)}`);
  }
  const { content, payloadJson } = pack(stored, textOf(stored), callsOf(message) || `[${stored.type} message]`);
  return { role, content, payloadJson };
}

/** The message's text (its string, or its text blocks joined, as `message.text`), with each piece's place. */
function textOf(stored: StoredMessage): Piece[] {
  const content: unknown = stored.data.content;
  if (typeof content === "string") return [[content, ["data", "content"]]];
  const pieces: Piece[] = [];
  (Array.isArray(content) ? content : []).forEach((block: unknown, index) => {
    if (typeof block === "string") {
      pieces.push([block, ["data", "content", index]]);
    } else if (isRecord(block) && block.type === "text" && typeof block.text === "string") {
      pieces.push([block.text, ["data", "content", index, "text"]]);
    }
  });
  return pieces;
}

/** What memsvc reads of a message without text: its tool calls, as `name({"arg": ...})`. */
function callsOf(message: BaseMessage): string {
  const calls = (message as { tool_calls?: { name: string; args: unknown }[] }).tool_calls ?? [];
  return calls.map((call) => `${call.name}(${JSON.stringify(call.args)})`).join("\n");
}

/** The LangChain message stored in `message`; one without a payload becomes a message of its role. */
export function toLangChain(message: Message): BaseMessage {
  const stored = message.payloadJson ? unpack(message.content, message.payloadJson) : undefined;
  if (isRecord(stored) && typeof stored.type === "string" && isRecord(stored.data)) {
    return mapStoredMessagesToChatMessages([stored as unknown as StoredMessage])[0];
  }
  const type = message.role === Role.TOOL ? "tool" : READ_BACK[message.role] ?? "human";
  return mapStoredMessagesToChatMessages([{
    type, data: { content: message.content, role: undefined, name: undefined, tool_call_id: "" },
  }])[0];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
