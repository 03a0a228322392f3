/**
 * Counts in words, for the texts of refusals and verdicts.
 *
 * @module
 */

/**
 * `"1 delivery"`, `"2 deliveries"`.
 *
 * ```ts ignore
 * deliveriesText(1); // "1 delivery"
 * deliveriesText(9); // "9 deliveries"
 * ```
 */
export function deliveriesText(n: number): string {
  return `${n} ${n === 1 ? "delivery" : "deliveries"}`;
}
