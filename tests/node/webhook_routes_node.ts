/**
 * Every delivery route on Node, with Node's own test runner: the
 * service as `main.ts` and the Worker build it (`loadConfig`,
 * `routeOptions`, `HttpSender`, `qstashPublisher`), served by
 * `@hono/node-server` on a loopback port, answers a signed QStash delivery,
 * a signed generic delivery, QStash's failure callback, a Pub/Sub push and a push from Pub/Sub's
 * dead-letter topic, and publishes a job through QStash. It refuses
 * forgeries that only the signature check can catch: a generic delivery
 * with a current timestamp and a wrong MAC (or another secret's), a QStash
 * token with the right claims signed with another key, and a Google token
 * with the right claims and `kid` signed by another RSA key. What the service
 * calls out to is one `node:http` server on another loopback port: the
 * signer (`HttpSender`'s protocol, as `examples/signer_stub.ts` speaks it),
 * Google's keys (fetched by `googleJwks`) and QStash's publish API.
 * `deno task node-check` bundles this file and runs it under `node --test`
 * on each Node it proves (Node 20 from PATH, its pinned LTS lines from npm).
 *
 * @module
 */

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { serve } from "@hono/node-server";
import { HttpSender, MemoryStore } from "../../mod.ts";
import {
  createApp,
  googleJwks,
  loadConfig,
  qstashPublisher,
  routeOptions,
} from "../../webhook/app.ts";
import {
  envelope,
  fakeGoogle,
  type Google,
  signHmac,
  signQStash,
} from "../webhook/_signing.ts";

/** The little of Node's `process` this file uses; Deno's types do not describe it. */
const process = (globalThis as unknown as {
  process: { version: string; env: Record<string, string | undefined> };
}).process;

const PUBLIC_URL = "https://relayer.example.test";
const OPS = "ops-token-for-node-0123";
const SECRET = "webhook-secret-for-node-0123";
const QSTASH_KEY = "sig_current_0123456789abcdef";
const QSTASH_TOKEN = "qstash-token-for-node-0123";
const SERVICE_ACCOUNT = "pusher@project.iam.gserviceaccount.com";
const PUSH_AUDIENCE = `${PUBLIC_URL}/v1/pubsub`;
const DEAD_LETTER_AUDIENCE = `${PUBLIC_URL}/v1/pubsub/dead-letter`;

/** What the outside world was asked, in order. */
interface Call {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

const calls: Call[] = [];
let google: Google;
let outside: Server;
let service: { close(callback?: () => void): unknown };
let base = "";
let store: MemoryStore;
/** How many requests the service's handler has not answered yet. */
let inFlight = 0;

/** The signer, Google's keys and QStash's publish API, over `node:http`. */
function answerOutside(call: Call): { status: number; json: unknown } {
  if (call.method === "POST" && call.path === "/send") {
    const { intentId } = JSON.parse(call.body) as { intentId: string };
    if (intentId.endsWith("_notsent")) {
      return {
        status: 400,
        json: { error: "chain id mismatch", notSent: true, poison: true },
      };
    }
    return { status: 200, json: { txHash: `0x${intentId.slice(3)}` } };
  }
  if (call.method === "GET" && call.path.startsWith("/receipt/")) {
    return { status: 200, json: { status: "confirmed" } };
  }
  if (call.method === "GET" && call.path === "/certs") {
    return { status: 200, json: { keys: google.jwks } };
  }
  if (call.method === "POST" && call.path.startsWith("/v2/publish/")) {
    return { status: 201, json: { messageId: "msg_node_1" } };
  }
  return { status: 404, json: { error: "not found" } };
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) =>
    server.listen(
      0,
      "127.0.0.1",
      () => resolve((server.address() as AddressInfo).port),
    )
  );
}

