/**
 * What the tests of QStash messages over their route's limit share: the
 * intent their jobs name, a job padded to a size, and QStash's failure
 * callback that carries one.
 *
 * @module
 */

import type { NewIntent } from "../../mod.ts";
import { QSTASH } from "./_signing.ts";

/** The intent the padded jobs name: authorized, its hold pending. */
export const authorized: NewIntent = {
  id: "pi_0002",
  state: "authorized",
  hold: "pending",
};

/** A job padded by an extra field to `size` bytes. */
export function job(size: number): string {
  const base = JSON.stringify({
    intentId: "pi_0002",
    kind: "settle",
    note: "",
  });
  return JSON.stringify({
    intentId: "pi_0002",
    kind: "settle",
    note: "x".repeat(size - base.length),
  });
}

/** QStash's failure callback for `source`, its fields in QStash's order, `status` and `retried` as given. */
export function failureCallback(
  source: string,
  messageId: string,
  { status, retried }: { status: number; retried: number },
): string {
  return JSON.stringify({
    status,
    header: { "Content-Type": ["application/problem+json"] },
    body: btoa('{"type":"urn:relayer:problem:too-large"}'),
    retried,
    maxRetries: 3,
    sourceMessageId: messageId,
    url: QSTASH.url,
    method: "POST",
    sourceHeader: { "Content-Type": ["application/json"] },
    sourceBody: btoa(source),
    createdAt: 1_700_000_000_000,
  });
}
