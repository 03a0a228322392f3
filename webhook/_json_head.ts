/**
 * The first bytes of a JSON object too large to be read whole (QStash's
 * failure callback over its limit), scanned for their top-level fields
 * without parsing the document: it may end anywhere.
 *
 * @module
 */

/** What {@linkcode topLevelFields} found. */
export interface TopLevel {
  /**
   * Each top-level field whose value the text holds whole, as
   * `JSON.parse` reads it: a string, number, boolean or `null` (an object
   * or array is skipped, its fields never taken for the top level's). A
   * key seen twice with values that differ is left out: which one the
   * whole document means cannot be told from its start.
   */
  readonly fields: ReadonlyMap<string, unknown>;
  /**
   * The string value the text ends inside, as far as it goes and unescaped
   * (`undefined` if the text does not end in one, or its key is not `open`).
   */
  readonly cut?: string;
}

/** Where the string that opens at `at` (a `"`) ends, past its closing quote; `undefined` if the text ends first. */
function stringEnd(text: string, at: number): number | undefined {
  for (let i = at + 1; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (char === 0x5c) i++; // a backslash escapes the next character
    else if (char === 0x22) return i + 1;
  }
  return undefined;
}

/** Where the object or array that opens at `at` ends; `undefined` if the text ends first. */
function nestedEnd(text: string, at: number): number | undefined {
  let depth = 0;
  for (let i = at; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (char === 0x22) {
      const end = stringEnd(text, i);
      if (end === undefined) return undefined;
      i = end - 1;
    } else if (char === 0x7b || char === 0x5b) {
      depth++;
    } else if (char === 0x7d || char === 0x5d) {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return undefined;
}

const SPACE = /[ \t\n\r]*/y;
const SCALAR = /-?[0-9][0-9.eE+-]*|true|false|null/y;
/** What may follow a value: its end is then known. */
const AFTER_VALUE = /[ \t\n\r]*[,}]/y;

function skipSpace(text: string, at: number): number {
  SPACE.lastIndex = at;
  SPACE.exec(text);
  return SPACE.lastIndex;
}

/** `JSON.parse` of one whole token; `undefined` if it is not one. */
function token(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) };
  } catch {
    return undefined;
  }
}

/** Marks a key seen with two values. */
const AMBIGUOUS: unique symbol = Symbol("ambiguous");
/** Marks a key whose value is an object or array (left out, but a repeat of the key is seen). */
const NESTED: unique symbol = Symbol("nested");

/**
 * The top-level fields of the JSON object `text` begins, as far as it
 * goes. Only whole tokens are parsed (a key, a string, a number), each on
 * its own: a string or number the text ends inside is left out (a number
 * whose end is not seen could go on), but for a string value of the key
 * `open`, given as far as it goes in `cut`. The scan stops at the end of
 * the object, at the end of the text, or at anything that is not JSON.
 */
export function topLevelFields(text: string, open?: string): TopLevel {
  const fields = new Map<string, unknown>();
  let cut: string | undefined;
  let at = skipSpace(text, 0);
  if (text[at] === "{") {
    at++;
    for (;;) {
      at = skipSpace(text, at);
      if (text[at] !== '"') break;
      const keyEnd = stringEnd(text, at);
      if (keyEnd === undefined) break;
      const key = token(text.slice(at, keyEnd))?.value;
      if (typeof key !== "string") break;
      at = skipSpace(text, keyEnd);
      if (text[at] !== ":") break;
      at = skipSpace(text, at + 1);
      let value: { value: unknown } | undefined;
      const char = text[at];
      if (char === '"') {
        const end = stringEnd(text, at);
        if (end === undefined) {
          if (fields.has(key)) fields.set(key, AMBIGUOUS);
          else if (key === open && !text.includes("\\", at)) {
            cut = text.slice(at + 1);
          }
          break;
        }
        value = token(text.slice(at, end));
        if (value === undefined) break;
        at = end;
      } else if (char === "{" || char === "[") {
        const end = nestedEnd(text, at);
        if (end === undefined) break;
        value = { value: NESTED };
        at = end;
      } else {
        SCALAR.lastIndex = at;
        const scalar = SCALAR.exec(text);
        if (scalar === null) break;
        AFTER_VALUE.lastIndex = SCALAR.lastIndex;
        if (!AFTER_VALUE.test(text)) break; // its end is not seen
        value = token(scalar[0]);
        if (value === undefined) break;
        at = SCALAR.lastIndex;
      }
      if (value !== undefined) {
        const seen = fields.get(key);
        fields.set(
          key,
          fields.has(key) && !Object.is(seen, value.value)
            ? AMBIGUOUS
            : value.value,
        );
      }
      at = skipSpace(text, at);
      if (text[at] !== ",") break;
      at++;
    }
  }
  for (const [key, value] of fields) {
    if (value === AMBIGUOUS || value === NESTED) fields.delete(key);
  }
  return cut === undefined ? { fields } : { fields, cut };
}
