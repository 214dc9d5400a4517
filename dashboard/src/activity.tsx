/**
 * A session at a glance, above its tabs: its messages over time (every stored message, archive
 * included, read page by page with ListMessages), how many sit in each tier (the window GetContext
 * returns, the recent messages of history.json, those compacted out to the archive alone), and
 * where the rolling summary's cursor stands: when it was last moved, how the summarizer's last run
 * went and how many messages wait after it.
 */
import { useEffect, useState } from "preact/hooks";
import { memory } from "./api.js";
import { Chart, COLORS } from "./chart.js";
import { plural, time } from "./format.js";
import { type SummaryRun, SummaryOutcome, SummaryTrigger } from "./gen/memsvc/v1/memory_pb.js";

/** Pages of ListMessages read at most for the chart (a page holds up to 1000). */
const MAX_PAGES = 50;

export interface Tiers {
  window: number;
  recent: number;
}

export const TRIGGERS: Partial<Record<SummaryTrigger, string>> = {
  [SummaryTrigger.JOB]: "the summary job", [SummaryTrigger.SUMMARIZE]: "Summarize",
  [SummaryTrigger.FIT_CONTEXT]: "FitContext",
};

/** "last run <time>: summarized N messages", "...: nothing new" or "...: failed: <reason>: <message>". */
export function lastRun(run: SummaryRun): string {
  const outcome = run.outcome === SummaryOutcome.SUMMARIZED ? `summarized ${plural(run.messages, "message")}`
    : run.outcome === SummaryOutcome.NOTHING_NEW ? "nothing new"
      : `failed: ${run.reason}: ${run.message}`;
  return `last run ${time(run.finishedAtUnixNano)}: ${outcome}`;
}

export function Activity({ id, tiers, cursor, run }: { id: string; tiers: Tiers; cursor: bigint; run?: SummaryRun }) {
  const [sent, setSent] = useState<number[] | null>(null);
  const [partial, setPartial] = useState(false);
  useEffect(() => {
    let cancelled = false;
    void (async () => {
      const times: number[] = [];
      let token = "";
      let pages = 0;
      do {
        const page = await memory.listMessages({ sessionId: id, pageSize: 1000, pageToken: token, omitPayloads: true });
        times.push(...page.messages.map((message) => Number(message.sendAtUnixNano / 1_000_000n) / 1000));
        token = page.nextPageToken;
        pages += 1;
      } while (token && pages < MAX_PAGES);
      if (!cancelled) {
        setSent(times.sort((a, b) => a - b));
        setPartial(token !== "");
      }
    })().catch(() => setSent([]));  // the tabs below show the session's own errors
    return () => {
      cancelled = true;
    };
  }, [id, tiers.recent]);

  const total = sent?.length ?? 0;
  const archived = Math.max(0, total - tiers.recent);
  const cursorSeconds = Number(cursor / 1_000_000n) / 1000;
  const waiting = cursor === 0n ? total : (sent ?? []).filter((at) => at > cursorSeconds).length;
  const tierRows = [
    { label: "window", count: tiers.window, color: COLORS[0], detail: "what GetContext returns" },
    { label: "recent", count: tiers.recent, color: COLORS[1], detail: "history.json" },
    { label: "archive only", count: archived, color: COLORS[2], detail: "compacted out, in the archive" },
  ];
  const widest = Math.max(1, ...tierRows.map((row) => row.count));
  return (
    <div class="activity">
      <Chart title="Messages over time" unit={partial ? `first ${total} stored` : "stored, cumulative"} stepped
        format={(value) => value.toFixed(0)}
        times={sent ?? []} lines={[{ label: "messages", values: (sent ?? []).map((_, n) => n + 1), color: COLORS[0] }]} />
      <figure class="chart tiers" data-title="Tiers">
        <figcaption>Messages per tier</figcaption>
        <table class="bars">
          <tbody>
            {tierRows.map((row) => (
              <tr data-tier={row.label}>
                <th>{row.label}</th>
                <td class="bar"><span style={{ width: `${(100 * row.count) / widest}%`, background: row.color }} /></td>
                <td class="count">{row.count}</td>
                <td class="detail">{row.detail}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <p class="facts summary-cursor">
          {cursor === 0n && !run ? "Summary: not run yet" : `Summary cursor: ${cursor === 0n ? "none" : time(cursor)}`}
          {run ? ` · ${lastRun(run)}` : ""}
          {sent ? ` · ${plural(waiting, "message")} after the cursor, not yet summarized` : ""}
        </p>
      </figure>
    </div>
  );
}
