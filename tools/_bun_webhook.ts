/**
 * The webhook under real Bun: `createApp` served by `Bun.serve`, bundled by
 * `deno bundle` into one file (Bun ignores `deno.json`'s import map and
 * `npm:` specifiers) and run by `tools/bun_check.ts`. It sends itself, over
 * the socket, two signed deliveries (QStash's JWT, and the generic route's
 * `t=…,v1=…` HMAC), QStash's signed failure callback, a Pub/Sub push and a
 * push from Pub/Sub's dead-letter topic, with Google's RS256 tokens (a
 * local key pair, its JWKS served by a second `Bun.serve` in Google's
 * shape and fetched by `googleJwks`: once for both routes, and once more
 * for the forgery under Google's `kid`), and forgeries only the
 * signature check can refuse (a current timestamp with a wrong MAC, or
 * another secret's; a QStash token with the right claims signed with
 * another key; a Google token with the right claims and `kid` signed by
 * another RSA key); then bodies over the limit (a push acked 204 and a
 * QStash message answered 489, each kept as the dead letter Deno keeps, by
 * Content-Length or chunked in odd pieces) and a push whose client leaves
 * mid-body (no letter); then QStash bodies signed over their bytes: one
 * after a byte order mark taken as its job, one that is not UTF-8 answered
 * 489 and kept as an unreadable letter naming its intent, and its failure
 * callback keeping that letter; then `qstashPublisher` publishes a job to
 * a stand-in of QStash's API (beside Google's keys); prints one JSON line
 * per answer, and exits 0 when each is exactly the expected one.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { MemoryStore, ScriptedSender } from "../mod.ts";
import { createApp, googleJwks, qstashPublisher } from "../webhook/app.ts";
import { googleIssuer, signGeneric, signQStash } from "./_sign.ts";

/** The little of Bun this entry uses; Deno's types do not describe it. */
interface BunLike {
  readonly version: string;
  serve(options: {
    port: number;
    hostname: string;
    fetch: (request: Request) => Response | Promise<Response>;
  }): { readonly port: number; stop(force?: boolean): void };
}

const bun = (globalThis as unknown as { Bun?: BunLike }).Bun;
if (!bun) throw new Error("not running under Bun");

const SECRET = "bun-check-secret-0123456789";
const QSTASH_KEY = "sig_current_0123456789abcdef";
const QSTASH_URL = "https://relayer.example.test/v1/qstash";
const PUSH_AUDIENCE = "https://relayer.example.test/v1/pubsub";
const DEAD_LETTER_AUDIENCE = `${PUSH_AUDIENCE}/dead-letter`;
const SERVICE_ACCOUNT = "pusher@bun-check.iam.gserviceaccount.com";

const google = await googleIssuer();
// Another key pair under the same kid: its tokens differ from Google's
// only in their signature.
const forger = await googleIssuer();
// Google's key endpoint, in its shape (a JWKS, cached for max-age), and
// QStash's publish API, on a server of their own: googleJwks and
// qstashPublisher reach them with Bun's fetch.
let certsFetches = 0;
const publishes: unknown[][] = [];
const world = bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: async (request) => {
    const { pathname } = new URL(request.url);
    if (request.method === "POST" && pathname.startsWith("/v2/publish/")) {
      const header = (name: string) => request.headers.get(name);
      publishes.push([
        pathname,
        header("authorization"),
        header("upstash-retries"),
        header("upstash-failure-callback"),
        JSON.parse(await request.text()),
      ]);
      return Response.json({ messageId: "msg_bun_1" }, { status: 201 });
    }
    certsFetches++;
    return Response.json({ keys: google.jwks }, {
      headers: { "cache-control": "public, max-age=3600" },
    });
  },
});
const worldUrl = `http://127.0.0.1:${world.port}`;
const jwks = googleJwks({ url: `${worldUrl}/certs` });
const store = new MemoryStore();
await store.createIntent({ id: "pi_0001", state: "created" });
for (const id of ["pi_0002", "pi_0003"]) {
  await store.createIntent({ id, state: "authorized", hold: "pending" });
}
const app = createApp({
  store,
  sender: new ScriptedSender({}),
  webhookSecret: SECRET,
  qstash: {
    currentSigningKey: QSTASH_KEY,
    nextSigningKey: "sig_next_0123456789abcdef",
    url: QSTASH_URL,
  },
  pubsub: {
    audience: PUSH_AUDIENCE,
    jwks,
    serviceAccount: SERVICE_ACCOUNT,
  },
  pubsubDeadLetter: {
    audience: DEAD_LETTER_AUDIENCE,
    jwks,
    serviceAccount: SERVICE_ACCOUNT,
  },
  random: () => 0,
});
const server = bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: async (request) => {
    // A request that says so is read once its client has left (as one that
    // leaves during a token check does): the route then reads a cut body.
    if (request.headers.has("x-check-read-once-gone")) {
      await new Promise((gone) => setTimeout(gone, 300));
    }
    return await app.fetch(request);
  },
});
const base = `http://127.0.0.1:${server.port}`;

