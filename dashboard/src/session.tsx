/**
 * One session: its activity at a glance (activity.tsx), its window of recent messages, the read-only summary tab,
 * search with its match modes, context runs and why each match was found, and the actions Compact, Summarize,
 * Reset and
 * Remove, each confirmed first.
 */
import { useEffect, useState } from "preact/hooks";
import { Activity, lastRun, TRIGGERS } from "./activity.js";
import { memory } from "./api.js";
import { bytes, plural, time } from "./format.js";
import {
  type GetSummaryResponse, type HitExplanation, Match, type Message, ResetMode, Role, type SearchHit,
  type SearchResponse,
  type SessionInfo, Source, TimeRange,
} from "./gen/memsvc/v1/memory_pb.js";
import { ErrorBanner, Notice, type Question, useCall, useConfirm } from "./ui.js";

type Tab = "window" | "summary" | "search";

export function Session({ id }: { id: string }) {
  const { error, busy, run } = useCall();
  const [confirmation, ask] = useConfirm();
  const [tab, setTab] = useState<Tab>("window");
  const [info, setInfo] = useState<SessionInfo | null>(null);
  const [recent, setRecent] = useState<Message[]>([]);
  const [summary, setSummary] = useState<GetSummaryResponse | null>(null);
  const [notice, setNotice] = useState("");
  const [removed, setRemoved] = useState(false);

  const load = () => run(async () => {
    const [context, stored, listed] = await Promise.all([
      memory.getContext({ sessionId: id }),
      memory.getSummary({ sessionId: id }),
      memory.listSessions({ sessionIdContains: id, pageSize: 1000 }),
    ]);
    setRecent(context.window);
    setSummary(stored);
    setInfo(listed.sessions.find((session) => session.sessionId === id) ?? null);
  });
  useEffect(() => {
    void load();
  }, [id]);

  const act = (question: Omit<Question, "then">, action: () => Promise<string>, removes: boolean) => ask({
    ...question,
    then: () => void run(action).then((said) => {
      if (said !== undefined) {
        setNotice(said);
        if (removes) {
          setRemoved(true);
        } else {
          void load();
        }
      }
    }),
  });

  const actions = [
    {
      label: "Compact", title: `Compact ${id}?`, confirm: "Compact",
      detail: "Older messages leave history.json (the window stays); the archive keeps every one of them.",
      action: async () => {
        const done = await memory.compact({ sessionId: id });
        return `Compacted: ${plural(done.removed, "message")} moved out of history.json.`;
      },
    },
    {
      label: "Summarize", title: `Summarize ${id} now?`, confirm: "Summarize",
      detail: "The summary model folds the messages after the cursor into the rolling summary (LLM calls).",
      action: async () => {
        const done = await memory.summarize({ sessionId: id });
        return `Summarized ${plural(done.count, "message")}.`;
      },
    },
    {
      label: "Reset (keep summary)", title: `Reset ${id}, keeping its summary?`, confirm: "Reset",
      detail: "Deletes every message from history.json, the vectors and the archive. The rolling summary stays.",
      action: async () => {
        const done = await memory.reset({ sessionId: id, mode: ResetMode.SUMMARY });
        return `Reset: ${plural(done.deleted?.historyMessages ?? 0, "message")} deleted; the summary is kept.`;
      },
    },
    {
      label: "Reset all", title: `Reset ${id} entirely?`, confirm: "Reset all",
      detail: "Deletes every message from every store, and the rolling summary too.",
      action: async () => {
        const done = await memory.reset({ sessionId: id, mode: ResetMode.ALL });
        return `Reset: ${plural(done.deleted?.historyMessages ?? 0, "message")} and the summary deleted.`;
      },
    },
    {
      label: "Remove session", title: `Remove ${id}?`, confirm: "Remove", removes: true,
      detail: "Deletes the session's directory and its rows in every store. This cannot be undone.",
      action: async () => {
        const done = await memory.removeSession({ sessionId: id });
        return `Removed ${id}: ${plural(done.deleted?.historyMessages ?? 0, "message")} deleted.`;
      },
    },
  ];

  if (removed) {
    return (
      <section>
        <h1>{id}</h1>
        <Notice text={notice} />
        <p><a href="#/sessions">← Back to the sessions</a></p>
      </section>
    );
  }
  return (
    <section>
      <p class="crumbs"><a href="#/sessions">Sessions</a> /</p>
      <div class="toolbar">
        <h1>{id}</h1>
        {info ? (
          <span class="facts">
            {plural(info.messageCount, "message")} · {bytes(info.historyBytes)} · last append {time(info.lastAppendUnixNano)}
          </span>
        ) : null}
      </div>
      <div class="actions" role="group" aria-label="session actions">
        {actions.map(({ label, action, removes, ...question }) => (
          <button type="button" class={removes || label === "Reset all" ? "danger" : ""}
            disabled={busy} onClick={() => act(question, action, removes ?? false)}>{label}</button>
        ))}
      </div>
      <Notice text={notice} />
      <ErrorBanner error={error} />
      {info ? <Activity id={id} tiers={{ window: recent.length, recent: info.messageCount }}
        cursor={summary?.cursorUnixNano ?? 0n} run={summary?.lastRun} /> : null}
      <div class="tabs" role="tablist">
        {(["window", "summary", "search"] as const).map((name) => (
          <button type="button" role="tab" aria-selected={tab === name} onClick={() => setTab(name)}>
            {{ window: `Window (${recent.length})`, summary: "Summary", search: "Search" }[name]}
          </button>
        ))}
      </div>
      <div role="tabpanel">
        {tab === "window" ? <Messages messages={recent} empty="No messages in history.json." /> : null}
        {tab === "summary" ? <SummaryTab stored={summary} /> : null}
        {tab === "search" ? <Search id={id} /> : null}
      </div>
      {confirmation}
    </section>
  );
}

