/**
 * Entry checks shared by the policy functions, with messages shaped like
 * Deno std's: what could not be done, which argument, what it must be, and
 * the value that was given.
 *
 * @module
 */

import { parseDuration } from "./parse_duration.ts";
import { show } from "./_show.ts";

export { show };

/**
 * Checks a delivery number: any finite integer >= 1 (a queue may report
 * 10^9 or more; the arithmetic copes), nothing else.
 */
export function assertDelivery(
  what: string,
  delivery: unknown,
): asserts delivery is number {
  if (!Number.isInteger(delivery) || (delivery as number) < 1) {
    throw new RangeError(
      `Cannot ${what} as 'delivery' must be an integer >= 1: current value is ${
        show(delivery)
      }`,
    );
  }
}

/**
 * Checks an options bag: an object (or `undefined` when `optional`) whose
 * own keys are all among `names`. A misspelt option (`leaseMS`,
 * `deadLetterQeue`) would otherwise fall back to its default in silence,
 * which TypeScript catches only in an object literal.
 */
export function assertOptionNames(
  what: string,
  options: unknown,
  names: readonly string[],
  { optional = false, example = "" }: {
    /** `undefined` is taken for no options. */
    optional?: boolean;
    /** Shown after "must be an object", such as `{ relayer, maxRetries }`. */
    example?: string;
  } = {},
): void {
  if (optional && options === undefined) return;
  if (typeof options !== "object" || options === null) {
    throw new TypeError(
      `Cannot ${what} as its options must be an object${
        example && ` such as ${example}`
      }: current value is ${options === null ? "null" : typeof options}`,
    );
  }
  for (const name of Object.keys(options)) {
    if (!names.includes(name)) {
      throw new TypeError(
        `Cannot ${what} as ${
          JSON.stringify(name.slice(0, 40))
        } is not one of its options (${names.join(", ")}): check its spelling`,
      );
    }
  }
}

/**
 * The longest delay a timer keeps (2^31 − 1 ms): `setTimeout` fires a
 * longer one at once, on every runtime.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * Checks a whole number of milliseconds >= `min`. A text (`"5s"`, as the
 * service's settings are written, read from a JSON file) is told of
 * `parseDuration`, which reads it; one it cannot read (`"abc"`) is told to
 * be a number, not sent to a call that refuses it too.
 */
export function assertMs(
  what: string,
  name: string,
  value: unknown,
  min: number,
): void {
  if (!Number.isSafeInteger(value) || (value as number) < min) {
    const text = typeof value !== "string"
      ? ""
      : readsAsDuration(value)
      ? `, a text: give a number (parseDuration(${
        show(value)
      }) reads a duration's text into milliseconds)`
      : ", a text that is no duration: give a number of milliseconds";
    throw new RangeError(
      `Cannot ${what} as '${name}' must be an integer number of milliseconds >= ${min}: current value is ${
        show(value)
      }${text}`,
    );
  }
}

/** Whether `parseDuration` reads `text` (on a refusal's path alone). */
function readsAsDuration(text: string): boolean {
  try {
    parseDuration(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Checks a source of randomness: a function (its outputs are clamped into
 * `[0, 1)` where they are used), nothing else.
 */
export function assertRandom(
  what: string,
  random: unknown,
): asserts random is () => number {
  if (typeof random !== "function") {
    throw new TypeError(
      `Cannot ${what} as 'random' must be a function returning numbers in [0, 1), such as Math.random: current value is ${
        show(random)
      }`,
    );
  }
}

/**
 * A clock's reading that is not whole milliseconds: a caller's mistake,
 * not a delivery's failure, so no policy decides on it (a delivery throws
 * it, whatever its number). Named `TypeError`, as it is one.
 */
export class ClockError extends TypeError {}

/**
 * A clock that checks each of its readings: whole milliseconds, as
 * `Date.now()` returns them, from 0 (1970) to the last instant a `Date`
 * can hold. A clock off by its type (`performance.now()`'s
 * fractions, a `Date`, `NaN`) would otherwise make a payment look stuck, or
 * fail on a store's refusal of a field the caller never set.
 */
export function checkedClock(
  what: string,
  clock: () => number,
): () => number {
  return () => {
    const at = clock();
    if (!Number.isSafeInteger(at)) {
      throw new ClockError(
        `Cannot ${what} as 'now' must return a whole number of milliseconds, as Date.now() does: it returned ${
          show(at)
        }`,
      );
    }
    if (at < 0 || at > MAX_DATE_MS) {
      // Whole milliseconds, but no time Date.now() returns: kept, it went
      // into the store as times no Date can show (a lease, a write-ahead,
      // a dead letter's poisonedAt).
      throw new ClockError(
        `Cannot ${what} as 'now' must return a time a Date can hold, in whole milliseconds from 0 (1970) to ${MAX_DATE_MS}, as Date.now() does: it returned ${
          show(at)
        }`,
      );
    }
    return at;
  };
}

/** The last instant a `Date` can hold, in milliseconds since 1970. */
const MAX_DATE_MS = 8_640_000_000_000_000;
