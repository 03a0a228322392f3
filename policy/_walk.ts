/**
 * Walks an error graph the way Go's `errors.Is` does: the error itself, its
 * `cause` chain and every member of an `AggregateError`, once each.
 *
 * @module
 */

/**
 * Whether the error or anything it wraps carries `mark` (a property set to
 * `true`). Cycles are visited once; a property that throws when read (a
 * hostile getter or a revoked proxy) counts as "not found" there, because a
 * classifier that crashes would turn a known condition into an unknown one.
 */
export function hasMark(error: unknown, mark: symbol): boolean {
  // Fastest path, small enough for the engine to inline into `decide`: most
  // errors carry no mark, no `cause` and no `errors`.
  if (typeof error === "object" && error !== null) {
    try {
      const node = error as Record<PropertyKey, unknown>;
      if (
        node[mark] !== true && node.cause === undefined &&
        node.errors === undefined
      ) return false;
    } catch {
      // An unreadable node: let the walks decide.
    }
  }
  return walkChain(error, mark);
}

/** A short plain `cause` chain, walked in place; anything else, walked in full. */
function walkChain(error: unknown, mark: symbol): boolean {
  // Fast path, no allocation: most errors are a short plain `cause` chain
  // (or none), and this runs on every failed delivery.
  let node: unknown = error;
  for (let hops = 0; hops < 8; hops++) {
    if (
      node === null || (typeof node !== "object" && typeof node !== "function")
    ) return false;
    try {
      if ((node as Record<symbol, unknown>)[mark] === true) return true;
      const { cause, errors } = node as { cause?: unknown; errors?: unknown };
      if (errors !== undefined) break; // an AggregateError: walk it all
      if (cause === undefined) return false;
      node = cause;
    } catch {
      break; // an unreadable node: let the careful walk decide
    }
  }
  return walkAll(error, mark);
}

/**
 * The most values the careful walk reads (nodes, and members of
 * AggregateErrors): a real error graph is far smaller, and a hostile one (a
 * getter that makes a fresh `cause` on every read, an `errors` of length
 * 2^32 − 1 on every node) would otherwise never end. A mark beyond it is
 * not found, as a mark behind a throwing getter is not.
 */
export const MAX_WALKED = 100_000;

/**
 * The careful walk: every node once (cycles), every member of an
 * AggregateError, at most {@linkcode MAX_WALKED} values read in all.
 */
function walkAll(error: unknown, mark: symbol): boolean {
  const seen = new Set<unknown>();
  const stack: unknown[] = [];
  const take = (node: unknown) => {
    if (
      node !== null &&
      (typeof node === "object" || typeof node === "function") &&
      !seen.has(node)
    ) {
      seen.add(node);
      stack.push(node);
    }
  };
  let room = MAX_WALKED;
  take(error);
  while (stack.length > 0 && room > 0) {
    const node = stack.pop() as Record<PropertyKey, unknown>;
    room--;
    // The mark, `cause` and `errors` are read apart: one that throws (a
    // hostile getter) hides only itself, never what the others lead to.
    try {
      if (node[mark] === true) return true;
    } catch {
      // An unreadable mark is no mark; its `cause` and `errors` still count.
    }
    try {
      const cause = node.cause;
      if (cause !== undefined) take(cause);
    } catch {
      // An unreadable `cause` leads nowhere; `errors` still counts.
    }
    try {
      const errors = node.errors;
      if (Array.isArray(errors)) {
        // By index, never spread (the length may be anything), and each
        // member read spends the budget, seen or not. Pushed last to
        // first, so what lies below them is walked first to last (as Go's
        // errors.Is does).
        const count = Math.min(errors.length, room);
        for (let i = count - 1; i >= 0; i--) {
          room--;
          let member: unknown;
          try {
            member = errors[i];
          } catch {
            continue; // an unreadable member carries no mark; walk the rest
          }
          // Its own mark is looked at as it is read: a long list that
          // spends the budget still has every member's mark seen. A mark
          // that throws hides only itself: the member is still walked.
          try {
            if (
              member !== null &&
              (typeof member === "object" || typeof member === "function") &&
              (member as Record<PropertyKey, unknown>)[mark] === true
            ) return true;
          } catch {
            // An unreadable mark is no mark; its `cause` and `errors` count.
          }
          take(member);
        }
      }
    } catch {
      // Unreadable `errors` (or their length) hold no mark; keep walking.
    }
  }
  return false;
}