function MessageItem({ message, hit }: { message: Message; hit?: SearchHit }) {
  const role = message.role === Role.USER ? "user" : message.role === Role.ASSISTANT ? "assistant" : "unknown";
  return (
    <li class={`message ${role}${hit?.isContext ? " context" : ""}`}>
      <div class="meta">
        <span class="role">{role}</span>
        {message.sender ? <span>{message.sender}</span> : null}
        <span>#{String(message.id)}</span>
        <time>{time(message.sendAtUnixNano)}</time>
        {hit && !hit.isContext ? (
          <span class="score">{hit.source === Source.ARCHIVE ? "archive" : "recent"} · score {hit.score.toFixed(3)}</span>
        ) : null}
        {hit?.isContext ? <span class="score">context</span> : null}
      </div>
      <p class="content">{message.content}</p>
      {hit?.explanation ? <Why why={hit.explanation} /> : null}
    </li>
  );
}

const TIERS: Partial<Record<Source, string>> = {
  [Source.WINDOW]: "the window", [Source.RECENT]: "recent history", [Source.ARCHIVE]: "the archive",
};

/** Why a match was found: its rank and score in each list the search drew on, the fused and rerank scores,
 * and the tier holding it. */
function Why({ why }: { why: HitExplanation }) {
  const part = (name: string, rank: number, label: string, score: number) =>
    rank ? `${name} #${rank} (${label} ${score.toFixed(3)})` : `not in the ${name} list`;
  const parts = [`in ${TIERS[why.tier] ?? "?"}`];
  if (why.keywordRank || why.fusedScore) parts.push(part("keyword", why.keywordRank, "BM25", why.keywordScore));
  if (why.semanticRank || why.fusedScore) {
    parts.push(part("semantic", why.semanticRank, "similarity", why.semanticSimilarity));
  }
  if (why.fusedScore) parts.push(`fused ${why.fusedScore.toFixed(4)}`);
  if (why.reranked) parts.push(`reranked ${why.rerankScore.toFixed(3)}`);
  return <p class="why">{parts.join(" · ")}</p>;
}

function Messages({ messages, empty }: { messages: Message[]; empty: string }) {
  if (messages.length === 0) {
    return <p class="empty">{empty}</p>;
  }
  return <ol class="messages">{messages.map((message) => <MessageItem message={message} />)}</ol>;
}

/** The cursor and the last run: what started it and how long it took, besides how it ended. */
function SummaryFacts({ stored }: { stored: GetSummaryResponse }) {
  const run = stored.lastRun;
  const took = run ? Number(run.finishedAtUnixNano - run.startedAtUnixNano) / 1e9 : 0;
  return (
    <p class="facts summary-run">
      {stored.cursorUnixNano ? `Summarized up to ${time(stored.cursorUnixNano)} (cursor)` : "No cursor yet"}
      {run ? ` · ${lastRun(run)} (started by ${TRIGGERS[run.trigger] ?? "?"}, took ${took.toFixed(1)} s)` : ""}
    </p>
  );
}

