/**
 * The Node side of the cross-language conformance scenario
 * (clients/conformance/scenario.json): runs each step through MemsvcClient
 * and prints one proto3-JSON result per step. Usage:
 *   node dist/conformance/run.js SCENARIO TARGET SESSION
 * Must never interpret results: tests/e2e/test_conformance.py compares them.
 */
import { readFileSync } from "node:fs";
import { type DescMessage, fromJson, type JsonValue, type MessageShape, toJson } from "@bufbuild/protobuf";
import {
  AppendRequestSchema, AppendResponseSchema, CompactRequestSchema, CompactResponseSchema, DeleteMessagesRequestSchema,
  DeleteMessagesResponseSchema, FitContextRequestSchema, FitContextResponseSchema, GetContextRequestSchema,
  GetContextResponseSchema, GetServerInfoRequestSchema, GetServerInfoResponseSchema, GetSummaryRequestSchema,
  GetSummaryResponseSchema, ListMessagesRequestSchema, ListMessagesResponseSchema, MemsvcClient, MemsvcError,
  RemoveSessionRequestSchema, RemoveSessionResponseSchema, ReplaceMessagesRequestSchema,
  ReplaceMessagesResponseSchema, ResetRequestSchema, ResetResponseSchema,
  SearchRequestSchema, SearchResponseSchema, SummarizeRequestSchema, SummarizeResponseSchema,
} from "../src/index.js";

interface Step {
  name: string;
  rpc: string;
  request: JsonValue;
}

type Runner = (client: MemsvcClient, request: JsonValue) => Promise<JsonValue>;

function rpc<Req extends DescMessage, Res extends DescMessage>(requestSchema: Req, responseSchema: Res,
  call: (client: MemsvcClient, request: MessageShape<Req>) => Promise<MessageShape<Res>>): Runner {
  return async (client, json) => toJson(responseSchema, await call(client, fromJson(requestSchema, json)));
}

const RUNNERS: Record<string, Runner> = {
  Append: rpc(AppendRequestSchema, AppendResponseSchema,
    (client, r) => client.append(r.sessionId, r.messages, { idempotencyKey: r.idempotencyKey })),
  GetContext: rpc(GetContextRequestSchema, GetContextResponseSchema,
    (client, r) => client.getContext(r.sessionId, { requestText: r.requestText })),
  Search: rpc(SearchRequestSchema, SearchResponseSchema, (client, r) => {
    const { sessionId, query, $typeName: _, ...options } = r;
    return client.search(sessionId, query, options);
  }),
  Compact: rpc(CompactRequestSchema, CompactResponseSchema, (client, r) => client.compact(r.sessionId)),
  Summarize: rpc(SummarizeRequestSchema, SummarizeResponseSchema, (client, r) => client.summarize(r.sessionId)),
  GetSummary: rpc(GetSummaryRequestSchema, GetSummaryResponseSchema, (client, r) => client.getSummary(r.sessionId)),
  Reset: rpc(ResetRequestSchema, ResetResponseSchema, (client, r) => client.reset(r.sessionId, r.mode)),
  RemoveSession: rpc(RemoveSessionRequestSchema, RemoveSessionResponseSchema,
    (client, r) => client.removeSession(r.sessionId)),
  GetServerInfo: rpc(GetServerInfoRequestSchema, GetServerInfoResponseSchema,
    (client, r) => client.getServerInfo(r.sessionId)),
  ListMessages: rpc(ListMessagesRequestSchema, ListMessagesResponseSchema, (client, r) => client.listMessages(
    r.sessionId, { pageSize: r.pageSize, pageToken: r.pageToken, newestFirst: r.newestFirst })),
  DeleteMessages: rpc(DeleteMessagesRequestSchema, DeleteMessagesResponseSchema,
    (client, r) => client.deleteMessages(r.sessionId, { ids: r.ids, last: r.last })),
  ReplaceMessages: rpc(ReplaceMessagesRequestSchema, ReplaceMessagesResponseSchema,
    (client, r) => client.replaceMessages(r.sessionId, r.messages,
      { idempotencyKey: r.idempotencyKey, expectedLastId: r.expectedLastId })),
  FitContext: rpc(FitContextRequestSchema, FitContextResponseSchema, (client, r) => {
    const { sessionId, vendor, model, messages, $typeName: _, ...options } = r;
    return client.fitContext(sessionId, vendor, model, messages, options);
  }),
};

async function main(): Promise<void> {
  const [scenarioPath, target, session] = process.argv.slice(2);
  if (!session) {
    throw new Error("usage: run.js SCENARIO TARGET SESSION");
  }
  const scenario = JSON.parse(readFileSync(scenarioPath, "utf8").replaceAll("{session}", session)) as
    { steps: Step[] };
  const client = new MemsvcClient(target);
  const results: JsonValue[] = [];
  try {
    for (const step of scenario.steps) {
      const runner = RUNNERS[step.rpc];
      if (runner === undefined) {
        throw new Error(`no runner for ${step.rpc}`);
      }
      try {
        results.push({ name: step.name, response: await runner(client, step.request) });
      } catch (error) {
        if (!(error instanceof MemsvcError)) {
          throw error;
        }
        results.push({ name: step.name, error: { code: error.codeName, reason: error.reason } });
      }
    }
  } finally {
    client.close();
  }
  process.stdout.write(`${JSON.stringify({ results })}\n`);
}

await main();