/**
 * Whether `error` carries `mark` for every attempt it stands for: on itself
 * or down its `cause` chain (a wrapper is the error it wraps, with
 * context), and, where it is an `AggregateError` (several attempts: a send
 * given to several nodes, as `Promise.any` fails), on every one of its
 * members, each read the same way; the members decide, not a `cause` the
 * aggregate was given. Pessimistic where {@linkcode hasMark} is not: an
 * aggregate with no members or with one unmarked, a cycle, a node or member
 * that cannot be read, aggregates nested more than {@linkcode MAX_NESTED}
 * deep and a graph past {@linkcode MAX_WALKED} values all answer `false`.
 */
export function hasMarkOnEvery(error: unknown, mark: symbol): boolean {
  // Most errors carry no mark at all: answered by the quick walk.
  if (!hasMark(error, mark)) return false;
  return onEvery(error, mark, { room: MAX_WALKED }, new Set(), 0);
}

/** The most AggregateErrors nested in one another that `hasMarkOnEvery` reads. */
export const MAX_NESTED = 32;

/** `hasMarkOnEvery`'s walk: `path` holds the nodes above, for cycles. */
function onEvery(
  error: unknown,
  mark: symbol,
  budget: { room: number },
  path: Set<unknown>,
  depth: number,
): boolean {
  const walked: unknown[] = [];
  try {
    let node = error;
    while (budget.room-- > 0) {
      if (
        node === null ||
        (typeof node !== "object" && typeof node !== "function") ||
        path.has(node)
      ) return false;
      path.add(node);
      walked.push(node);
      const read = node as Record<PropertyKey, unknown>;
      try {
        if (read[mark] === true) return true;
      } catch {
        // An unreadable mark is no mark; its `cause` and `errors` still count.
      }
      let errors: unknown;
      try {
        errors = read.errors;
      } catch {
        return false; // whether it holds attempts, and which, is unknown
      }
      if (errors !== undefined) {
        return everyMember(errors, mark, budget, path, depth);
      }
      let cause: unknown;
      try {
        cause = read.cause;
      } catch {
        return false;
      }
      if (cause === undefined) return false;
      node = cause;
    }
    return false;
  } finally {
    for (const node of walked) path.delete(node);
  }
}

/** Whether `errors` holds at least one member, each marked on every attempt. */
function everyMember(
  errors: unknown,
  mark: symbol,
  budget: { room: number },
  path: Set<unknown>,
  depth: number,
): boolean {
  try {
    if (!Array.isArray(errors) || depth >= MAX_NESTED) return false;
    const count = errors.length;
    if (!(count >= 1) || count > budget.room) return false;
    for (let i = 0; i < count; i++) {
      budget.room--;
      if (!onEvery(errors[i], mark, budget, path, depth + 1)) return false;
    }
    return true;
  } catch {
    return false; // a member, or the length, that cannot be read
  }
}

/**
 * The most characters of a thrown string shown (a Sender that throws a
 * whole response body), and of a thrown object's `name` or `code`.
 */
const SHOWN_STRING = 1000;
const SHOWN_FIELD = 64;

/**
 * The text of any throwable: an `Error`'s message, a string as it is (cut
 * at 1,000 characters), and anything else by what it is, never by its
 * contents: a thrown `{ code: "ECONNRESET" }` is
 * `Object with code "ECONNRESET" (not an Error)`, not `[object Object]`,
 * and no field but a short `name` or `code` is read, for a store's or
 * Sender's object may hold a credential. Never throws, never a stack.
 */
export function messageOf(error: unknown): string {
  return messageAt(error, 0);
}

/**
 * How deep {@linkcode wordsOf} reads aggregates with no words of their
 * own: a member's members (a send given to several nodes, each given to
 * several), no deeper. Beyond, one is said by its name: an aggregate that
 * holds itself was read without end (twice: without answer).
 */
const AGGREGATE_DEPTH = 2;

/** {@linkcode messageOf} of a value met `depth` aggregates down. */
function messageAt(error: unknown, depth: number): string {
  try {
    if (typeof error === "string") {
      return error.length <= SHOWN_STRING ? error : cutString(error);
    }
    if (error !== null && typeof error === "object") {
      // An Error's message too may be anything (assigned after the fact):
      // only a string is taken as it is.
      const { message } = error as { message?: unknown };
      if (typeof message === "string") {
        return message === "" && error instanceof Error
          ? wordsAt(error, depth)
          : message;
      }
      if (error instanceof Error) {
        const name = shortField(error.name) ?? "Error";
        return typeof message === "number" || typeof message === "boolean"
          ? `${name}: ${message}`
          : name;
      }
    }
    return `${whatIsThrown(error)} (not an Error)`;
  } catch {
    return "unprintable error";
  }
}

/** `text` cut to at most {@linkcode SHOWN_STRING} characters, saying how many more there were. */
function cutString(text: string): string {
  // The note counts in the bound, so a caller that clips at the same
  // bound keeps the note, and the count, as they are.
  const note = ` (${text.length} characters in all)`;
  return `${cutAt(text, SHOWN_STRING - note.length - 1)}…${note}`;
}