const retry = {
  outcome: "retry",
  job: "pi_0001/settle",
  delivery: 1,
  reason: "not authorized yet",
  delayMs: 2500,
};

/** The 401 problem the app answers a refused delivery with. */
const unauthorized = (detail: string) => ({
  type: "urn:relayer:problem:unauthorized",
  title: "Unauthorized",
  status: 401,
  detail,
});

let ok = true;
/**
 * POSTs to `route` and passes if the status, `Retry-After` and body (JSON,
 * or `null` for none) are exactly these.
 */
async function expect(
  route: string,
  init: RequestInit,
  status: number,
  retryAfter: string | null,
  expected: unknown,
): Promise<void> {
  const res = await fetch(`${base}${route}`, { method: "POST", ...init });
  const text = await res.text();
  const body = text === "" ? null : JSON.parse(text) as unknown;
  const pass = res.status === status &&
    res.headers.get("retry-after") === retryAfter &&
    JSON.stringify(body) === JSON.stringify(expected);
  ok &&= pass;
  console.log(
    JSON.stringify({
      bun: bun!.version,
      route,
      status: res.status,
      body,
      pass,
    }),
  );
}

/** Prints one check's line and counts it. */
function check(what: string, pass: boolean, seen: unknown): void {
  ok &&= pass;
  console.log(JSON.stringify({ bun: bun!.version, check: what, seen, pass }));
}

/**
 * The name of an unread body's letter: the relayer hashes what it is
 * given, the hex SHA-256 of the body's bytes, and keeps 32 hex digits.
 */
async function hashName(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const hex = async (data: Uint8Array<ArrayBuffer>) =>
    [...new Uint8Array(await crypto.subtle.digest("SHA-256", data))]
      .map((byte) => byte.toString(16).padStart(2, "0")).join("");
  return (await hex(new TextEncoder().encode(await hex(bytes)))).slice(0, 32);
}

/** `bytes` as a stream of pieces of `sizes` bytes in turn: Bun sends it chunked. */
function pieces(
  bytes: Uint8Array,
  sizes: readonly number[],
): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (let at = 0, i = 0; at < bytes.length; i++) {
        const size = sizes[i % sizes.length]!;
        controller.enqueue(bytes.slice(at, at + size));
        at += size;
      }
      controller.close();
    },
  });
}

/** The little of `node:net` the mid-body check uses (Bun has it). */
interface NodeNet {
  connect(port: number, host: string, onConnect: () => void): {
    write(data: string, done: () => void): void;
    destroy(): void;
    on(event: "close", listener: () => void): void;
  };
}

/**
 * Sends `head` and a part of the body its headers declare, then leaves;
 * resolves once the socket is closed.
 */
async function leaveMidBody(head: string, part: string): Promise<void> {
  // Named through a variable, so that `deno bundle` leaves it to Bun.
  const name = "node:net";
  const net = await import(name) as NodeNet;
  await new Promise<void>((closed) => {
    const socket = net.connect(
      server.port,
      "127.0.0.1",
      () => socket.write(head + part, () => socket.destroy()),
    );
    socket.on("close", () => closed());
  });
}

/**
 * Over the limit under Bun.serve: an authenticated push is acked (204) and a
 * QStash message answered 489 with `Upstash-NonRetryable-Error`, each kept
 * as the letter Deno keeps, sent with a Content-Length or chunked; a
 * client that leaves mid-body keeps nothing.
 */
