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
  return intentIdOfJob(parsed);
}

/** The intent id of a job as it stands (`{ intentId, kind: "settle" }`), or `undefined`. */
function intentIdOfJob(value: unknown): string | undefined {
  if (
    typeof value !== "object" || value === null || Array.isArray(value)
  ) return undefined;
  const { intentId, kind } = value as Record<string, unknown>;
  return isIntentId(intentId) && kind === "settle" ? intentId : undefined;
}

/**
 * What an unreadable message names as its intent: its `intentId` where it
 * is an object; where it has none, the intent of a job as it stands in its
 * `job` (a job wrapped in `{"job": …}`, the body `POST /v1/deliveries`
 * takes, sent to a queue that takes the job itself); the intent of a job
 * encoded twice ({@linkcode intentIdInText}) where it is a text; else
 * nothing.
 */
export function intentIdSeen(job: unknown): unknown {
  if (typeof job === "object" && job !== null) {
    const { intentId, job: inner } = job as Record<string, unknown>;
    return intentId === undefined ? intentIdOfJob(inner) : intentId;
  }
  return intentIdInText(job);
}