before(async () => {
  google = await fakeGoogle();
  outside = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (body += chunk));
    req.on("end", () => {
      const call = {
        method: req.method ?? "",
        path: decodeURIComponent(req.url ?? ""),
        headers: req.headers,
        body,
      };
      calls.push(call);
      const { status, json } = answerOutside(call);
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(json));
    });
  });
  const world = `http://127.0.0.1:${await listen(outside)}`;

  const config = loadConfig({
    SENDER_URL: world,
    QSTASH_CURRENT_SIGNING_KEY: QSTASH_KEY,
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789abcdef",
    PUBLIC_URL,
    QSTASH_TOKEN,
    QSTASH_URL: world,
    PUBSUB_AUDIENCE: PUSH_AUDIENCE,
    PUBSUB_DEAD_LETTER_AUDIENCE: DEAD_LETTER_AUDIENCE,
    PUBSUB_MAX_DELIVERY_ATTEMPTS: "10", // the dead-letter policy's
    PUBSUB_SERVICE_ACCOUNT: SERVICE_ACCOUNT,
    PUBSUB_MIN_BACKOFF: "40s", // the default policy needs 33.889s (CLOCK_SKEW 5s)
    OPS_TOKEN: OPS,
    WEBHOOK_SECRET: SECRET,
  });
  store = new MemoryStore();
  for (
    const id of ["pi_0001", "pi_0002", "pi_0004", "pi_0005_notsent", "pi_0007"]
  ) {
    await store.createIntent({ id, state: "authorized", hold: "pending" });
  }
  await store.createIntent({ id: "pi_0003", state: "created" });
  await store.createIntent({ id: "pi_0006", state: "created" });
  const publisher = qstashPublisher({
    ...config.qstashPublish!,
    retries: config.queues.qstash.retries,
  });
  const app = createApp({
    store,
    sender: new HttpSender(config.sender),
    policy: config.policy,
    random: () => 0,
    ...routeOptions(config, { jwks: googleJwks({ url: `${world}/certs` }) }),
    enqueue: async (job) => void await publisher.publish(job),
  });
  const port = await new Promise<number>((resolve) => {
    const counted = async (request: Request) => {
      inFlight++;
      try {
        if (request.headers.has("x-test-read-once-gone")) {
          // The route reads the body once the client has left (as one that
          // leaves during a token check, or a fetch of Google's keys, does):
          // it leaves at once, and its signal may never say so (it left
          // before @hono/node-server listened for it).
          await new Promise((gone) => setTimeout(gone, 300));
        }
        return await app.fetch(request);
      } finally {
        inFlight--;
      }
    };
    service = serve(
      { fetch: counted, port: 0, hostname: "127.0.0.1" },
      (info) => resolve(info.port),
    );
  });
  base = `http://127.0.0.1:${port}`;
});

after(() => {
  service?.close();
  outside?.close();
  // Keep-alive sockets would hold the servers open past the last test.
  (outside as unknown as { closeAllConnections?: () => void })
    ?.closeAllConnections?.();
});

