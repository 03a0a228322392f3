/**
 * How an error message renders a rejected value, apart from the entry
 * checks of `_validate.ts` so `parse_duration.ts` takes it without an
 * import cycle (`_validate.ts` names `parseDuration` in its refusals).
 *
 * @module
 */

/** The most characters of a rejected value an error message shows. */
const SHOWN = 100;

/**
 * Renders a rejected value for an error message, whatever its type, cut
 * to {@linkcode SHOWN} characters: a message must not grow with its input.
 */
export function show(value: unknown): string {
  let text: string;
  if (typeof value === "string") {
    // Only the start is rendered: a 10 MB string is not copied whole.
    text = JSON.stringify(value.length > SHOWN ? value.slice(0, SHOWN) : value);
    return value.length > SHOWN ? `${text}…(${value.length} characters)` : text;
  }
  if (typeof value === "bigint") text = `${value}n`;
  else {
    try {
      text = typeof value === "object" && value !== null
        ? JSON.stringify(value) ?? String(value)
        : String(value);
    } catch {
      text = Object.prototype.toString.call(value);
    }
  }
  return text.length > SHOWN
    ? `${text.slice(0, SHOWN)}…(${text.length} characters)`
    : text;
}