async function overTheLimit(): Promise<void> {
  const encoder = new TextEncoder();
  const push = encoder.encode(JSON.stringify({
    message: {
      data: btoa(JSON.stringify({
        intentId: "pi_0002",
        kind: "settle",
        note: "x".repeat(100_000),
      })),
      messageId: "2070443601311541",
    },
    subscription: "projects/p/subscriptions/relayer",
  }));
  const pushLetter = `pubsub/sha256-${await hashName(push)}/unreadable`;
  const bearer = `Bearer ${await google.token(PUSH_AUDIENCE, SERVICE_ACCOUNT)}`;
  for (
    const [framing, body] of [
      ["content-length", push],
      ["chunked", pieces(push, [1, 7, 65_539])],
    ] as const
  ) {
    const res = await fetch(`${base}/v1/pubsub`, {
      method: "POST",
      body,
      headers: { authorization: bearer },
    });
    await res.body?.cancel();
    const letter = await store.getDeadLetter(pushLetter);
    check(
      `a push over the limit (${framing}): 204, kept as ${pushLetter}`,
      res.status === 204 && /over the limit/.test(letter?.reason ?? ""),
      { status: res.status, reason: letter?.reason ?? null },
    );
  }
  const message = "q".repeat(70_000);
  for (
    const [framing, body] of [
      ["content-length", message],
      ["chunked", pieces(encoder.encode(message), [3, 65_536, 11])],
    ] as const
  ) {
    const id = `msg_bun_check_big_${framing}`;
    const res = await fetch(`${base}/v1/qstash`, {
      method: "POST",
      body,
      headers: {
        "upstash-signature": await signQStash(message, QSTASH_URL, QSTASH_KEY),
        "upstash-message-id": id,
      },
    });
    await res.body?.cancel();
    const letter = await store.getDeadLetter(`qstash/${id}/unreadable`);
    check(
      `a QStash message over the limit (${framing}): 489, no retry, kept as qstash/${id}/unreadable`,
      res.status === 489 &&
        res.headers.get("upstash-nonretryable-error") === "true" &&
        /over the limit/.test(letter?.reason ?? ""),
      { status: res.status, reason: letter?.reason ?? null },
    );
  }
  const before = (await store.listDeadLetters({ limit: 1000 })).items.length;
  for (
    const framing of [
      "content-length: 1000",
      "content-length: 200000",
      "transfer-encoding: chunked",
    ]
  ) {
    await leaveMidBody(
      `POST /v1/pubsub HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${bearer}\r\nx-check-read-once-gone: 1\r\n${framing}\r\n\r\n`,
      framing.startsWith("transfer")
        ? `1f4\r\n${"x".repeat(500)}`
        : "x".repeat(500),
    );
  }
  await new Promise((done) => setTimeout(done, 600));
  const after = (await store.listDeadLetters({ limit: 1000 })).items.length;
  check(
    "a push whose client left mid-body keeps no letter",
    after === before,
    { letters: after - before },
  );
}

/**
 * QStash bodies signed over their bytes under Bun.serve: one with a byte
 * order mark is read as its job (503, as Deno answers); one with a byte
 * that is not UTF-8 (a Latin-1 "é") is answered 489 with
 * `Upstash-NonRetryable-Error` and kept as `qstash/<id>/unreadable`
 * naming its intent, sent with a Content-Length or chunked, and QStash's
 * failure callback for it keeps that letter naming the intent.
 */
