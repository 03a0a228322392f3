/**
 * Problem details (RFC 9457): every error the webhook answers, as
 * `application/problem+json`, and never a stack trace.
 *
 * @module
 */

import { jsonLine } from "./_json_answer.ts";

/** The fields of a problem. `type` is a stable URN callers can switch on. */
export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
}

/** A problem answer, with extra headers (`Retry-After`, `Allow`, QStash's non-retryable mark). */
export function problem(
  status: number,
  slug: string,
  title: string,
  detail: string,
  headers: Record<string, string> = {},
): Response {
  const body: Problem = {
    type: `urn:relayer:problem:${slug}`,
    title,
    status,
    detail,
  };
  return new Response(jsonLine(body), {
    status,
    headers: { "content-type": "application/problem+json", ...headers },
  });
}
