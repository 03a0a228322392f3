/**
 * Line charts as a hand-written SVG string: one or more panels side by side,
 * each with axes, ticks, labels and one polyline per series, and one legend
 * shared by all panels (a series keeps its colour across panels). No
 * dependencies, so a bench script can draw a chart anywhere Deno runs.
 *
 * @module
 */

/** One line: a name for the legend and its points, `[x, y]`. */
export interface Series {
  /** The legend entry; series with the same name share a colour. */
  name: string;
  /** The points in drawing order. */
  points: readonly (readonly [number, number])[];
}

/** One chart among the panels. */
export interface Panel {
  /** The heading above the plot. */
  title: string;
  /** The label under the x axis. */
  xLabel: string;
  /** The label beside the y axis. */
  yLabel: string;
  /** The lines. */
  series: readonly Series[];
  /**
   * The y scale: `"log"` when one series dwarfs the others (values must
   * then be > 0).
   *
   * @default {"linear"}
   */
  yScale?: "linear" | "log";
}

/** Options for {@linkcode lineChartsSvg}. */
export interface ChartOptions {
  /** A heading over all panels; none when absent. */
  title?: string;
  /**
   * The width of the picture, in px.
   *
   * @default {900}
   */
  width?: number;
  /**
   * The height of the picture, in px.
   *
   * @default {380}
   */
  height?: number;
  /**
   * The colours, given to series names in order of first appearance.
   *
   * @default {the Okabe–Ito palette}
   */
  colors?: readonly string[];
}

// Okabe–Ito: distinguishable with the common colour-vision deficiencies.
const PALETTE = [
  "#0072B2",
  "#E69F00",
  "#009E73",
  "#D55E00",
  "#CC79A7",
  "#56B4E9",
  "#000000",
  "#F0E442",
];

const FONT =
  `font-family="system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif"`;

