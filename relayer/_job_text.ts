import { isIntentId } from "../store/_rules.ts";

/**
 * The intent id of a job sent as a JSON text of itself (encoded twice: a
 * bridge or publisher that serializes the job, then the message around
 * it), or `undefined`. Only a text that parses to a job as it stands
 * (`{ intentId, kind: "settle" }`, an object with a valid intent id) names
 * its intent: a text of anything else (a job misspelt, an intent id
 * alone, a text encoded three times) names none, so a dead letter never
 * names an intent its message did not.
 */
export function intentIdInText(job: unknown): string | undefined {
  if (typeof job !== "string") return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(job);
  } catch {
    return undefined;
  }
  if (
    typeof parsed !== "object" || parsed === null || Array.isArray(parsed)
  ) return undefined;
  const { intentId, kind } = parsed as Record<string, unknown>;
  return isIntentId(intentId) && kind === "settle" ? intentId : undefined;
}

/**
 * What an unreadable message names as its intent: its `intentId` where it
 * is an object, the intent of a job encoded twice
 * ({@linkcode intentIdInText}) where it is a text, else nothing.
 */
export function intentIdSeen(job: unknown): unknown {
  if (typeof job === "object" && job !== null) {
    return (job as Record<string, unknown>).intentId;
  }
  return intentIdInText(job);
}
