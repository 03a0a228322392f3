/**
 * A JSON answer whose body ends in a newline: JSON allows the whitespace,
 * and an operator reading a route with `curl` gets the shell's next prompt,
 * or the next command's answer, on a line of its own.
 *
 * @module
 */

/** `body` as JSON, and a newline; `application/json` unless `headers` say otherwise. */
export function jsonAnswer(
  body: unknown,
  status = 200,
  headers: Record<string, string> = {},
): Response {
  return new Response(jsonLine(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

/** `value` as JSON text, ending in a newline. */
export function jsonLine(value: unknown): string {
  return `${JSON.stringify(value)}\n`;
}