/** POSTs `body` to `path` on the service; the answer's status, headers and body. */
async function post(
  path: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Headers; body: string }> {
  const res = await fetch(`${base}${path}`, {
    method: "POST",
    body,
    headers: { "content-type": "application/json", ...headers },
  });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

const json = (text: string): unknown => JSON.parse(text);

test("the runtime is the Node node-check meant to run", () => {
  // node-check names the Node it starts: a run under another (a PATH that
  // found the wrong one) would prove nothing about the one it names.
  assert.match(process.env.RELAYER_NODE_VERSION ?? "", /^v\d+\.\d+\.\d+/);
  assert.equal(process.version, process.env.RELAYER_NODE_VERSION);
  // And so is a `node` a suite starts by name: its folder is first on PATH.
  assert.equal(
    execFileSync("node", ["--version"], { encoding: "utf8" }).trim(),
    process.version,
  );
});

test("POST /v1/qstash, signed: HttpSender asks the signer (node:http), then its receipt", async () => {
  const job = JSON.stringify({ intentId: "pi_0001", kind: "settle" });
  const url = `${PUBLIC_URL}/v1/qstash`;
  const first = await post("/v1/qstash", job, {
    "upstash-signature": await signQStash(job, { key: QSTASH_KEY, url }),
  });
  assert.equal(first.status, 503);
  assert.equal(first.headers.get("retry-after"), "3");
  assert.deepEqual(json(first.body), {
    outcome: "retry",
    job: "pi_0001/settle",
    delivery: 1,
    reason: "sent 0x0001, waiting for confirmation",
    delayMs: 2500,
  });
  const second = await post("/v1/qstash", job, {
    "upstash-signature": await signQStash(job, { key: QSTASH_KEY, url }),
    "upstash-retried": "1",
  });
  assert.equal(second.status, 200);
  assert.deepEqual(json(second.body), {
    outcome: "done",
    job: "pi_0001/settle",
    delivery: 2,
    reason: "0x0001 confirmed, intent settled",
  });
  const intent = await store.getIntent("pi_0001");
  assert.deepEqual([intent?.state, intent?.hold], ["settled", "captured"]);
  const signer = calls.filter((c) => !c.path.startsWith("/certs"));
  assert.deepEqual(
    signer.slice(0, 2).map((c) => `${c.method} ${c.path}`),
    ["POST /send", "GET /receipt/0x0001"],
  );
  assert.equal(signer[0]!.headers["content-type"], "application/json");
  assert.deepEqual(JSON.parse(signer[0]!.body).intentId, "pi_0001");

  const unsigned = await post("/v1/qstash", job, {});
  assert.equal(unsigned.status, 401);
  assert.equal(
    unsigned.headers.get("content-type"),
    "application/problem+json",
  );
});

test("POST /v1/qstash: a token with QStash's claims for this URL and body, signed with another key: 401, nothing sent", async () => {
  const job = JSON.stringify({ intentId: "pi_0007", kind: "settle" });
  const sends = calls.filter((c) => c.path === "/send").length;
  const forged = await post("/v1/qstash", job, {
    "upstash-signature": await signQStash(job, {
      key: "sig_someone_else_0123456789",
      url: `${PUBLIC_URL}/v1/qstash`,
    }),
  });
  assert.equal(forged.status, 401);
  assert.equal(
    (json(forged.body) as { detail: string }).detail,
    "The Upstash-Signature header is missing or does not verify against this URL and body.",
  );
  assert.equal(calls.filter((c) => c.path === "/send").length, sends);
  assert.equal((await store.getIntent("pi_0007"))?.state, "authorized");
});

test("POST /v1/qstash, signed: a signer's declared poison fails the intent and voids its hold", async () => {
  const job = JSON.stringify({ intentId: "pi_0005_notsent", kind: "settle" });
  const res = await post("/v1/qstash", job, {
    "upstash-signature": await signQStash(job, {
      key: QSTASH_KEY,
      url: `${PUBLIC_URL}/v1/qstash`,
    }),
  });
  assert.equal(res.status, 200);
  assert.deepEqual(json(res.body), {
    outcome: "poison",
    job: "pi_0005_notsent/settle",
    delivery: 1,
    reason: "retrying will not help",
    resolution: "nothing was sent, so the intent failed",
  });
  const intent = await store.getIntent("pi_0005_notsent");
  assert.deepEqual([intent?.state, intent?.hold], ["failed", "voided"]);
});

test("POST /v1/deliveries, signed t=…,v1=…; badly signed, with a current timestamp: 401", async () => {
  const body = JSON.stringify({
    job: { intentId: "pi_0006", kind: "settle" },
    delivery: 1,
  });
  const res = await post("/v1/deliveries", body, {
    "x-signature": signHmac(SECRET, body),
  });
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("retry-after"), "3");
  assert.deepEqual(json(res.body), {
    outcome: "retry",
    job: "pi_0006/settle",
    delivery: 1,
    reason: "not authorized yet",
    delayMs: 2500,
  });
  const malformed = await post("/v1/deliveries", body, {
    "x-signature": "t=1,v1=00",
  });
  assert.equal(malformed.status, 401);
  assert.equal(
    malformed.headers.get("content-type"),
    "application/problem+json",
  );
  // Current timestamps, so the refusal comes from comparing the MAC: a
  // wrong one, and one signed with another secret.
  const nowS = Math.floor(Date.now() / 1000);
  for (
    const [name, signature] of [
      ["a wrong MAC", `t=${nowS},v1=${"0".repeat(64)}`],
      ["another secret", signHmac("another-secret-for-node-0123", body, nowS)],
    ]
  ) {
    const bad = await post("/v1/deliveries", body, {
      "x-signature": signature!,
    });
    assert.equal(bad.status, 401, name);
    assert.equal(bad.headers.get("content-type"), "application/problem+json");
    assert.match(
      (json(bad.body) as { detail: string }).detail,
      /^The X-Signature does not verify against this body and timestamp/,
      name,
    );
  }
  assert.equal((await store.getIntent("pi_0006"))?.state, "created");
});