async function notUtf8(): Promise<void> {
  const encoder = new TextEncoder();
  const job = JSON.stringify({ intentId: "pi_0001", kind: "settle" });
  const bom = new Uint8Array([0xef, 0xbb, 0xbf, ...encoder.encode(job)]);
  const withBom = await fetch(`${base}/v1/qstash`, {
    method: "POST",
    body: bom,
    headers: {
      "upstash-signature": await signQStash(bom, QSTASH_URL, QSTASH_KEY),
    },
  });
  const answer = await withBom.json() as { reason?: string };
  check(
    "a QStash job after a byte order mark, signed over its bytes: 503 retry",
    withBom.status === 503 && answer.reason === "not authorized yet",
    { status: withBom.status, reason: answer.reason ?? null },
  );
  const [before, after] = JSON.stringify({
    intentId: "pi_0001",
    kind: "settle",
    note: "caf",
  }).split("caf");
  const latin1 = new Uint8Array([
    ...encoder.encode(`${before}caf`),
    0xe9,
    ...encoder.encode(after),
  ]);
  for (
    const [framing, body] of [
      ["content-length", latin1],
      ["chunked", pieces(latin1, [5, 1, 3])],
    ] as const
  ) {
    const id = `msg_bun_check_latin1_${framing}`;
    const res = await fetch(`${base}/v1/qstash`, {
      method: "POST",
      body,
      headers: {
        "upstash-signature": await signQStash(latin1, QSTASH_URL, QSTASH_KEY),
        "upstash-message-id": id,
      },
    });
    await res.body?.cancel();
    const letter = await store.getDeadLetter(`qstash/${id}/unreadable`);
    check(
      `a QStash message signed over bytes that are not UTF-8 (${framing}): 489, no retry, kept as qstash/${id}/unreadable naming pi_0001`,
      res.status === 489 &&
        res.headers.get("upstash-nonretryable-error") === "true" &&
        /not UTF-8/.test(letter?.reason ?? "") &&
        letter?.intentId === "pi_0001",
      {
        status: res.status,
        reason: letter?.reason ?? null,
        intentId: letter?.intentId ?? null,
      },
    );
  }
  const id = "msg_bun_check_latin1_content-length";
  const callback = JSON.stringify({
    retried: 0,
    sourceMessageId: id,
    sourceBody: btoa(String.fromCharCode(...latin1)),
  });
  const failed = await fetch(`${base}/v1/qstash/failed`, {
    method: "POST",
    body: callback,
    headers: {
      "upstash-signature": await signQStash(
        callback,
        `${QSTASH_URL}/failed`,
        QSTASH_KEY,
      ),
    },
  });
  await failed.body?.cancel();
  const letter = await store.getDeadLetter(`qstash/${id}/unreadable`);
  check(
    `QStash's failure callback for it: 489, qstash/${id}/unreadable still names pi_0001`,
    failed.status === 489 && letter?.intentId === "pi_0001",
    { status: failed.status, intentId: letter?.intentId ?? null },
  );
}

