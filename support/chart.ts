/**
 * Charts as standalone SVG documents: each panel is an Observable Plot
 * specification, rendered without a browser on linkedom's `document`, and
 * the panels are set side by side under a title and one legend.
 *
 * The legend is drawn here, in SVG: Plot's own swatch legend is HTML, which
 * an SVG file shown as an image cannot hold.
 *
 * @module
 */

import * as Plot from "@observablehq/plot";
import { parseHTML } from "linkedom";

/**
 * The Okabe–Ito palette: told apart with every common colour-vision
 * deficiency.
 *
 * @example One colour per series, in order
 * ```ts
 * import { PALETTE } from "./chart.ts";
 * import assert from "node:assert/strict";
 *
 * const colors = ["Exponential", "Decorr"].map((_, i) => PALETTE[i]);
 * assert.deepEqual(colors, ["#0072B2", "#E69F00"]);
 * ```
 */
export const PALETTE: readonly string[] = [
  "#0072B2",
  "#E69F00",
  "#009E73",
  "#D55E00",
  "#CC79A7",
  "#56B4E9",
  "#F0E442",
];

/**
 * One legend entry: a line with a dot for a series, a box for an area.
 *
 * @example A series and a band
 * ```ts
 * import type { LegendEntry } from "./chart.ts";
 * import assert from "node:assert/strict";
 *
 * const legend: LegendEntry[] = [
 *   { label: "worst", color: "#E69F00" },
 *   { label: "where jitter can put a delivery", color: "#0072B2", kind: "area" },
 * ];
 * assert.equal(legend.length, 2);
 * ```
 */
export interface LegendEntry {
  /** The words after the swatch. */
  readonly label: string;
  /** The swatch's colour. */
  readonly color: string;
  /**
   * `"line"` for a series, `"area"` for a band.
   *
   * @default {"line"}
   */
  readonly kind?: "line" | "area";
}

/**
 * Options for {@linkcode chartSvg}.
 *
 * @example A title, a legend and the default size
 * ```ts
 * import type { ChartOptions } from "./chart.ts";
 * import assert from "node:assert/strict";
 *
 * const options: ChartOptions = { title: "Calls vs clients", legend: [] };
 * assert.equal(options.width ?? 900, 900);
 * ```
 */
export interface ChartOptions {
  /** The heading above the panels. */
  readonly title: string;
  /** The legend, in one row under the title. */
  readonly legend: readonly LegendEntry[];
  /**
   * The whole document's width in pixels, shared equally by the panels.
   *
   * @default {900}
   */
  readonly width?: number;
  /**
   * The panels' height in pixels (the title and legend come on top).
   *
   * @default {400}
   */
  readonly height?: number;
}

const HEADER = 64;

interface RenderedSvg {
  setAttribute(name: string, value: string): void;
  readonly outerHTML: string;
}

/**
 * Renders `panels` with Observable Plot, left to right, under a title and a
 * legend, as one SVG document on a white background.
 *
 * @param panels Plot specifications; their width and height are set here.
 * @param options The title, the legend and the size.
 * @returns The SVG text, deterministic for the same input.
 *
 * @example One panel, one line
 * ```ts
 * import * as Plot from "@observablehq/plot";
 * import { chartSvg } from "./chart.ts";
 * import assert from "node:assert/strict";
 *
 * const svg = chartSvg([{ marks: [Plot.lineY([1, 3, 2], { stroke: "#0072B2" })] }], {
 *   title: "Three points",
 *   legend: [{ label: "the series", color: "#0072B2" }],
 * });
 * assert.match(svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
 * assert.equal(svg.match(/aria-label="line"/g)?.length, 1);
 * ```
 */
export function chartSvg(
  panels: readonly Plot.PlotOptions[],
  options: ChartOptions,
): string {
  const { title, legend, width = 900, height = 400 } = options;
  // The DOM types are not in Deno's default libraries: name only what is used.
  const { document } = parseHTML(
    "<!DOCTYPE html><html><body></body></html>",
  ) as unknown as { document: unknown };
  const panelWidth = Math.floor(width / panels.length);
  const rendered = panels.map((spec, i) => {
    const svg = Plot.plot({
      style: { fontSize: "12px" },
      ...spec,
      width: panelWidth,
      height,
      document,
    } as Plot.PlotOptions) as unknown as RenderedSvg;
    svg.setAttribute("x", String(i * panelWidth));
    svg.setAttribute("y", String(HEADER));
    return svg.outerHTML;
  });
  const total = HEADER + height;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${total}" viewBox="0 0 ${width} ${total}" font-family="system-ui, sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${
      width / 2
    }" y="22" text-anchor="middle" font-size="16" font-weight="bold">${
      escape(title)
    }</text>`,
    legendSvg(legend, width),
    ...rendered,
    "</svg>",
    "",
  ].join("\n");
}

/** One row of swatches, centred, each entry as wide as its words. */
function legendSvg(entries: readonly LegendEntry[], width: number): string {
  // About 6.5 px per character at 12 px: enough to keep entries apart.
  const widths = entries.map((e) => 30 + e.label.length * 6.5 + 24);
  let x = (width - widths.reduce((a, b) => a + b, 0)) / 2;
  const y = 46;
  return entries.map((entry, i) => {
    const swatch = entry.kind === "area"
      ? `<rect x="${x}" y="${
        y - 6
      }" width="22" height="12" fill="${entry.color}" fill-opacity="0.2" stroke="${entry.color}" stroke-opacity="0.5"/>`
      : `<line x1="${x}" x2="${
        x + 22
      }" y1="${y}" y2="${y}" stroke="${entry.color}" stroke-width="2"/><circle cx="${
        x + 11
      }" cy="${y}" r="3" fill="${entry.color}"/>`;
    const text = `<text x="${x + 30}" y="${y + 4}">${
      escape(entry.label)
    }</text>`;
    x += widths[i]!;
    return swatch + text;
  }).join("\n");
}

function escape(text: string): string {
  return text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(
    ">",
    "&gt;",
  );
}