function SummaryTab({ stored }: { stored: GetSummaryResponse | null }) {
  const summary = stored?.summary;
  if (!stored || !summary) {
    return (
      <div class="summary">
        {stored?.lastRun ? <SummaryFacts stored={stored} /> : null}
        <p class="empty">No rolling summary yet: Summarize builds one (or the summary job, when a summary model is set).</p>
      </div>
    );
  }
  const current = summary.currentDiscussion;
  return (
    <div class="summary">
      <SummaryFacts stored={stored} />
      <h2>Key decisions</h2>
      {summary.keyDecisions.length ? (
        <ul class="decisions">{summary.keyDecisions.map((rule) => <li>{rule}</li>)}</ul>
      ) : <p class="empty">None.</p>}
      <h2>Current discussion</h2>
      {current ? (
        <dl class="discussion">
          <dt>Topic</dt><dd>{current.topic}</dd>
          <dt>Description</dt><dd>{current.description}</dd>
          <dt>Perspectives</dt><dd>{current.perspectives}</dd>
          <dt>Direction</dt><dd>{current.direction}</dd>
        </dl>
      ) : <p class="empty">None.</p>}
      <h2>Past discussions</h2>
      {summary.pastDiscussions.length ? (
        <table>
          <thead><tr><th>Topic</th><th>Description</th><th>Direction</th><th>Last discussed</th></tr></thead>
          <tbody>
            {summary.pastDiscussions.map((past) => (
              <tr><td>{past.topic}</td><td>{past.description}</td><td>{past.direction}</td><td>{past.lastDiscussed}</td></tr>
            ))}
          </tbody>
        </table>
      ) : <p class="empty">None.</p>}
    </div>
  );
}

const MATCHES = [
  { value: Match.KEYWORD, label: "Keyword" },
  { value: Match.SEMANTIC, label: "Semantic" },
  { value: Match.HYBRID, label: "Hybrid" },
];
const RANGES = [
  { value: TimeRange.ALL, label: "All time" },
  { value: TimeRange.DAY, label: "Last day" },
  { value: TimeRange.WEEK, label: "Last week" },
  { value: TimeRange.MONTH, label: "Last 30 days" },
  { value: TimeRange.YEAR, label: "Last year" },
];

/** Hits in reply order, grouped into their context runs; a hit outside any run (run 0) stands alone. */
function runs(hits: SearchHit[]): SearchHit[][] {
  const grouped: SearchHit[][] = [];
  for (const hit of hits) {
    const last = grouped[grouped.length - 1];
    if (last && hit.run !== 0 && last[0].run === hit.run) {
      last.push(hit);
    } else {
      grouped.push([hit]);
    }
  }
  return grouped;
}

function Search({ id }: { id: string }) {
  const { error, busy, run } = useCall();
  const [query, setQuery] = useState("");
  const [match, setMatch] = useState(Match.KEYWORD);
  const [range, setRange] = useState(TimeRange.ALL);
  const [includeWindow, setIncludeWindow] = useState(true);
  const [results, setResults] = useState<SearchResponse | null>(null);

  const search = (event: Event) => {
    event.preventDefault();
    void run(() => memory.search({ sessionId: id, query, match, timeRange: range, includeWindow, explain: true }))
      .then((found) => setResults(found ?? null));
  };

  return (
    <div class="search">
      <form onSubmit={search} role="search">
        <input type="search" aria-label="Search this session" placeholder="words, a phrase in quotes, a question…"
          value={query} onInput={(event) => setQuery(event.currentTarget.value)} />
        <label>
          Match
          <select value={match} onChange={(event) => setMatch(Number(event.currentTarget.value))}>
            {MATCHES.map((mode) => <option value={mode.value}>{mode.label}</option>)}
          </select>
        </label>
        <label>
          Time
          <select value={range} onChange={(event) => setRange(Number(event.currentTarget.value))}>
            {RANGES.map((option) => <option value={option.value}>{option.label}</option>)}
          </select>
        </label>
        <label class="check">
          <input type="checkbox" checked={includeWindow}
            onChange={(event) => setIncludeWindow(event.currentTarget.checked)} />
          include the window
        </label>
        <button type="submit" disabled={busy}>Search</button>
      </form>
      <ErrorBanner error={error} />
      {results ? (
        <div class="results">
          <p class="facts">
            {plural(results.hits.filter((hit) => !hit.isContext).length, "hit")}
            {results.unsearched ? ` · ${plural(results.unsearched, "message")} not yet searchable (embedding pending)` : ""}
          </p>
          {runs(results.hits).map((group) => (
            <ol class="messages run">{group.map((hit) => hit.message ? <MessageItem message={hit.message} hit={hit} /> : null)}</ol>
          ))}
          {results.hits.length === 0 ? <p class="empty">Nothing found.</p> : null}
        </div>
      ) : null}
    </div>
  );
}
