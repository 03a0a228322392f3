/**
 * Line charts as a hand-written SVG string: one or more panels side by side,
 * each with axes, ticks, labels and one polyline per series, optionally a
 * shaded band between two series and labelled horizontal rules, and one
 * legend shared by all panels (a series keeps its colour across panels). No
 * dependencies, so a bench script or a tool can draw a chart anywhere Deno
 * runs.
 *
 * @module
 */

/** One line: a name for the legend and its points, `[x, y]`. */
export interface Series {
  /** The legend entry; series with the same name share a colour. */
  name: string;
  /** The points in drawing order. */
  points: readonly (readonly [number, number])[];
  /**
   * A note above and left of the last point (its value, say), lifted
   * clear of a lower series' note; none when absent.
   */
  endLabel?: string;
}

/** A shaded area between two series of the same panel. */
export interface Band {
  /** The name of the series that bounds the area from below. */
  lower: string;
  /** The name of the series that bounds the area from above. */
  upper: string;
  /** A legend entry for the area; none when absent. */
  label?: string;
  /**
   * The fill colour (drawn translucent).
   *
   * @default {the upper series' colour}
   */
  color?: string;
}

/** A horizontal reference line across a panel, labelled at one end. */
export interface Rule {
  /** Where the line crosses the y axis, in data units. */
  y: number;
  /** The text above the line, at the end `anchor` names. */
  label: string;
  /**
   * Which end of the line carries the label: `"end"` (right) or
   * `"start"` (left), whichever the data leaves free.
   *
   * @default {"end"}
   */
  anchor?: "start" | "end";
  /**
   * The colour of the line and its label.
   *
   * @default {"#333"}
   */
  color?: string;
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
  /** Shaded areas between pairs of series, drawn under the lines. */
  bands?: readonly Band[];
  /** Horizontal reference lines, drawn under the series. */
  rules?: readonly Rule[];
  /**
   * The x ticks, when the data calls for particular ones (whole delivery
   * numbers, say); the axis then spans the ticks and the data, without
   * being stretched to zero.
   *
   * @default {about 5 evenly spaced ticks, from zero}
   */
  xTicks?: readonly number[];
  /**
   * The y ticks, likewise (a linear scale only).
   *
   * @default {about 5 evenly spaced ticks, from zero}
   */
  yTicks?: readonly number[];
  /**
   * The text of an x tick.
   *
   * @default {1000 as "1k", 2000000 as "2M"}
   */
  formatX?: (value: number) => string;
  /**
   * The text of a y tick (durations, say).
   *
   * @default {1000 as "1k", 2000000 as "2M"}
   */
  formatY?: (value: number) => string;
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

/** An axis over the given ticks, widened to take in every value. */
function fixedAxis(values: readonly number[], ticks: readonly number[]): Axis {
  const all = [...values, ...ticks];
  const min = all.length > 0 ? Math.min(...all) : 0;
  let max = all.length > 0 ? Math.max(...all) : 1;
  if (max === min) max = min + 1;
  return { min, max, ticks: [...ticks] };
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
  // A band's colour defaults to its upper series'; a labelled band gets a
  // legend swatch after the series.
  const bandColor = (band: Band) => band.color ?? color(band.upper);
  const swatches: { label: string; fill: string }[] = [];
  for (const panel of panels) {
    for (const band of panel.bands ?? []) {
      if (
        band.label !== undefined &&
        !swatches.some((w) => w.label === band.label)
      ) swatches.push({ label: band.label, fill: bandColor(band) });
    }
  }
  const entries = [...names, ...swatches.map((w) => w.label)];
  const entryWidths = entries.map((n) => 28 + n.length * 6.6 + 22);
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
  swatches.forEach(({ label, fill }, i) => {
    const y = top + 10;
    out.push(
      `<rect x="${fixed(x)}" y="${y - 6}" width="22" height="12" fill="${
        escape(fill)
      }" fill-opacity="0.18" stroke="${escape(fill)}" stroke-opacity="0.4"/>`,
      `<text x="${fixed(x + 28)}" y="${y + 4}">${escape(label)}</text>`,
    );
    x += entryWidths[names.length + i]!;
  });
  out.push(`</g>`);
  top += 28;

  const gap = 24;
  const panelWidth = (width - gap * (panels.length + 1)) / panels.length;
  panels.forEach((panel, p) => {
    const xs = panel.series.flatMap((s) => s.points.map(([px]) => px));
    const ys = [
      ...panel.series.flatMap((s) => s.points.map(([, py]) => py)),
      ...(panel.rules ?? []).map((r) => r.y),
    ];
    const xAxis = panel.xTicks === undefined
      ? axis(xs, 5, true)
      : fixedAxis(xs, panel.xTicks);
    const log = panel.yScale === "log";
    const yAxis = log
      ? logAxis(ys)
      : panel.yTicks === undefined
      ? axis(ys, 5, true)
      : fixedAxis(ys, panel.yTicks);
    const formatX = panel.formatX ?? tickLabel;
    const formatY = panel.formatY ?? tickLabel;
    // Room on the left for the widest y tick label and the rotated y label.
    const widest = Math.max(0, ...yAxis.ticks.map((t) => formatY(t).length));
    const margin = {
      left: Math.max(62, 33 + widest * 7.2),
      right: 12,
      top: 26,
      bottom: 46,
    };
    const left = gap + p * (panelWidth + gap);
    const plotX = left + margin.left;
    const plotY = top + margin.top;
    const plotW = panelWidth - margin.left - margin.right;
    const plotH = height - plotY - margin.bottom;
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
          escape(formatY(t))
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
        }" text-anchor="middle" fill="#333">${escape(formatX(t))}</text>`,
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
    for (const band of panel.bands ?? []) {
      const lower = panel.series.find((s) => s.name === band.lower);
      const upper = panel.series.find((s) => s.name === band.upper);
      if (lower === undefined || upper === undefined) continue;
      // Along the upper line, then back along the lower one.
      const outline = [...upper.points, ...[...lower.points].reverse()].map((
        [px, py],
      ) => `${fixed(sx(px))},${fixed(sy(py))}`);
      out.push(
        `<polygon points="${outline.join(" ")}" fill="${
          escape(bandColor(band))
        }" fill-opacity="0.18" stroke="none"/>`,
      );
    }
    for (const rule of panel.rules ?? []) {
      const y = fixed(sy(rule.y));
      const stroke = escape(rule.color ?? "#333");
      const start = rule.anchor === "start";
      // Under the line when above it would run into the panel's title.
      const dy = sy(rule.y) - plotY < 18 ? 15 : -6;
      out.push(
        `<line x1="${fixed(plotX)}" y1="${y}" x2="${
          fixed(plotX + plotW)
        }" y2="${y}" stroke="${stroke}" stroke-width="1.5" stroke-dasharray="6 4"/>`,
        `<text x="${
          fixed(start ? plotX + 6 : plotX + plotW - 6)
        }" y="${y}" dy="${dy}" text-anchor="${
          start ? "start" : "end"
        }" fill="${stroke}">${escape(rule.label)}</text>`,
      );
    }
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
    // End notes, bottom to top: above their point, and lifted above the
    // previous note when they would overlap it.
    const notes = panel.series.flatMap((s) => {
      const last = s.points.at(-1);
      return s.endLabel === undefined || last === undefined
        ? []
        : [{ s, text: s.endLabel, x: sx(last[0]), y: sy(last[1]) }];
    }).sort((a, b) => b.y - a.y);
    let previous = Infinity;
    for (const note of notes) {
      const y = Math.min(note.y - 8, previous - 14);
      previous = y;
      out.push(
        `<text x="${fixed(note.x - 8)}" y="${
          fixed(y)
        }" text-anchor="end" font-weight="600" fill="${color(note.s.name)}">${
          escape(note.text)
        }</text>`,
      );
    }
    out.push(`</g>`);
  });
  out.push(`</svg>`);
  return out.join("\n") + "\n";
}