test("POST /v1/qstash/failed, signed: QStash gave up, so the job is poisoned and the intent resolved", async () => {
  const body = JSON.stringify({
    status: 503,
    retried: 9,
    maxRetries: 9,
    dlqId: "dlq_node_1",
    sourceMessageId: "msg_node_source",
    url: `${PUBLIC_URL}/v1/qstash`,
    sourceBody: btoa(JSON.stringify({ intentId: "pi_0002", kind: "settle" })),
  });
  const res = await post("/v1/qstash/failed", body, {
    "upstash-signature": await signQStash(body, {
      key: QSTASH_KEY,
      url: `${PUBLIC_URL}/v1/qstash/failed`,
    }),
  });
  assert.equal(res.status, 200);
  assert.deepEqual(json(res.body), {
    outcome: "poison",
    job: "pi_0002/settle",
    delivery: 10,
    reason: "the queue gave up after 10 deliveries",
    resolution: "job dropped, intent still authorized",
  });
  const letter = await store.getDeadLetter("pi_0002/settle");
  assert.deepEqual([letter?.cause, letter?.queue], ["exhausted", {
    queue: "qstash",
    messageId: "msg_node_source",
    dlqId: "dlq_node_1",
  }]);
});

test("POST /v1/pubsub: Google's RS256 token, checked against keys fetched over node:http", async () => {
  const push = envelope({ intentId: "pi_0003", kind: "settle" }, {
    deliveryAttempt: 1,
  });
  const res = await post("/v1/pubsub", push, {
    authorization: `Bearer ${await google.token({ aud: PUSH_AUDIENCE })}`,
  });
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("retry-after"), null);
  assert.deepEqual(json(res.body), {
    outcome: "retry",
    job: "pi_0003/settle",
    delivery: 1,
    reason: "not authorized yet",
    delayMs: 2500,
    note:
      "Pub/Sub waits by its subscription's retry policy; delayMs is what this policy asked for",
  });
  assert.equal(calls.filter((c) => c.path === "/certs").length, 1);

  // A token for the dead-letter audience does not open the push route.
  const wrong = await post("/v1/pubsub", push, {
    authorization: `Bearer ${await google.token({
      aud: DEAD_LETTER_AUDIENCE,
    })}`,
  });
  assert.equal(wrong.status, 401);
  assert.equal(wrong.headers.get("content-type"), "application/problem+json");

  // Google's claims and the kid of the keys the service fetched, signed by
  // another RSA key: only the signature tells it apart.
  const forger = await fakeGoogle();
  const forgedToken = await forger.token({ aud: PUSH_AUDIENCE });
  assert.equal(
    JSON.parse(
      atob(
        forgedToken.split(".")[0]!.replaceAll("-", "+").replaceAll("_", "/"),
      ),
    ).kid,
    (google.jwks[0] as { kid?: string }).kid,
  );
  const forged = await post("/v1/pubsub", push, {
    authorization: `Bearer ${forgedToken}`,
  });
  assert.equal(forged.status, 401);
  assert.equal(
    (json(forged.body) as { detail: string }).detail,
    "Send Google's OIDC token for this audience as 'Authorization: Bearer <token>'.",
  );
});

test("POST /v1/pubsub/dead-letter: Pub/Sub gave up, so the job is poisoned and the intent resolved", async () => {
  const push = JSON.stringify({
    message: {
      data: btoa(JSON.stringify({ intentId: "pi_0004", kind: "settle" })),
      messageId: "9182736450",
      publishTime: "2026-11-30T12:00:00.000Z",
      attributes: { CloudPubSubDeadLetterSourceDeliveryCount: "10" },
    },
    subscription: "projects/p/subscriptions/relayer-dead-letter",
  });
  const res = await post("/v1/pubsub/dead-letter", push, {
    authorization: `Bearer ${await google.token({
      aud: DEAD_LETTER_AUDIENCE,
    })}`,
  });
  assert.equal(res.status, 204);
  assert.equal(res.body, "");
  const letter = await store.getDeadLetter("pi_0004/settle");
  assert.deepEqual(
    [letter?.cause, letter?.reason, letter?.resolution, letter?.queue],
    [
      "exhausted",
      "the queue gave up after 10 deliveries",
      "job dropped, intent still authorized",
      { queue: "pubsub", messageId: "9182736450" },
    ],
  );
});

