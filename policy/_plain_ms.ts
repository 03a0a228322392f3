/**
 * The refusal of a duration written as a plain number under a second,
 * shared by the service's settings and `deno task schedule`.
 *
 * @module
 */

/**
 * Why `text`, parsed as `ms`, is refused, or `undefined` if it is not: a
 * plain number from 1 to 999 is most likely seconds written without their
 * unit ("30" for 30s), and taken as milliseconds a `SENDER_TIMEOUT` of 30
 * would time out every send and put every payment in review.
 */
export function plainMsRefusal(
  name: string,
  text: string,
  ms: number,
): string | undefined {
  const plain = text.trim();
  if (!/^\d+$/.test(plain) || ms <= 0 || ms >= 1000) return undefined;
  return `${name} is ${
    JSON.stringify(text)
  }, a plain number, which would be ${ms} milliseconds: write ${plain}s for seconds, or ${plain}ms if you do mean milliseconds`;
}
