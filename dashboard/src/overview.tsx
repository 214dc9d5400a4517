/**
 * The overview: what the server did over the last hour, from its own metrics history (one
 * point every 10 s, kept whether or not anyone watches): calls per second and their p50/p99 by
 * kind, the embedding backlog, sessions, stored bytes per tier and error-memory hits. A tenant
 * sees its own; an admin of every tenant sees all of them together, or the tenant picked.
 * Loads again every step.
 */
import { useEffect, useState } from "preact/hooks";
import { actingFor, history, type History } from "./api.js";
import { Chart, COLORS, type Line } from "./chart.js";
import { ErrorBanner, useCall } from "./ui.js";

const HOUR = 3600;
const KINDS = [
  { kind: "append", label: "append" },
  { kind: "search_keyword", label: "search keyword" },
  { kind: "search_semantic", label: "search semantic" },
  { kind: "search_hybrid", label: "search hybrid" },
];

export function Overview() {
  const { error, run } = useCall();
  const [data, setData] = useState<History | null>(null);
  useEffect(() => {
    const load = () => void run(history).then((found) => found && setData(found));
    load();
    const timer = window.setInterval(load, 10_000);
    return () => window.clearInterval(timer);
  }, []);

  const series = (name: string) => data?.series[name] ?? [];
  const byKind = (what: string, dash?: number[]): Line[] => KINDS.map(({ kind, label }, n) => (
    { label, values: series(`${kind}_${what}`), color: COLORS[n], dash }));
  const times = data?.times ?? [];
  const scope = data?.key === "*" ? "all tenants" : `tenant ${data?.key ?? actingFor()}`;
  return (
    <section>
      <div class="toolbar">
        <h1>Overview</h1>
        <span class="facts">
          {data ? `Last hour, ${scope}, one point every ${data.step_seconds} s` : "Loading…"}
        </span>
      </div>
      <ErrorBanner error={error} />
      {data && !data.tracked ? (
        <p class="notice">This tenant is past the server's cap of tenants tracked by name: its calls count under
          "(other)" and in the all-tenants view.</p>
      ) : null}
      <div class="charts">
        <Chart title="Calls per second" unit="calls/s" times={times} span={HOUR} lines={byKind("per_second")} />
        <Chart title="Latency p50" unit="ms" times={times} span={HOUR} lines={byKind("p50_ms")} />
        <Chart title="Latency p99" unit="ms" times={times} span={HOUR} lines={byKind("p99_ms", [6, 4])} />
        <Chart title="Embedding backlog" unit="messages waiting" times={times} span={HOUR}
          lines={[{ label: "backlog", values: series("embedding_backlog"), color: COLORS[3] }]} />
        <Chart title="Sessions" unit="stored" times={times} span={HOUR}
          lines={[{ label: "sessions", values: series("sessions"), color: COLORS[0] }]} />
        <Chart title="Stored bytes per tier" unit="bytes on disk" times={times} span={HOUR} format={size} lines={[
          { label: "window/history", values: series("bytes_window"), color: COLORS[0] },
          { label: "vectors", values: series("bytes_vectors"), color: COLORS[1] },
          { label: "archive", values: series("bytes_archive"), color: COLORS[2] },
        ]} />
        <Chart title="Error memory" unit="per 10 s step" times={times} span={HOUR} lines={[
          { label: "lessons found", values: series("error_memory_hits"), color: COLORS[4] },
          { label: "lookups/s", values: series("lookup_errors_per_second"), color: COLORS[5] },
        ]} />
      </div>
    </section>
  );
}

function size(value: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let unit = 0;
  let scaled = value;
  while (Math.abs(scaled) >= 1000 && unit < units.length - 1) {
    scaled /= 1000;
    unit += 1;
  }
  return `${scaled.toFixed(scaled >= 10 || unit === 0 ? 0 : 1)} ${units[unit]}`;
}
