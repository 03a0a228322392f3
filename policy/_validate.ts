/**
 * Entry checks shared by the policy functions, with messages shaped like
 * Deno std's: what could not be done, which argument, what it must be, and
 * the value that was given.
 *
 * @module
 */

/** Renders a rejected value for an error message, whatever its type. */
export function show(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "bigint") return `${value}n`;
  try {
    return typeof value === "object" && value !== null
      ? JSON.stringify(value) ?? String(value)
      : String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

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

/** Checks a whole number of milliseconds >= `min`. */
export function assertMs(
  what: string,
  name: string,
  value: unknown,
  min: number,
): void {
  if (!Number.isSafeInteger(value) || (value as number) < min) {
    throw new RangeError(
      `Cannot ${what} as '${name}' must be an integer number of milliseconds >= ${min}: current value is ${
        show(value)
      }`,
    );
  }
}
