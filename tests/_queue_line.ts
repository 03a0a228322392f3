/**
 * What the local Deno KV queue's line suites share: the service's ops
 * token, and queueing a job through `POST /v1/jobs`.
 *
 * @module
 */

import assert from "node:assert/strict";

/** The ops token the line suites' services run with. */
export const OPS = "queue-ops-token-0123456789";

/** Queues `intentId`'s settle job on `app` through `POST /v1/jobs` (202). */
export async function queueSettle(
  app: {
    request(path: string, init: RequestInit): Response | Promise<Response>;
  },
  intentId = "pi_0001",
): Promise<void> {
  const res = await app.request("/v1/jobs", {
    method: "POST",
    headers: { authorization: `Bearer ${OPS}` },
    body: JSON.stringify({ intentId, kind: "settle" }),
  });
  assert.equal(res.status, 202, await res.clone().text());
  await res.body?.cancel();
}