/** A value that is no Error nor string, by its kind: no field but `name` and `code`. */
function whatIsThrown(value: unknown): string {
  if (typeof value === "bigint") {
    const text = `${value}n`;
    return text.length <= SHOWN_FIELD ? text : "a bigint";
  }
  if (typeof value === "symbol") return "a symbol";
  if (typeof value !== "object" && typeof value !== "function") {
    return String(value); // undefined, a number, a boolean
  }
  if (value === null) return "null";
  let kind = "an object";
  try {
    const proto = Object.getPrototypeOf(value);
    if (proto === null) kind = "an object with no prototype";
    else {
      const name = shortField(
        (proto as { constructor?: unknown }).constructor
          ? (proto.constructor as { name?: unknown }).name
          : undefined,
      );
      if (name !== undefined) kind = name;
    }
  } catch {
    // A proxy's trap: its kind is unknown.
  }
  const fields: string[] = [];
  for (const key of ["name", "code"] as const) {
    try {
      const field = (value as Record<string, unknown>)[key];
      const shown = typeof field === "number" && Number.isFinite(field)
        ? String(field)
        : shortField(field) === undefined
        ? undefined
        : JSON.stringify(field);
      if (shown !== undefined && shown !== JSON.stringify(kind)) {
        fields.push(`${key} ${shown}`);
      }
    } catch {
      // A getter or trap that throws: the field is left out.
    }
  }
  return fields.length === 0 ? kind : `${kind} with ${fields.join(", ")}`;
}

/** `field` when it is a short one-line string, else `undefined`. */
function shortField(field: unknown): string | undefined {
  return typeof field === "string" && field !== "" &&
      field.length <= SHOWN_FIELD && !LINE_BREAKING.test(field)
    ? field
    : undefined;
}

/**
 * What ends or breaks a line somewhere: the C0 and C1 controls, DEL, and
 * the line and paragraph separators some log viewers break on.
 */
// deno-lint-ignore no-control-regex
export const LINE_BREAKING = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

const LINE_BREAKING_RUNS = new RegExp(`${LINE_BREAKING.source}+`, "g");

/**
 * `line` fit for a log: each run of {@linkcode LINE_BREAKING} characters
 * a space. A client's text (a job's field quoted in a refusal, as
 * JSON.stringify writes it, keeps a NEL or U+2028 raw) could otherwise
 * end the line and start one that reads as the service's own.
 */
export function oneLine(line: string): string {
  return LINE_BREAKING.test(line)
    ? line.replace(LINE_BREAKING_RUNS, " ")
    : line;
}

/**
 * An error's name and message on one short line, for a log: white space
 * collapsed, at most 300 characters. Never a stack. An `AggregateError`
 * with no message of its own (`node:net`'s, once every address of a host
 * name refused the connect) is said by its members' messages, which carry
 * the words: its own name alone said nothing.
 */
export function describeError(error: unknown): string {
  let text: string;
  try {
    text = error instanceof Error && typeof error.message === "string"
      ? `${shortField(error.name) ?? "Error"}: ${wordsOf(error)}`
      : messageOf(error);
  } catch {
    text = "unprintable error"; // a proxy's trap
  }
  return cutAt(text.replace(/\s+/g, " "), 300);
}

/**
 * An error's message, or, for an `AggregateError` with none of its own
 * (`node:net`'s, once every address of a host name refused the connect),
 * its first members' messages, joined by ", ": where the words are.
 */
export function wordsOf(error: Error): string {
  return wordsAt(error, 0);
}

/** {@linkcode wordsOf} of an error met `depth` aggregates down. */
function wordsAt(error: Error, depth: number): string {
  const { message } = error;
  if (typeof message !== "string") return messageAt(error, depth);
  if (message !== "") return message;
  // A Sender's aggregate may hold anything: what cannot be read says
  // nothing, and never throws from a log line.
  try {
    const errors = (error as { errors?: unknown }).errors;
    if (!Array.isArray(errors)) return "";
    if (depth >= AGGREGATE_DEPTH) return shortField(error.name) ?? "Error";
    // No more than a log line keeps (300 characters).
    return errors.slice(0, 16).map((member) => messageAt(member, depth + 1))
      .join(", ");
  } catch {
    return "";
  }
}

/**
 * The first `max` UTF-16 units of `text`, or one fewer where the cut
 * would split a surrogate pair (an emoji, say): a lone half is not text,
 * and a log sink writes it as U+FFFD or refuses the line.
 */