function escape(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(
    />/g,
    "&gt;",
  ).replace(/"/g, "&quot;");
}

/** A step of 1, 2 or 5 × 10^k that cuts `span` into about `count` parts. */
function niceStep(span: number, count: number): number {
  if (!(span > 0)) return 1;
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const f = raw / power;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * power;
}

interface Axis {
  min: number;
  max: number;
  ticks: number[];
}

function axis(values: readonly number[], count: number, zero: boolean): Axis {
  let lo = values.length > 0 ? Math.min(...values) : 0;
  let hi = values.length > 0 ? Math.max(...values) : 1;
  if (zero) lo = Math.min(lo, 0);
  if (hi === lo) hi = lo + 1;
  const step = niceStep(hi - lo, count);
  const min = Math.floor(lo / step) * step;
  const max = Math.ceil(hi / step) * step;
  const ticks: number[] = [];
  for (let i = 0; min + i * step <= max + step / 1e9; i++) {
    ticks.push(Number((min + i * step).toPrecision(12)));
  }
  return { min, max, ticks };
}

/**
 * A log axis from a 1-2-5 value at or below the smallest point to one at or
 * above the largest, ticked at 1, 2 and 5 × 10^k when it spans up to three
 * decades and at the decades alone when it spans more.
 */
function logAxis(values: readonly number[]): Axis {
  const positive = values.filter((v) => v > 0);
  const lo = positive.length > 0 ? Math.min(...positive) : 1;
  const hi = positive.length > 0 ? Math.max(...positive) : 10;
  const from = Math.floor(Math.log10(lo));
  const to = Math.ceil(Math.log10(hi));
  const steps = to - from <= 4 ? [1, 2, 5] : [1];
  const candidates: number[] = [];
  for (let e = from; e <= to; e++) {
    for (const m of steps) {
      candidates.push(Number((m * 10 ** e).toPrecision(12)));
    }
  }
  const min = candidates.filter((v) => v <= lo).at(-1) ?? 10 ** from;
  const max = candidates.find((v) => v >= hi && v > min) ?? 10 ** to;
  return { min, max, ticks: candidates.filter((v) => v >= min && v <= max) };
}

function tickLabel(value: number): string {
  if (Math.abs(value) >= 1e6 && value % 1e6 === 0) return `${value / 1e6}M`;
  if (Math.abs(value) >= 1000 && value % 1000 === 0) return `${value / 1000}k`;
  return String(Number(value.toPrecision(6)));
}

function fixed(n: number): string {
  return String(Math.round(n * 10) / 10);
}

/**
 * Draws line charts side by side as a standalone SVG document.
 *
 * @param panels The charts, left to right.
 * @param options The heading, size and colours.
 * @returns The SVG text.
 *
 * @example Two panels, one series each
 * ```ts
 * import { lineChartsSvg } from "./_svg_chart.ts";
 * import assert from "node:assert/strict";
 *
 * const svg = lineChartsSvg([
 *   { title: "a", xLabel: "x", yLabel: "y", series: [{ name: "s", points: [[0, 1], [1, 2]] }] },
 *   { title: "b", xLabel: "x", yLabel: "y", series: [{ name: "s", points: [[0, 3], [1, 1]] }] },
 * ]);
 * assert.match(svg, /^<svg /);
 * assert.equal(svg.match(/<polyline /g)?.length, 2);
 * ```
 */
export function lineChartsSvg(
  panels: readonly Panel[],
  options: ChartOptions = {},
): string {
  const { title, width = 900, height = 380, colors = PALETTE } = options;
  const names: string[] = [];
  for (const panel of panels) {
    for (const s of panel.series) {
      if (!names.includes(s.name)) names.push(s.name);
    }
  }
  const color = (name: string) =>
    colors[names.indexOf(name) % colors.length] ?? "#000";

  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ${FONT} font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
  ];

  // The heading, then the shared legend centred under it.
  let top = 12;
  if (title !== undefined) {
    out.push(
      `<text x="${width / 2}" y="${
        top + 14
      }" text-anchor="middle" font-size="15" font-weight="600">${
        escape(title)
      }</text>`,
    );
    top += 24;
  }
  const entryWidths = names.map((n) => 28 + n.length * 6.6 + 22);
  let x = (width - entryWidths.reduce((a, b) => a + b, 0)) / 2;
  out.push(`<g font-size="12">`);
  names.forEach((name, i) => {
    const y = top + 10;
    out.push(
      `<line x1="${fixed(x)}" y1="${y}" x2="${
        fixed(x + 22)
      }" y2="${y}" stroke="${color(name)}" stroke-width="2.5"/>`,
      `<circle cx="${fixed(x + 11)}" cy="${y}" r="3" fill="${color(name)}"/>`,
      `<text x="${fixed(x + 28)}" y="${y + 4}">${escape(name)}</text>`,
    );
    x += entryWidths[i]!;
  });
  out.push(`</g>`);
  top += 28;

  const gap = 24;
  const panelWidth = (width - gap * (panels.length + 1)) / panels.length;
  const margin = { left: 62, right: 12, top: 26, bottom: 46 };
  panels.forEach((panel, p) => {
    const left = gap + p * (panelWidth + gap);
    const plotX = left + margin.left;
    const plotY = top + margin.top;
    const plotW = panelWidth - margin.left - margin.right;
    const plotH = height - plotY - margin.bottom;
    const xs = panel.series.flatMap((s) => s.points.map(([px]) => px));
    const ys = panel.series.flatMap((s) => s.points.map(([, py]) => py));
    const xAxis = axis(xs, 5, true);
    const log = panel.yScale === "log";
    const yAxis = log ? logAxis(ys) : axis(ys, 5, true);
    const ly = (v: number) => log ? Math.log10(Math.max(v, yAxis.min)) : v;
    const sx = (v: number) =>
      plotX + (v - xAxis.min) / (xAxis.max - xAxis.min) * plotW;
    const sy = (v: number) =>
      plotY + plotH -
      (ly(v) - ly(yAxis.min)) / (ly(yAxis.max) - ly(yAxis.min)) * plotH;

    out.push(
      `<g>`,
      `<text x="${fixed(plotX + plotW / 2)}" y="${
        plotY - 10
      }" text-anchor="middle" font-size="13" font-weight="600">${
        escape(panel.title)
      }</text>`,
    );
    for (const t of yAxis.ticks) {
      const y = fixed(sy(t));
      out.push(
        `<line x1="${fixed(plotX)}" y1="${y}" x2="${
          fixed(plotX + plotW)
        }" y2="${y}" stroke="#e5e5e5"/>`,
        `<line x1="${fixed(plotX - 4)}" y1="${y}" x2="${
          fixed(plotX)
        }" y2="${y}" stroke="#333"/>`,
        `<text x="${
          fixed(plotX - 7)
        }" y="${y}" dy="4" text-anchor="end" fill="#333">${
          tickLabel(t)
        }</text>`,
      );
    }
    for (const t of xAxis.ticks) {
      const xt = fixed(sx(t));
      out.push(
        `<line x1="${xt}" y1="${fixed(plotY + plotH)}" x2="${xt}" y2="${
          fixed(plotY + plotH + 4)
        }" stroke="#333"/>`,
        `<text x="${xt}" y="${
          fixed(plotY + plotH + 17)
        }" text-anchor="middle" fill="#333">${tickLabel(t)}</text>`,
      );
    }
    out.push(
      `<path d="M${fixed(plotX)},${fixed(plotY)}V${fixed(plotY + plotH)}H${
        fixed(plotX + plotW)
      }" fill="none" stroke="#333"/>`,
      `<text x="${fixed(plotX + plotW / 2)}" y="${
        fixed(plotY + plotH + 36)
      }" text-anchor="middle">${escape(panel.xLabel)}</text>`,
      `<text transform="translate(${fixed(left + 14)},${
        fixed(plotY + plotH / 2)
      }) rotate(-90)" text-anchor="middle">${escape(panel.yLabel)}</text>`,
    );
    for (const s of panel.series) {
      const points = s.points.map(([px, py]) =>
        `${fixed(sx(px))},${fixed(sy(py))}`
      );
      out.push(
        `<polyline points="${points.join(" ")}" fill="none" stroke="${
          color(s.name)
        }" stroke-width="2" stroke-linejoin="round"><title>${
          escape(s.name)
        }</title></polyline>`,
      );
      for (const pt of points) {
        const [cx, cy] = pt.split(",");
        out.push(
          `<circle cx="${cx}" cy="${cy}" r="2.5" fill="${color(s.name)}"/>`,
        );
      }
    }
    out.push(`</g>`);
  });
  out.push(`</svg>`);
  return out.join("\n") + "\n";
}
