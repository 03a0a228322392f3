/**
 * Reading the charts Observable Plot draws: each mark is a `<g>` whose
 * `aria-label` names its kind (`"line"`, `"dot"`, `"area"`, `"text"`,
 * `"rule"`), holding one element per series or datum.
 *
 * @module
 */

/** The inner SVG of every mark of kind `label`, in drawing order. */
export function marks(svg: string, label: string): string[] {
  const group = new RegExp(
    `<g [^>]*aria-label="${label}"[^>]*>([\\s\\S]*?)</g>`,
    "g",
  );
  return [...svg.matchAll(group)].map((match) => match[1]!);
}

/** How many times `pattern` (a global regular expression) occurs in `text`. */
export function count(text: string, pattern: RegExp): number {
  return text.match(pattern)?.length ?? 0;
}
