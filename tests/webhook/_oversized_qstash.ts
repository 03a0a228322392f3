/**
 * What the tests of QStash messages over their route's limit share: the
 * intent their jobs name, a job padded to a size, QStash's failure
 * callback that carries one, and a POST signed as QStash signs it (which
 * the tests of unsigned headers send their deliveries with too).
 *
 * @module
 */

import type { NewIntent } from "../../mod.ts";
import { chunkedBody } from "./_app.ts";
import { QSTASH, signQStash } from "./_signing.ts";

/** The failure callback's URL QStash signs. */
export const FAILED_URL = `${QSTASH.url}/failed`;

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

/** What `post` sends to: an app. */
export type App = {
  request: (path: string, init: RequestInit) => Response | Promise<Response>;
};

/** A POST signed as QStash signs it, its length said or chunked. */
export async function post(
  app: App,
  path: string,
  body: string,
  options: {
    framing?: "length" | "chunked";
    messageId?: string;
    retried?: number;
    signature?: string;
  } = {},
): Promise<Response> {
  const framing = options.framing ?? "length";
  return await app.request(path, {
    method: "POST",
    body: framing === "length" ? body : chunkedBody(body),
    headers: {
      "content-type": "application/json",
      "upstash-signature": options.signature ??
        await signQStash(body, {
          url: path === "/v1/qstash" ? QSTASH.url : FAILED_URL,
        }),
      ...(options.messageId === undefined
        ? {}
        : { "upstash-message-id": options.messageId }),
      "upstash-retried": String(options.retried ?? 0),
      ...(framing === "length"
        ? {
          "content-length": String(new TextEncoder().encode(body).byteLength),
        }
        : { "transfer-encoding": "chunked" }),
    },
  });
}