try {
  const job = JSON.stringify({ intentId: "pi_0001", kind: "settle" });
  await expect(
    "/v1/qstash",
    {
      body: job,
      headers: {
        "upstash-signature": await signQStash(job, QSTASH_URL, QSTASH_KEY),
      },
    },
    503,
    "3",
    retry,
  );
  await expect(
    "/v1/qstash",
    {
      body: job,
      headers: {
        "upstash-signature": await signQStash(
          job,
          QSTASH_URL,
          "sig_someone_else_0123456789",
        ),
      },
    },
    401,
    null,
    unauthorized(
      "The Upstash-Signature header is missing or does not verify against this URL and body.",
    ),
  );
  const delivery = JSON.stringify({
    job: { intentId: "pi_0001", kind: "settle" },
    delivery: 1,
  });
  await expect(
    "/v1/deliveries",
    {
      body: delivery,
      headers: { "x-signature": await signGeneric(delivery, SECRET) },
    },
    503,
    "3",
    retry,
  );
  // Current timestamps: refused by comparing the MAC, not by the age check.
  const nowS = Math.floor(Date.now() / 1000);
  for (
    const signature of [
      `t=${nowS},v1=${"0".repeat(64)}`,
      await signGeneric(delivery, "another-secret-0123456789", nowS),
    ]
  ) {
    await expect(
      "/v1/deliveries",
      { body: delivery, headers: { "x-signature": signature } },
      401,
      null,
      unauthorized(
        `The X-Signature does not verify against this body and timestamp: send 'X-Signature: t=<unix seconds>,v1=<hex HMAC-SHA-256 of "<t>.<raw body>" with WEBHOOK_SECRET>'.`,
      ),
    );
  }
  const failed = JSON.stringify({
    status: 503,
    retried: 9,
    dlqId: "dlq_bun_check",
    sourceMessageId: "msg_bun_check",
    sourceBody: btoa(JSON.stringify({ intentId: "pi_0002", kind: "settle" })),
  });
  await expect(
    "/v1/qstash/failed",
    {
      body: failed,
      headers: {
        "upstash-signature": await signQStash(
          failed,
          `${QSTASH_URL}/failed`,
          QSTASH_KEY,
        ),
      },
    },
    200,
    null,
    {
      outcome: "poison",
      job: "pi_0002/settle",
      delivery: 10,
      reason: "the queue gave up after 10 deliveries",
      resolution: "job dropped, intent still authorized",
    },
  );
  const push = JSON.stringify({
    message: { data: btoa(job), messageId: "2070443601311540" },
    subscription: "projects/p/subscriptions/relayer",
    deliveryAttempt: 2,
  });
  await expect(
    "/v1/pubsub",
    {
      body: push,
      headers: {
        authorization: `Bearer ${await google.token(
          PUSH_AUDIENCE,
          SERVICE_ACCOUNT,
        )}`,
      },
    },
    503,
    null,
    {
      ...retry,
      delivery: 2,
      delayMs: 5000,
      note:
        "Pub/Sub waits by its subscription's retry policy; delayMs is what this policy asked for",
    },
  );
  await expect(
    "/v1/pubsub",
    {
      body: push,
      headers: {
        authorization: `Bearer ${await forger.token(
          PUSH_AUDIENCE,
          SERVICE_ACCOUNT,
        )}`,
      },
    },
    401,
    null,
    unauthorized(
      "Send Google's OIDC token for this audience as 'Authorization: Bearer <token>'.",
    ),
  );
  await expect(
    "/v1/pubsub/dead-letter",
    {
      body: JSON.stringify({
        message: {
          data: btoa(JSON.stringify({ intentId: "pi_0003", kind: "settle" })),
          messageId: "9182736450",
          attributes: { CloudPubSubDeadLetterSourceDeliveryCount: "10" },
        },
        subscription: "projects/p/subscriptions/relayer-dead-letter",
      }),
      headers: {
        authorization: `Bearer ${await google.token(
          DEAD_LETTER_AUDIENCE,
          SERVICE_ACCOUNT,
        )}`,
      },
    },
    204,
    null,
    null,
  );
  const letter = await store.getDeadLetter("pi_0003/settle");
  const kept = letter?.cause === "exhausted" &&
    letter.resolution === "job dropped, intent still authorized" &&
    JSON.stringify(letter.queue) ===
      JSON.stringify({ queue: "pubsub", messageId: "9182736450" });
  ok &&= kept;
  console.log(JSON.stringify({ deadLetter: letter, pass: kept }));
  // The readiness probe: a store read raced against a timer.
  const ready = await fetch(`${base}/readyz`);
  const readyText = await ready.text();
  // Its line: the JSON, then a newline, as every answer ends (curl).
  const isReady = ready.status === 200 &&
    readyText === `${JSON.stringify({ status: "ready" })}\n`;
  ok &&= isReady;
  console.log(
    JSON.stringify({ route: "/readyz", status: ready.status, pass: isReady }),
  );
  // HEAD's Content-Length is its GET's (RFC 9110 §9.3.2), and no body.
  const head = await fetch(`${base}/readyz`, { method: "HEAD" });
  const headBody = await head.text();
  const length = String(new TextEncoder().encode(readyText).byteLength);
  check(
    "HEAD /readyz",
    head.status === 200 && head.headers.get("content-length") === length &&
      headBody === "",
    {
      status: head.status,
      contentLength: head.headers.get("content-length"),
      getLength: length,
      body: headBody,
    },
  );
  await overTheLimit();
  await notUtf8();
  // A job published through QStash's API, as POST /v1/jobs and a redrive do.
  const publisher = qstashPublisher({
    token: "qstash-token-for-bun",
    publicUrl: "https://relayer.example.test",
    retries: 9,
    baseUrl: worldUrl,
  });
  const published = await publisher.publish({
    intentId: "pi_0001",
    kind: "settle",
  }).catch((error: Error) => ({ error: error.message }));
  const expected = [[
    "/v2/publish/https://relayer.example.test/v1/qstash",
    "Bearer qstash-token-for-bun",
    "9",
    "https://relayer.example.test/v1/qstash/failed",
    { intentId: "pi_0001", kind: "settle" },
  ]];
  check(
    "qstashPublisher published one job to QStash's API, its retries and failure callback set",
    JSON.stringify(published) === JSON.stringify({ messageId: "msg_bun_1" }) &&
      JSON.stringify(publishes) === JSON.stringify(expected),
    { published, publishes },
  );
  // Every push above verified with the keys googleJwks fetched: once, and
  // once more for the token another key signed under Google's kid (a key
  // Google may have published under an old id), as the verifier asks.
  check(
    "Google's keys fetched by googleJwks, and again once for the forgery under their kid",
    certsFetches === 2,
    { fetches: certsFetches },
  );
} finally {
  server.stop(true);
  world.stop(true);
}
(globalThis as unknown as { process: { exit(code: number): never } }).process
  .exit(ok ? 0 : 1);