test("POST /v1/jobs publishes through QStash's API with the retries and the failure callback", async () => {
  const res = await post(
    "/v1/jobs",
    JSON.stringify({ intentId: "pi_0003", kind: "settle" }),
    { authorization: `Bearer ${OPS}` },
  );
  assert.equal(res.status, 202);
  assert.deepEqual(json(res.body), {
    job: "pi_0003/settle",
    jobId: "pi_0003/settle",
    enqueued: true,
  });
  const published = calls.filter((c) => c.path.startsWith("/v2/publish/"));
  assert.equal(published.length, 1);
  const [call] = published;
  assert.deepEqual(
    [
      call!.method,
      call!.path,
      call!.headers.authorization,
      call!.headers["upstash-retries"],
      call!.headers["upstash-failure-callback"],
      JSON.parse(call!.body),
    ],
    [
      "POST",
      `/v2/publish/${PUBLIC_URL}/v1/qstash`,
      `Bearer ${QSTASH_TOKEN}`,
      "9",
      `${PUBLIC_URL}/v1/qstash/failed`,
      { intentId: "pi_0003", kind: "settle" },
    ],
  );
});

test("qstashPublisher() on Node: a 429 says when to try again, a publish past timeoutMs is aborted (QStash's end sees its request closed), and an unreachable QStash says why", async () => {
  let closed = 0;
  const qstash = createServer((req, res) => {
    req.resume();
    if (req.url?.includes("/limited/")) {
      res.writeHead(429, { "retry-after": "7" });
      res.end("too many requests");
      return;
    }
    // Never answered: only the publisher's abort ends it.
    res.on("close", () => void closed++);
  });
  const url = `http://127.0.0.1:${await listen(qstash)}`;
  const publisher = (path: string) =>
    qstashPublisher({
      token: QSTASH_TOKEN,
      publicUrl: `https://relayer.example.test/${path}`,
      retries: 9,
      baseUrl: url,
      timeoutMs: 200,
    });
  const job = { intentId: "pi_0001", kind: "settle" } as const;
  try {
    await assert.rejects(
      publisher("limited").publish(job),
      (error: Error & { retryAfterMs?: number }) =>
        /\(HTTP 429\): rate-limited by QStash's rate limit; try again in 7 s/
          .test(error.message) && error.retryAfterMs === 7_000,
    );
    await assert.rejects(publisher("slow").publish(job), /within 200 ms/);
    // Nothing listens: Node's "fetch failed" says why.
    const gone = createServer();
    const port = await listen(gone);
    await new Promise((resolve) => gone.close(resolve));
    await assert.rejects(
      qstashPublisher({
        token: QSTASH_TOKEN,
        publicUrl: "https://relayer.example.test",
        retries: 9,
        baseUrl: `http://127.0.0.1:${port}`,
      }).publish(job),
      /^Error: QStash did not answer the publish of pi_0001\/settle \(fetch failed \(.*ECONNREFUSED.*\)\): it may have taken the job or not/,
    );
    const deadline = Date.now() + 3_000;
    while (closed === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(closed, 1, "the request was still open 3 s after its bound");
  } finally {
    qstash.close();
    (qstash as unknown as { closeAllConnections?: () => void })
      .closeAllConnections?.();
  }
});

test("GET /readyz reads the store (200), HEAD answers its Content-Length, and DELETE discards the dead letter of the failed intent", async () => {
  const ready = await fetch(`${base}/readyz`);
  assert.equal(ready.status, 200);
  const readyBody = await ready.text();
  assert.deepEqual(JSON.parse(readyBody), { status: "ready" });
  // HEAD's Content-Length is its GET's (RFC 9110 §9.3.2), through
  // @hono/node-server's node:http too, and no body.
  const head = await fetch(`${base}/readyz`, { method: "HEAD" });
  assert.equal(head.status, 200);
  assert.equal(
    head.headers.get("content-length"),
    String(new TextEncoder().encode(readyBody).byteLength),
  );
  assert.equal(await head.text(), "");
  // The letter the declared poison kept above: its intent failed.
  const letter = await store.getDeadLetter("pi_0005_notsent/settle");
  assert.ok(letter !== null);
  const discarded = await fetch(
    `${base}/v1/dead-letters/pi_0005_notsent/settle?version=${
      encodeURIComponent(letter.version)
    }`,
    { method: "DELETE", headers: { authorization: `Bearer ${OPS}` } },
  );
  assert.equal(discarded.status, 200);
  assert.equal(
    ((await discarded.json()) as { discarded: { jobId: string } }).discarded
      .jobId,
    "pi_0005_notsent/settle",
  );
  assert.equal(await store.getDeadLetter("pi_0005_notsent/settle"), null);
});

/** The answer `rawPost` read: its status line's code, headers and body. */
interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/**
 * POSTs over a socket of its own, `pieces` each written alone (as a socket
 * splits a body), and reads until the service closes it; `abort` closes
 * it after the pieces instead, and resolves once it is closed.
 */
function rawPost(
  path: string,
  headers: Record<string, string>,
  pieces: readonly Uint8Array[],
  abort = false,
): Promise<RawAnswer | null> {
  const { port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), "127.0.0.1");
    const received: Uint8Array[] = [];
    socket.on("data", (data: Uint8Array) => received.push(data));
    socket.on("error", reject);
    socket.on("close", () => {
      if (abort) return resolve(null);
      const text = new TextDecoder().decode(
        new Uint8Array(received.flatMap((part) => [...part])),
      );
      const [head = "", body = ""] = text.split("\r\n\r\n", 2);
      const [statusLine = "", ...lines] = head.split("\r\n");
      resolve({
        status: Number(statusLine.split(" ")[1]),
        headers: Object.fromEntries(lines.map((line) => {
          const at = line.indexOf(":");
          return [line.slice(0, at).toLowerCase(), line.slice(at + 1).trim()];
        })),
        body,
      });
    });
    socket.on("connect", async () => {
      socket.write(
        `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n${
          Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("")
        }\r\n`,
      );
      for (const piece of pieces) {
        await new Promise<void>((done) => socket.write(piece, () => done()));
      }
      if (abort) socket.destroy();
    });
  });
}

