/**
 * A Worker for `deno task worker-check`'s publish step: `qstashPublisher`
 * on workerd, built in the Worker's global scope (where Workers forbid
 * I/O and timers), publishing through the platform's `fetch` to a QStash
 * that Miniflare's outbound service stands in for at `https://qstash.test`.
 *
 * Route (the check's only; nothing here is for production): `POST
 * /publish/<case>` publishes `pi_0001/settle` through the publisher whose
 * `publicUrl` ends in `<case>` (`ok`, `limited`, `slow`), and answers
 * `{ messageId }`, or `{ error, retryAfterMs, ms }` with how long the
 * publish took.
 *
 * @module
 */

import { qstashPublisher } from "../webhook/qstash_publisher.ts";

/** The bound of a publish here: the check's slow QStash answers after it. */
const TIMEOUT_MS = 300;

// In global scope, as a Worker builds its app: this must do no I/O.
const publishers = new Map(
  ["ok", "limited", "slow"].map((name) => [
    name,
    qstashPublisher({
      token: "qstash-token-for-workerd",
      publicUrl: `https://relayer.example.test/${name}`,
      retries: 9,
      baseUrl: "https://qstash.test",
      timeoutMs: TIMEOUT_MS,
    }),
  ]),
);

async function fetch(request: Request): Promise<Response> {
  const { pathname } = new URL(request.url);
  const publisher = publishers.get(pathname.replace(/^\/publish\//, ""));
  if (request.method !== "POST" || publisher === undefined) {
    return new Response("not found", { status: 404 });
  }
  const started = Date.now();
  try {
    return Response.json(
      await publisher.publish({ intentId: "pi_0001", kind: "settle" }),
    );
  } catch (error) {
    return Response.json({
      error: error instanceof Error ? error.message : String(error),
      retryAfterMs: (error as { retryAfterMs?: number }).retryAfterMs ?? null,
      ms: Date.now() - started,
    });
  }
}

export default { fetch };
