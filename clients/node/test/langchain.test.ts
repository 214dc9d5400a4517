import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { InMemoryChatMessageHistory } from "@langchain/core/chat_history";
import {
  AIMessage, type BaseMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage,
} from "@langchain/core/messages";
import type { ChatPromptValueInterface } from "@langchain/core/prompt_values";
import { ChatPromptTemplate, MessagesPlaceholder } from "@langchain/core/prompts";
import { RunnableLambda, RunnableWithMessageHistory } from "@langchain/core/runnables";
import { FakeListChatModel } from "@langchain/core/utils/testing";
import { MemsvcClient, Role } from "../src/index.js";
import { MemsvcChatMessageHistory } from "../src/langchain.js";
import { ROOT, type Server, startServer } from "./server.js";

/** Session ids as framework users write them. */
const SESSION_IDS = ["9b2f6c1e-4d3a-4f8e-a1b2-c3d4e5f60718", "user:42", "conv/1", "ada.lovelace@example.com"];

const TURNS: [string, string][] = [["What does billing run on?", "Billing runs on Postgres 16."],
  ["And where is it deployed?", "In eu-west-1, on Tuesdays."]];

/** A prompt with the history placeholder, a step recording what the model is sent, a fake model. */
function conversation(history: (sessionId: string) => MemsvcChatMessageHistory | InMemoryChatMessageHistory,
  prompts: BaseMessage[][]): RunnableWithMessageHistory<Record<string, string>, BaseMessage> {
  const prompt = ChatPromptTemplate.fromMessages([["system", "You answer questions about our services."],
    new MessagesPlaceholder("history"), ["human", "{question}"]]);
  const record = RunnableLambda.from(async (value: ChatPromptValueInterface) => {
    prompts.push(value.toChatMessages());
    return value;
  });
  const model = new FakeListChatModel({ responses: TURNS.map(([, answer]) => answer) });
  return new RunnableWithMessageHistory({
    runnable: prompt.pipe(record).pipe(model), getMessageHistory: history, inputMessagesKey: "question",
    historyMessagesKey: "history",
  });
}