/** `body` framed chunked, its chunks of `sizes` bytes in turn: each chunk a piece. */
function chunked(body: Uint8Array, sizes: readonly number[]): Uint8Array[] {
  const encoder = new TextEncoder();
  const pieces: Uint8Array[] = [];
  for (let at = 0, i = 0; at < body.length; i++) {
    const size = Math.min(sizes[i % sizes.length]!, body.length - at);
    pieces.push(
      encoder.encode(`${size.toString(16)}\r\n`),
      body.subarray(at, at + size),
      encoder.encode("\r\n"),
    );
    at += size;
  }
  pieces.push(encoder.encode("0\r\n\r\n"));
  return pieces;
}

/**
 * The name of an unread body's letter: the relayer hashes what it is given,
 * the hex SHA-256 of the body's bytes, and keeps 32 hex digits.
 */
async function hashName(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  const hex = async (data: Uint8Array<ArrayBuffer>) =>
    [...new Uint8Array(await crypto.subtle.digest("SHA-256", data))]
      .map((byte) => byte.toString(16).padStart(2, "0")).join("");
  return (await hex(new TextEncoder().encode(await hex(bytes)))).slice(0, 32);
}

/** Waits up to 2 s for the service to have answered every request. */
async function settled(): Promise<number> {
  for (let waited = 0; inFlight > 0 && waited < 2_000; waited += 20) {
    await new Promise((done) => setTimeout(done, 20));
  }
  return inFlight;
}