export function cutAt(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/**
 * A function that replaces each secret of `secrets` with its mask, in
 * every form text that echoes it may take: as it is; as JSON writes it
 * (`\"`, `\\`, `\/`, `\n`) or escapes it with `\uXXXX` (.NET writes '+'
 * as `\u002B`, '<', '>', '&' and '\'' alike; some writers every character
 * that is not an ASCII letter or digit), up to three levels deep (JSON
 * quoted in JSON); %-encoded, as a URL's path or query carries it (`%2F`
 * or `%2f`, a space also as `+`, the '%' itself also as `\u0025`); and in
 * base64 and base64url, wherever it starts in
 * the bytes encoded (`Bearer <token>` encoded whole), as a dump of the
 * request's headers may write it, escaped alike. Each character may take
 * any of its forms: text is masked only where it reads as the secret.
 * Hex digits match in either case. An ASCII letter or digit matches only
 * as it is, which no writer escapes.
 *
 * The patterns are built at the first call, not before: masking runs where
 * a message is written for a failure, never on a request's way. The
 * longest secret is replaced first: a value before a token it holds.
 */
export function secretMasker(
  secrets: Iterable<readonly [secret: string, mask: string]>,
): (text: string) => string {
  const given = [...secrets].filter(([secret]) => secret !== "");
  let patterns: [RegExp, string][] | undefined;
  return (text) => {
    patterns ??= given
      .sort((a, b) => b[0].length - a[0].length)
      .map(([secret, mask]) => [
        new RegExp(
          [secret, ...base64Forms(secret)].map(escapedPattern).join("|"),
          "g",
        ),
        mask,
      ]);
    for (const [pattern, mask] of patterns) {
      text = text.replace(pattern, () => mask);
    }
    return text;
  };
}

/** The escapes JSON writes for these characters, besides `\uXXXX`. */
const JSON_ESCAPES: Readonly<Record<string, string>> = {
  '"': '\\"',
  "\\": "\\\\",
  "/": "\\/",
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
};

/** A pattern of `text` in which each character may take any of its forms. */
function escapedPattern(text: string): string {
  let pattern = "";
  for (const char of text) {
    if (/^[A-Za-z0-9]$/.test(char)) {
      pattern += char;
      continue;
    }
    // The escapes before the character as it is: at the secret's end, an
    // escape must be taken whole (`\\`, `%25`), not its first character.
    const forms: string[] = [];
    const json = JSON_ESCAPES[char];
    // One backslash to seven: JSON written in a string of JSON again (a
    // gateway's answer quoting an upstream's) doubles each, up to three
    // levels deep. A bound, not `+`: a long run of backslashes in an
    // answer is then read in linear time.
    if (json !== undefined) {
      forms.push(`\\\\{1,7}${escapeRegExp(json.slice(1))}`);
    }
    let unicode = "";
    for (let i = 0; i < char.length; i++) {
      unicode += `\\\\{1,7}u${hexPattern(char.charCodeAt(i), 4)}`;
    }
    forms.push(unicode);
    let percent = "";
    for (const byte of new TextEncoder().encode(char)) {
      percent += `(?:%|\\\\{1,7}u0025)${hexPattern(byte, 2)}`;
    }
    forms.push(percent);
    if (char === " ") forms.push("\\+");
    forms.push(escapeRegExp(char));
    pattern += `(?:${forms.join("|")})`;
  }
  return pattern;
}

/** `text` as a pattern that matches it alone. */
function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|\/-]/g, "\\$&");
}

/** `value` in `width` hex digits, each letter in either case. */
function hexPattern(value: number, width: number): string {
  return [...value.toString(16).padStart(width, "0")].map((digit) =>
    /[a-f]/.test(digit) ? `[${digit}${digit.toUpperCase()}]` : digit
  ).join("");
}

/** Base64 text shorter than this is not masked: it would mask common words. */
const MIN_BASE64_FORM = 8;

/**
 * The base64 and base64url text that `secret`'s UTF-8 bytes encode to at
 * each of the 3 offsets they may start at after other bytes, without the
 * characters that also hold bits of the bytes before or after them.
 */
function base64Forms(secret: string): string[] {
  const bytes = new TextEncoder().encode(secret);
  const forms: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const padded = new Uint8Array(offset + bytes.length);
    padded.set(bytes, offset);
    let binary = "";
    for (const byte of padded) binary += String.fromCharCode(byte);
    const text = btoa(binary).replace(/=+$/, "");
    // A character holds 6 bits: those that hold a bit of a byte outside
    // the secret's are left out.
    const from = Math.ceil((offset * 8) / 6);
    const to = Math.floor((padded.length * 8) / 6);
    const form = text.slice(from, to);
    if (form.length < MIN_BASE64_FORM) continue;
    forms.push(form, form.replaceAll("+", "-").replaceAll("/", "_"));
  }
  return forms;
}