describe("MemsvcChatMessageHistory under LangChain.js against a real memsvc server", () => {
  let server: Server;
  let client: MemsvcClient;

  before(async () => {
    server = await startServer();
    client = new MemsvcClient(server.tcp);
  });

  after(async () => {
    client?.close();
    await server?.stop();
  });

  it("keeps RunnableWithMessageHistory's conversation as InMemoryChatMessageHistory does", async () => {
    const oracle = new InMemoryChatMessageHistory();
    const memsvcPrompts: BaseMessage[][] = [];
    const oraclePrompts: BaseMessage[][] = [];
    const kept = conversation((sessionId) => new MemsvcChatMessageHistory(sessionId, client), memsvcPrompts);
    const beside = conversation(() => oracle, oraclePrompts);
    for (const [question, answer] of TURNS) {
      for (const runnable of [kept, beside]) {
        const reply = await runnable.invoke({ question }, { configurable: { sessionId: "lcjs" } });
        assert.equal(reply.content, answer);
      }
    }
    assert.deepEqual(memsvcPrompts[1].map((m) => [m.type, m.text]), oraclePrompts[1].map((m) => [m.type, m.text]));
    assert.deepEqual(memsvcPrompts[1].slice(1, 3).map((m) => m.text), TURNS[0], "the second turn saw the first");
    const unix = new MemsvcClient(server.unix); // a new client, over the other transport
    try {
      const readBack = await new MemsvcChatMessageHistory("lcjs", unix).getMessages();
      assert.deepEqual(readBack.map((m) => [m.type, m.text]), (await oracle.getMessages()).map((m) => [m.type, m.text]));
      const hits = await unix.search("lcjs", "Postgres", { match: "keyword" });
      assert.deepEqual(hits.hits.map((hit) => hit.message?.content), ["Billing runs on Postgres 16."]);
    } finally {
      unix.close();
    }
  });

  it("round-trips ids, names, tool calls and additional kwargs, each text stored once", async () => {
    const call = { name: "get_weather", args: { city: "Zürich" }, id: "call_1", type: "tool_call" as const };
    const stored: BaseMessage[] = [
      new SystemMessage({ content: "Answer briefly.", id: "sys-1" }),
      new HumanMessage({ content: [{ type: "text", text: "What is on this picture?" },
        { type: "image_url", image_url: { url: "https://example.invalid/cat.png" } }], name: "ada",
      additional_kwargs: { channel: "web" } }),
      new AIMessage({ content: "", tool_calls: [call], id: "run-7", name: "planner" }),
      new ToolMessage({ content: "sunny, 21°", tool_call_id: "call_1", name: "get_weather" }),
      new ChatMessage({ content: "Looks fine to me.", role: "critic" }),
      new AIMessage({ content: "\u200b", id: "run-8" }),
      new HumanMessage({ content: "a lone \ud800 surrogate" }),
    ];
    const history = new MemsvcChatMessageHistory("lcjs-kinds", client);
    await history.addMessages(stored.slice(0, 3));
    for (const message of stored.slice(3)) await history.addMessage(message);
    const readBack = await history.getMessages();
    assert.deepEqual(readBack.map((m) => [m.type, m.text, m.id, m.name]), stored.map((m) => [m.type, m.text, m.id, m.name]));
    assert.deepEqual((readBack[2] as AIMessage).tool_calls, [call]);
    assert.deepEqual(readBack[1].additional_kwargs, { channel: "web" });
    assert.deepEqual(readBack[1].content, stored[1].content);
    assert.equal((readBack[3] as ToolMessage).tool_call_id, "call_1");
    const listed = (await client.listMessages("lcjs-kinds")).messages;
    assert.deepEqual(listed.map((m) => [m.role, m.content]), [
      [Role.SYSTEM, "Answer briefly."], [Role.USER, "What is on this picture?"],
      [Role.ASSISTANT, 'get_weather({"city":"Zürich"})'], [Role.TOOL, "sunny, 21°"], [Role.USER, "Looks fine to me."],
      [Role.ASSISTANT, "[ai message]"], [Role.USER, "a lone \ufffd surrogate"]]);
    assert.ok(listed.every((m) => !m.payloadJson.includes(m.content)), "the text travels in content only");
    await history.clear();
    assert.deepEqual(await history.getMessages(), []);
    await new MemsvcChatMessageHistory("lcjs-never", client).clear();
    assert.deepEqual(await new MemsvcChatMessageHistory("lcjs-never", client).getMessages(), []);
  });

  for (const sessionId of SESSION_IDS) {
    it(`takes the session id ${JSON.stringify(sessionId)} as written`, async () => {
      const kept = conversation((given) => new MemsvcChatMessageHistory(given, client), []);
      await kept.invoke({ question: TURNS[0][0] }, { configurable: { sessionId } });
      const read = await new MemsvcChatMessageHistory(sessionId, client).getMessages();
      assert.deepEqual(read.map((m) => m.text), TURNS[0]);
    });
  }

  it("runs the README's LangChain.js example as written", () => {
    const readme = readFileSync(join(ROOT, "clients", "node", "README.md"), "utf8");
    const code = /```js\n(.*?)```/s.exec(readme.split("\n## LangChain.js\n")[1])![1];
    // Inside the package, so that "@memsvc/client" resolves to it by its own name.
    const example = join(ROOT, "clients", "node", "dist", "test", "readme-langchain.mjs");
    writeFileSync(example, code.replace("127.0.0.1:50051", server.tcp));
    const run = spawnSync(process.execPath, [example], { encoding: "utf8", timeout: 60_000 });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.stdout.trim(),
      '["What does billing run on?","On Postgres 16.","Where is it deployed?","In eu-west-1."]');
  });

  it("reads messages other clients stored without a payload as messages of their role", async () => {
    await client.append("lcjs-plain", [["system", "be brief"], ["user", "hi"], ["assistant", "hello"], ["tool", "42"]]);
    const read = await new MemsvcChatMessageHistory("lcjs-plain", client).getMessages();
    assert.deepEqual(read.map((m) => [m.type, m.text]), [["system", "be brief"], ["human", "hi"], ["ai", "hello"],
      ["tool", "42"]]);
  });
});

describe("the package without @langchain/core", () => {
  it("imports its main entry, and its langchain entry says what is missing", () => {
    // A resolve hook refusing @langchain/*, as if the optional peer dependency were not installed.
    const hook = "data:text/javascript,export async function resolve(specifier, context, next) {" +
      "if (specifier.startsWith('@langchain/')) throw new Error(`Cannot find package '${specifier}'`);" +
      "return next(specifier, context); }";
    const script = "import { register } from 'node:module';" +
      `register(${JSON.stringify(hook)});` +
      "const main = await import('./dist/src/index.js'); console.log(typeof main.MemsvcClient);" +
      "await import('./dist/src/langchain.js').catch((error) => console.log(error.message));";
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", script],
      { cwd: join(ROOT, "clients", "node"), encoding: "utf8" });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(run.stdout.trim().split("\n"), ["function", "Cannot find package '@langchain/core/chat_history'"]);
  });
});