test("over the limit on @hono/node-server: an authenticated push is acked (204) and a QStash message answered 489, each kept as the dead letter Deno keeps, by Content-Length or chunked in odd pieces", async () => {
  const encoder = new TextEncoder();
  // Over the envelope routes' limit (64 KiB of job, base64, and 16 KiB).
  const push = encoder.encode(
    envelope({
      intentId: "pi_0007",
      kind: "settle",
      note: "x".repeat(100_000),
    }, { deliveryAttempt: 1 }),
  );
  const name = `pubsub/sha256-${await hashName(push)}/unreadable`;
  const token = await google.token({ aud: PUSH_AUDIENCE });
  for (
    const [framing, headers, pieces] of [
      ["content-length", { "content-length": `${push.length}` }, [push]],
      [
        "chunked",
        { "transfer-encoding": "chunked" },
        chunked(push, [
          1,
          7,
          65_539,
        ]),
      ],
    ] as const
  ) {
    const res = await rawPost("/v1/pubsub", {
      authorization: `Bearer ${token}`,
      ...headers,
    }, pieces);
    assert.equal(res?.status, 204, `${framing}: ${res?.body}`);
    const letter = await store.getDeadLetter(name);
    assert.ok(letter, `${framing}: no dead letter ${name}`);
    assert.match(letter.reason, /over the limit/);
  }
  // Nothing was read as a job.
  assert.equal((await store.getIntent("pi_0007"))?.state, "authorized");

  const message = "q".repeat(70_000);
  const bytes = encoder.encode(message);
  for (
    const [framing, id, headers, pieces] of [
      ["content-length", "msg_node_big_1", {
        "content-length": `${bytes.length}`,
      }, [bytes]],
      [
        "chunked",
        "msg_node_big_2",
        { "transfer-encoding": "chunked" },
        chunked(
          bytes,
          [3, 65_536, 11],
        ),
      ],
    ] as const
  ) {
    const res = await rawPost("/v1/qstash", {
      "upstash-signature": await signQStash(message, {
        key: QSTASH_KEY,
        url: `${PUBLIC_URL}/v1/qstash`,
      }),
      "upstash-message-id": id,
      ...headers,
    }, pieces);
    assert.equal(res?.status, 489, `${framing}: ${res?.body}`);
    assert.equal(res?.headers["upstash-nonretryable-error"], "true");
    assert.match(
      (await store.getDeadLetter(`qstash/${id}/unreadable`))?.reason ?? "",
      /over the limit/,
      framing,
    );
  }
  assert.equal(await settled(), 0);
});

test("on @hono/node-server, a push past the 16 MiB read is named by its first 16 MiB however it is framed", async () => {
  const size = 17 * 1024 * 1024;
  const body = new Uint8Array(size).fill(0x61);
  const name = `pubsub/sha256-${await hashName(
    body.subarray(0, 16 * 1024 * 1024),
  )}/unreadable`;
  const token = await google.token({ aud: PUSH_AUDIENCE });
  for (
    const [framing, headers, pieces] of [
      ["content-length", { "content-length": `${size}` }, [body]],
      [
        "chunked",
        { "transfer-encoding": "chunked" },
        chunked(body, [
          1 << 20,
          1_000_003,
        ]),
      ],
    ] as const
  ) {
    const res = await rawPost("/v1/pubsub", {
      authorization: `Bearer ${token}`,
      ...headers,
    }, pieces);
    assert.equal(res?.status, 204, `${framing}: ${res?.body}`);
    assert.match(
      (await store.getDeadLetter(name))?.reason ?? "",
      /more than 16777216 bytes, over the limit/,
      framing,
    );
  }
});

test("on @hono/node-server, a client that leaves mid-body is refused as unreadable and frees its handler: no dead letter (Node 20 and 22 end such a body early, as if whole)", async () => {
  const token = await google.token({ aud: PUSH_AUDIENCE });
  const letters = async () =>
    (await store.listDeadLetters({ limit: 1000 })).items;
  const before = new Set((await letters()).map((letter) => letter.jobId));
  for (
    const [path, headers] of [
      ["/v1/pubsub", {
        authorization: `Bearer ${token}`,
        "content-length": "200000",
      }],
      ["/v1/pubsub", {
        authorization: `Bearer ${token}`,
        "content-length": "1000",
      }],
      ["/v1/pubsub", {
        authorization: `Bearer ${token}`,
        "transfer-encoding": "chunked",
      }],
      ["/v1/qstash", {
        "upstash-signature": await signQStash("q".repeat(100_000), {
          key: QSTASH_KEY,
          url: `${PUBLIC_URL}/v1/qstash`,
        }),
        "content-length": "100000",
      }],
    ] as const
  ) {
    const partial = headers["transfer-encoding"]
      ? chunked(new Uint8Array(90_000).fill(0x61), [30_000]).slice(0, -1)
      : [new Uint8Array(Math.min(90_000, 500)).fill(0x61)];
    assert.equal(
      await rawPost(
        path,
        { ...headers, "x-test-read-once-gone": "1" },
        partial,
        true,
      ),
      null,
    );
    assert.equal(await settled(), 0, `${path} ${JSON.stringify(headers)}`);
  }
  assert.deepEqual(
    (await letters()).filter((letter) => !before.has(letter.jobId))
      .map((letter) => `${letter.jobId}: ${letter.reason}`),
    [],
  );
});
