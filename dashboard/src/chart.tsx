/**
 * A time chart drawn by uPlot (canvas, ~50 KB, bundled): a title, the latest value of each line in
 * its legend, local times on the x axis. Lines without a single value are left out, so an idle
 * mode does not crowd the legend.
 */
import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";

export interface Line {
  label: string;
  values: (number | null)[];
  color: string;
  dash?: number[];
}

/** Tick increments for counts: a chart of one message must not label 0.5 (as "1", twice). */
const WHOLE_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 1e7, 1e8];

export const COLORS = ["#2f5fd0", "#d9822b", "#1f7a4d", "#9b3dc9", "#b3261e", "#5d6675"];

export function Chart({ title, unit, times, lines, format, stepped, span }: {
  title: string;
  unit: string;
  times: number[];
  lines: Line[];
  format?: (value: number) => string;
  /** Counts, which change in whole steps: drawn as steps, with whole-number ticks only. */
  stepped?: boolean;
  /** Seconds the x axis spans at most, ending at the newest time (the overview's hour); else the data's range. */
  span?: number;
}) {
  const box = useRef<HTMLDivElement>(null);
  const shown = lines.filter((line) => line.values.some((value) => value !== null));
  useEffect(() => {
    const element = box.current;
    if (!element || times.length === 0 || shown.length === 0) {
      return;
    }
    const written = (value: number | null) => value === null ? "–" : (format ?? plain)(value);
    const options: uPlot.Options = {
      width: element.clientWidth || 520,
      height: 190,
      legend: { live: false },
      cursor: { drag: { x: false, y: false } },
      scales: {
        // Up to `span` back from the newest time, never wider than the data (a fresh server's few minutes fill
        // the chart); a single time gets a minute before it (uPlot hands a lone time's range to here as that
        // time plus 86,400 / its time unit: 1,000 days for seconds).
        x: {
          time: true,
          range: (_u, min, max) => times.length === 1 ? [times[0] - 60, times[0]]
            : [Math.max(min, max - (span ?? Infinity)), max],
        },
        y: { range: (_u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] } },
      axes: [
        { stroke: "#5d6675", grid: { stroke: "#eef0f4" }, space: 80 },  // room for a time label per tick
        { stroke: "#5d6675", grid: { stroke: "#eef0f4" }, size: 60, incrs: stepped ? WHOLE_STEPS : undefined,
          values: (_u, ticks) => ticks.map((tick) => (format ?? plain)(tick)) },
      ],
      series: [
        {},
        ...shown.map((line) => ({
          label: `${line.label} ${written(latest(line.values))}`,
          stroke: line.color,
          width: 2,
          dash: line.dash,
          spanGaps: false,
          points: { show: times.length < 30, size: 5 },  // a few points: each visible before lines join them
          paths: stepped ? uPlot.paths.stepped!({ align: 1 }) : undefined,
        })),
      ],
      hooks: {
        // The time span drawn, in seconds, for whoever checks the chart (tests, screenshots).
        draw: [(plot) => {
          element.dataset.xMin = String(plot.scales.x.min);
          element.dataset.xMax = String(plot.scales.x.max);
        }],
      },
    };
    const plot = new uPlot(options, [times, ...shown.map((line) => line.values)] as uPlot.AlignedData, element);
    return () => plot.destroy();
  }, [times, lines]);
  return (
    <figure class="chart" data-title={title}>
      <figcaption>{title} <span class="unit">{unit}</span></figcaption>
      {times.length === 0 || shown.length === 0 ? <p class="empty">Nothing measured yet.</p> : <div ref={box} />}
    </figure>
  );
}

/** The newest value of a series, or null when it has none. */
export function latest(values: (number | null)[]): number | null {
  for (let i = values.length - 1; i >= 0; i -= 1) {
    if (values[i] !== null) {
      return values[i];
    }
  }
  return null;
}

function plain(value: number): string {
  if (value === 0) {
    return "0";
  }
  if (Math.abs(value) >= 100) {
    return value.toFixed(0);
  }
  return Math.abs(value) >= 10 ? value.toFixed(1) : value.toPrecision(2);
}
