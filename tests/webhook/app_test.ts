import assert from "node:assert/strict";
import { MemoryStore, notSent, poison, ScriptedSender } from "../../mod.ts";
import {
  createApp,
  type PubSubKeys,
  type WebhookApp,
} from "../../webhook/app.ts";
import { heldBySession } from "../../store/_held_lock.ts";
import {
  AUTHORIZED,
  genericRequest,
  lettersDown,
  makeApp,
  NOW,
  OPS,
  SECRET,
  theGoogle,
} from "./_app.ts";
import {
  envelope,
  fakeGoogle,
  PUBSUB,
  QSTASH,
  signHmac,
  signQStash,
} from "./_signing.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;
const created = { id: "pi_0001", state: "created" } as const;

async function problemOf(res: Response) {
  assert.equal(res.headers.get("content-type"), "application/problem+json");
  const body = await res.json();
  assert.equal(body.status, res.status);
  assert.match(body.type, /^urn:relayer:problem:/);
  assert.equal(typeof body.title, "string");
  assert.equal(typeof body.detail, "string");
  return body as {
    type: string;
    title: string;
    status: number;
    detail: string;
  };
}

/** Posts an operator's fail of `pi_0002` on `version` to `app`, its nonce checked. */
async function failByHand(
  app: WebhookApp,
  version: string | undefined,
): Promise<Response> {
  return await app.request("/v1/intents/pi_0002/resolve", {
    method: "POST",
    headers: { authorization: `Bearer ${OPS}` },
    body: JSON.stringify({ to: "failed", version, nonceChecked: true }),
  });
}

async function qstashRequest(
  body: string,
  headers: Record<string, string> = {},
): Promise<RequestInit> {
  return {
    method: "POST",
    body,
    headers: {
      "upstash-signature": await signQStash(body),
      "upstash-retried": "0",
      ...headers,
    },
  };
}

// ---------------------------------------------------------------------------
// Generic route

Deno.test("createApp() never answers Retry-After: 0, which would bring the queue back at once: a 0 ms delay waits 1 s", async () => {
  // makeApp draws 0 from its random source: full jitter gives 0 ms.
  const { app } = await makeApp({
    intents: [created],
    deps: { policy: { jitter: "full" } },
  });
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job, delivery: 1 })),
  );
  assert.equal(res.status, 503);
  assert.equal((await res.json()).delayMs, 0);
  assert.equal(res.headers.get("retry-after"), "1");
});

Deno.test("createApp() answers a signed generic delivery: 503 + Retry-After for a retry, rounded up", async () => {
  const { app } = await makeApp({
    intents: [created],
    deps: { policy: { baseMs: 2001, jitter: "none" } },
  });
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job, delivery: 1 })),
  );
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("retry-after"), "3"); // 2.001 s → 3, never 2
  assert.deepEqual(await res.json(), {
    outcome: "retry",
    job: "pi_0001/settle",
    delivery: 1,
    reason: "not authorized yet",
    delayMs: 2001,
  });
});

Deno.test("createApp() verifies a delivery's signature over its raw bytes: a body with a byte order mark is accepted on the generic and QStash routes", async () => {
  const { app } = await makeApp({ intents: [created] });
  // U+FEFF, sent as the bytes EF BB BF and signed with them; the JSON
  // after it is read as if the mark were not there (RFC 8259 §8.1).
  const generic = `\uFEFF${JSON.stringify({ job, delivery: 1 })}`;
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(generic),
  );
  assert.equal(res.status, 503);
  assert.equal((await res.json()).reason, "not authorized yet");
  // One byte changed after signing still fails.
  const tampered = await genericRequest(generic);
  const bytes = new TextEncoder().encode(generic);
  bytes[0] = 0xef;
  bytes[1] = 0xbb;
  bytes[2] = 0xbe; // U+FEFE
  const refused = await app.request("/v1/deliveries", {
    ...tampered,
    body: bytes,
  });
  assert.equal(refused.status, 401);
  const qstash = `\uFEFF${JSON.stringify(job)}`;
  const res2 = await app.request("/v1/qstash", await qstashRequest(qstash));
  assert.equal(res2.status, 503);
  assert.equal((await res2.json()).reason, "not authorized yet");
});

Deno.test("createApp() checks a QStash delivery's body hash over its raw bytes: a message QStash signed with a byte that is not UTF-8 is kept as unreadable (489), not refused as forged (401) through all its retries", async () => {
  const lines: string[] = [];
  const { app, store } = await makeApp({
    intents: [created],
    deps: { log: (line) => lines.push(line) },
  });
  // A Latin-1 "é" (E9) in a field beside the job's own: QStash signs and
  // delivers the bytes as published; the body read as UTF-8 has U+FFFD
  // there, whose UTF-8 (EF BF BD) hashes to something else.
  const encoder = new TextEncoder();
  const [before, after] = JSON.stringify({ ...job, note: "caf" }).split("caf");
  const bytes = new Uint8Array([
    ...encoder.encode(`${before}caf`),
    0xe9,
    ...encoder.encode(after),
  ]);
  const res = await app.request("/v1/qstash", {
    method: "POST",
    body: bytes,
    headers: {
      "upstash-signature": await signQStash(bytes),
      "upstash-retried": "0",
      "upstash-message-id": "msg_latin1",
    },
  });
  const answer = await res.json();
  assert.equal(res.status, 489, JSON.stringify(answer));
  assert.equal(res.headers.get("upstash-nonretryable-error"), "true");
  assert.match(answer.detail, /not UTF-8/);
  const letter = await store.getDeadLetter("qstash/msg_latin1/unreadable");
  assert.match(letter?.reason ?? "", /not UTF-8/);
  assert.equal(letter?.intentId, "pi_0001");
  // QStash's failure callback for it keeps the letter naming the intent.
  const callback = JSON.stringify({
    retried: 0,
    sourceMessageId: "msg_latin1",
    sourceBody: btoa(String.fromCharCode(...bytes)),
  });
  const failed = await app.request("/v1/qstash/failed", {
    method: "POST",
    body: callback,
    headers: {
      "upstash-signature": await signQStash(callback, {
        url: `${QSTASH.url}/failed`,
      }),
    },
  });
  assert.equal(failed.status, 489);
  await failed.body?.cancel();
  assert.equal(
    (await store.getDeadLetter("qstash/msg_latin1/unreadable"))?.intentId,
    "pi_0001",
  );
  // One byte changed after signing still fails.
  const tampered = bytes.slice();
  tampered[tampered.indexOf(0xe9)] = 0xe8;
  const refused = await app.request("/v1/qstash", {
    method: "POST",
    body: tampered,
    headers: { "upstash-signature": await signQStash(bytes) },
  });
  assert.equal(refused.status, 401);
  await refused.body?.cancel();
  assert.equal(
    lines.filter((line) => / refused 401/.test(line)).length,
    1,
    lines.join("\n"),
  );
});

Deno.test("createApp() caps Retry-After at one day on QStash, the most it honours, and not on the generic route, whose bridge waits the policy's delay", async () => {
  const day = 24 * 60 * 60 * 1000;
  const { app } = await makeApp({
    intents: [created],
    deps: { policy: { baseMs: 2 * day, capMs: 2 * day, jitter: "none" } },
  });
  const generic = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job, delivery: 1 })),
  );
  assert.equal(generic.status, 503);
  assert.equal((await generic.json()).delayMs, 2 * day);
  assert.equal(generic.headers.get("retry-after"), "172800");
  const qstash = await app.request(
    "/v1/qstash",
    await qstashRequest(JSON.stringify(job)),
  );
  assert.equal(qstash.status, 503);
  assert.equal((await qstash.json()).delayMs, 2 * day);
  assert.equal(qstash.headers.get("retry-after"), "86400");
});

Deno.test("createApp() rounds an equal-jitter floor of 2.5 s up to Retry-After: 3", async () => {
  const { app } = await makeApp({ intents: [created] }); // random 0 → floor(5000 / 2)
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job, delivery: 1 })),
  );
  assert.equal((await res.json()).delayMs, 2500);
  assert.equal(res.headers.get("retry-after"), "3");
});

Deno.test("createApp() answers 200 for a poisoned generic delivery, after the resolution", async () => {
  const { app, store } = await makeApp({
    intents: [AUTHORIZED],
    scripts: {
      pi_0001: {
        sends: [{ error: poison(notSent(new Error("bad chain id"))) }],
      },
    },
  });
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job, delivery: 1 })),
  );
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), {
    outcome: "poison",
    job: "pi_0001/settle",
    delivery: 1,
    reason: "retrying will not help",
    resolution: "nothing was sent, so the intent failed",
  });
  assert.equal((await store.getIntent("pi_0001"))?.state, "failed");
  assert.equal(
    (await store.getDeadLetter("pi_0001/settle"))?.cause,
    "declared",
  );
});

Deno.test("createApp() answers 200 done for an intent already settled", async () => {
  const { app } = await makeApp({
    intents: [{ id: "pi_0001", state: "settled", hold: "captured" }],
  });
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job })),
  );
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), {
    outcome: "done",
    job: "pi_0001/settle",
    delivery: 1,
    reason: "intent already settled",
  });
});

Deno.test("createApp() counts generic deliveries in the store when the body has no number", async () => {
  const { app, store } = await makeApp({ intents: [created] });
  for (const n of [1, 2]) {
    const res = await app.request(
      "/v1/deliveries",
      // Each delivery signed afresh: a signature used twice is a replay.
      await genericRequest(JSON.stringify({ job }), {
        timeS: Math.floor(NOW / 1000) - n,
      }),
    );
    assert.equal((await res.json()).delivery, n);
  }
  assert.equal(await store.deliveries("pi_0001/settle"), 2);
});

Deno.test("createApp() refuses an unsigned, wrongly signed or tampered generic delivery with 401, touching nothing", async () => {
  const { app, writes } = await makeApp({ intents: [created] });
  const body = JSON.stringify({ job, delivery: 1 });
  const t = Math.floor(NOW / 1000);
  const good = signHmac(SECRET, body, t);
  const v1 = good.split("v1=")[1]!;
  const cases: [string, RequestInit][] = [
    ["unsigned", { method: "POST", body }],
    [
      "another secret",
      await genericRequest(body, {
        signature: signHmac("another secret", body, t),
      }),
    ],
    [
      "the old body-only scheme",
      await genericRequest(body, {
        signature: `sha256=${v1}`,
      }),
    ],
    ["v1 without t", await genericRequest(body, { signature: `v1=${v1}` })],
    ["t without v1", await genericRequest(body, { signature: `t=${t}` })],
    [
      "another t, same v1",
      await genericRequest(body, {
        signature: `t=${t - 1},v1=${v1}`,
      }),
    ],
    [
      "short v1",
      await genericRequest(body, {
        signature: `t=${t},v1=${v1.slice(2)}`,
      }),
    ],
    [
      "two signatures",
      await genericRequest(body, {
        signature: `${good}, ${good}`,
      }),
    ],
    ["tampered body", {
      ...(await genericRequest(body)),
      body: body.replace("1}", "2}"),
    }],
  ];
  for (const [name, init] of cases) {
    const res = await app.request("/v1/deliveries", init);
    assert.equal(res.status, 401, name);
    const p = await problemOf(res);
    assert.equal(p.title, "Unauthorized");
    assert.match(p.detail, /X-Signature/, name);
    assert.doesNotMatch(p.detail, new RegExp(SECRET), name);
  }
  assert.equal(writes(), 0);
});

Deno.test("createApp() accepts a generic signature exactly 5 minutes old or 30 s ahead, and refuses one a second past either", async () => {
  const t = Math.floor(NOW / 1000); // NOW is a whole second
  const body = JSON.stringify({ job, delivery: 1 });
  const { app, writes } = await makeApp({ intents: [created] });
  for (
    const [timeS, status] of [
      [t - 300, 503], // exactly 5 minutes old: accepted (a retry: not authorized yet)
      [t - 301, 401],
      [t + 30, 503], // exactly the allowed skew ahead
      [t + 31, 401],
      [0, 401],
    ] as const
  ) {
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(body, { timeS }),
    );
    assert.equal(res.status, status, `t = ${timeS}`);
    if (status === 401) {
      assert.match((await problemOf(res)).detail, /more than 5 minutes old/);
    } else await res.body?.cancel();
  }
  // A created intent is only looked at: the two accepted deliveries each
  // write their replay record, and nothing else.
  assert.equal(writes(), 2);
});

Deno.test("createApp() accepts a generic signature's v1 in upper-case hex", async () => {
  const { app } = await makeApp({ intents: [created] });
  const body = JSON.stringify({ job, delivery: 1 });
  const [t, v1] = signHmac(SECRET, body, Math.floor(NOW / 1000)).split(",v1=");
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(body, { signature: `${t},v1=${v1!.toUpperCase()}` }),
  );
  assert.equal(res.status, 503);
  assert.equal((await res.json()).reason, "not authorized yet");
});

Deno.test("createApp() answers malformed generic input with a 400 problem, touching nothing but the dead letter of a job that cannot be read", async () => {
  const { app, writes, store } = await makeApp({ intents: [created] });
  const bodies = [
    "not json",
    "",
    "[]",
    JSON.stringify({ job: { intentId: "", kind: "settle" } }),
    JSON.stringify({ job: { intentId: "pi_0001", kind: "refund" } }),
    // A 'delivery' that cannot be read beside an unreadable job: the job's
    // refusal (a readable job's is counted in the store: see
    // deliveries_unreadable_count_test.ts).
    JSON.stringify({ job: { intentId: "" }, delivery: "3" }),
  ];
  for (const body of bodies) {
    const res = await app.request("/v1/deliveries", await genericRequest(body));
    assert.equal(res.status, 400, body);
    const p = await problemOf(res);
    assert.equal(p.type, "urn:relayer:problem:bad-job");
    assert.doesNotMatch(p.detail, /\n\s+at /);
  }
  // The three bodies with a job, each kept as a letter of its own (it may
  // be its intent's only job: deliveries_unreadable_job_test.ts).
  assert.equal(writes(), 3);
  const { items } = await store.listDeadLetters({ limit: 10 });
  assert.deepEqual(
    items.map((letter) => letter.intentId).sort(),
    ["", "", "pi_0001"],
  );
  assert.equal((await store.getIntent("pi_0001"))?.state, "created");
});

Deno.test("createApp() refuses a body over the limit with 413, touching nothing", async () => {
  const { app, writes } = await makeApp({
    intents: [created],
    deps: { maxBodyBytes: 1024 },
  });
  const body = JSON.stringify({ job, pad: "x".repeat(2000) });
  const signed = await genericRequest(body);
  // However it is framed: no length (counted as the route reads it), its
  // length said (refused unread), or a length that understates it (read
  // whole, as a server frames it, then found over).
  for (
    const length of [
      undefined,
      String(new TextEncoder().encode(body).byteLength),
      "100",
    ]
  ) {
    const res = await app.request("/v1/deliveries", {
      ...signed,
      headers: {
        ...signed.headers as Record<string, string>,
        ...(length === undefined ? {} : { "content-length": length }),
      },
    });
    assert.equal(res.status, 413, `Content-Length: ${length}`);
    await problemOf(res);
  }
  assert.equal(writes(), 0);
});

Deno.test("createApp() answers a body whose upload failed with a 400 problem, touching and logging nothing: not a 500, nor a log line holding the path the caller chose", async () => {
  const lines: string[] = [];
  const { app, writes } = await makeApp({
    intents: [created],
    deps: { log: (line) => lines.push(line) },
  });
  // Some bytes, then the connection fails (a client that went away).
  const failing = () =>
    new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"job":'));
      },
      pull(controller) {
        controller.error(new Error("connection reset"));
      },
    });
  const forged =
    "/v1/x%0Arelayer%20review%20of%20pi_0001%20resolved%20by%20an%20operator:%20settled";
  const ops = { authorization: `Bearer ${OPS}` };
  // Headers each route takes, so that it reads the body: a signature whose
  // MAC only the body can refute, a token of our keys, Google's token.
  const signed = {
    "x-signature": `t=${NOW / 1000},v1=${"0".repeat(64)}`,
  };
  const qstash = { "upstash-signature": await signQStash("{}") };
  const google = {
    authorization: `Bearer ${await (await theGoogle()).token()}`,
  };
  // With a Content-Length or without, the route reads the body.
  const cases: [string, Record<string, string>][] = [
    ["/v1/deliveries", signed],
    ["/v1/deliveries", { ...signed, "content-length": "100" }],
    ["/v1/qstash", { ...qstash, "content-length": "100" }],
    ["/v1/pubsub", google],
    ["/v1/jobs", { ...ops, "content-length": "100" }],
    ["/v1/intents", ops],
  ];
  for (const [path, headers] of cases) {
    const res = await app.request(path, {
      method: "POST",
      body: failing(),
      headers,
    });
    const name = `${path} ${JSON.stringify(headers)}`;
    assert.equal(res.status, 400, name);
    assert.equal(
      (await problemOf(res)).type,
      "urn:relayer:problem:unreadable-body",
      name,
    );
  }
  // No route reads the body of a path it does not answer.
  const missing = await app.request(forged, {
    method: "POST",
    body: failing(),
  });
  assert.equal(missing.status, 404);
  await problemOf(missing);
  assert.deepEqual(lines, []);
  assert.equal(writes(), 0);
});

Deno.test("createApp() answers 404 and 405 problems for unknown routes and methods", async () => {
  const { app } = await makeApp();
  const missing = await app.request("/v2/nothing", { method: "POST" });
  assert.equal(missing.status, 404);
  await problemOf(missing);
  const wrong = await app.request("/v1/deliveries", { method: "GET" });
  assert.equal(wrong.status, 405);
  assert.equal(wrong.headers.get("allow"), "POST");
  await problemOf(wrong);
  assert.equal(
    (await app.request("/healthz", { method: "DELETE" })).status,
    405,
  );
});

Deno.test("createApp() refuses a route whose keys are not configured, naming the setting and the option", async () => {
  const lines: string[] = [];
  const app = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    log: (line) => lines.push(line),
  });
  const cases: [string, string, string][] = [
    ["/v1/qstash", "QSTASH_CURRENT_SIGNING_KEY", "qstash"],
    ["/v1/qstash/failed", "QSTASH_CURRENT_SIGNING_KEY", "qstash"],
    ["/v1/pubsub", "PUBSUB_AUDIENCE and PUBSUB_SERVICE_ACCOUNT", "pubsub"],
    [
      "/v1/pubsub/dead-letter",
      "PUBSUB_DEAD_LETTER_AUDIENCE and PUBSUB_SERVICE_ACCOUNT",
      "pubsubDeadLetter",
    ],
    ["/v1/deliveries", "WEBHOOK_SECRET", "webhookSecret"],
    ["/v1/dead-letters/pi_1%2Fsettle/redrive", "OPS_TOKEN", "opsToken"],
  ];
  for (const [path, setting, option] of cases) {
    const res = await app.request(path, { method: "POST", body: "{}" });
    assert.equal(res.status, 503, path);
    const { detail } = await problemOf(res);
    assert.match(detail, new RegExp(setting));
    // A library user is told the option, as the service's user the setting.
    assert.match(
      detail,
      new RegExp(
        ` \\(in code, createApp's '${option}'\\), or start with RELAYER_INSECURE_DEV=1 \\(insecureDev\\) for local development only\\.$`,
      ),
      detail,
    );
    assert.match(detail, /^[\w /-]+ (is|are) off: set /, detail);
    assert.doesNotMatch(detail, /are is/);
    // Logged too; a queue's give-up refused so strands its intent.
    const line = lines.at(-1) ?? "";
    assert.match(line, /refused 503/, `${path}: ${line}`);
    const givesUp = ["/v1/qstash/failed", "/v1/pubsub/dead-letter"]
      .includes(path);
    assert.equal(
      line.includes(
        "The queue's give-up is refused, and resolves nothing: once the queue stops calling, its intent is stranded.",
      ),
      givesUp,
      `${path}: ${line}`,
    );
  }
});

Deno.test("createApp() in insecure dev mode accepts unsigned deliveries on unconfigured routes", async () => {
  const store = new MemoryStore();
  await store.createIntent(created);
  const app = createApp({
    store,
    sender: new ScriptedSender({}),
    insecureDev: true,
    random: () => 0,
  });
  const res = await app.request("/v1/deliveries", {
    method: "POST",
    body: JSON.stringify({ job, delivery: 1 }),
  });
  assert.equal(res.status, 503);
  assert.equal((await res.json()).reason, "not authorized yet");
});

Deno.test("createApp() answers a store that cannot write during a resolution with a 503 problem, without details", async () => {
  // Reads work, writes fail: the delivery runs, is poisoned at its last
  // number, and cannot take the lease to resolve. The queue must retry.
  const memory = new MemoryStore();
  await memory.createIntent(created);
  const broken = createApp({
    store: new Proxy(memory, {
      get: (target, key) =>
        key === "getIntent"
          ? target.getIntent.bind(target)
          : () =>
            Promise.reject(
              new Error("connection reset by KV at secret-host:5432"),
            ),
    }),
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 3 },
    webhookSecret: SECRET,
    now: () => NOW,
  });
  const res = await broken.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job, delivery: 3 })),
  );
  assert.equal(res.status, 503);
  // The store refuses every write (the probe's too): down, so the queue
  // waits as its own backoff says.
  assert.equal(res.headers.get("retry-after"), null);
  const text = JSON.stringify(await problemOf(res));
  assert.doesNotMatch(text, /secret-host|connection reset|at /);
  assert.equal((await memory.getIntent("pi_0001"))?.state, "created");
});

// ---------------------------------------------------------------------------
// QStash

Deno.test("createApp() takes a QStash delivery signed with the current or the next key", async () => {
  const { app } = await makeApp({ intents: [created] });
  const body = JSON.stringify(job);
  for (const key of [QSTASH.currentSigningKey, QSTASH.nextSigningKey]) {
    const res = await app.request("/v1/qstash", {
      method: "POST",
      body,
      headers: {
        "upstash-signature": await signQStash(body, { key }),
        "upstash-retried": "2",
      },
    });
    assert.equal(res.status, 200, key); // delivery 3 of 3: exhausted, dropped, acked
    const answer = await res.json();
    assert.equal(answer.delivery, 3);
    assert.equal(answer.resolution, "job dropped, intent still created");
  }
});

Deno.test("createApp() counts a QStash delivery as Upstash-Retried + 1 and answers 503 + Retry-After", async () => {
  const { app } = await makeApp({ intents: [created] });
  const res = await app.request(
    "/v1/qstash",
    await qstashRequest(JSON.stringify(job)),
  );
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("retry-after"), "3");
  const answer = await res.json();
  assert.equal(answer.delivery, 1);
  assert.equal(answer.outcome, "retry");
});

Deno.test("createApp() refuses a QStash delivery whose signature does not verify, storing nothing", async () => {
  const { app, writes } = await makeApp({ intents: [created] });
  const body = JSON.stringify(job);
  const now = Math.floor(Date.now() / 1000);
  const cases: [string, RequestInit][] = [
    ["tampered body", {
      ...(await qstashRequest(body)),
      body: JSON.stringify({ ...job, x: 1 }),
    }],
    ["wrong URL", {
      method: "POST",
      body,
      headers: {
        "upstash-signature": await signQStash(body, {
          url: "https://evil.test/v1/qstash",
        }),
      },
    }],
    ["expired", {
      method: "POST",
      body,
      headers: {
        "upstash-signature": await signQStash(body, {
          nowS: now - 3600,
          ttlS: 60,
        }),
      },
    }],
    ["wrong key", {
      method: "POST",
      body,
      headers: {
        "upstash-signature": await signQStash(body, {
          key: "sig_someone_else",
        }),
      },
    }],
    ["missing header", { method: "POST", body }],
    ["garbage", {
      method: "POST",
      body,
      headers: { "upstash-signature": "not.a.jwt" },
    }],
  ];
  for (const [name, init] of cases) {
    const res = await app.request("/v1/qstash", init);
    assert.equal(res.status, 401, name);
    const { detail } = await problemOf(res);
    // QStash's own token for another URL says which: PUBLIC_URL is wrong;
    // for this URL but out of its time, that the clock refused it.
    assert.equal(
      detail,
      name === "wrong URL"
        ? `The Upstash-Signature token is QStash's, but signed for https://evil.test/v1/qstash, and this route checks ${QSTASH.url}: publish to this route's URL, or set the service's PUBLIC_URL (createApp's qstash.url, the route's whole URL) so that it is the URL QStash calls.`
        : name === "expired"
        ? "The Upstash-Signature token is QStash's, for this URL, but expired or not yet valid by this server's clock (past its exp, or before its nbf, by more than 30 seconds)."
        : "The Upstash-Signature header is missing or does not verify against this URL and body.",
      name,
    );
  }
  assert.equal(writes(), 0);
});

Deno.test("createApp() answers a malformed QStash job with 489 and Upstash-NonRetryable-Error, and keeps it as a dead letter (it may be its intent's only job)", async () => {
  const { app, store, writes } = await makeApp({ intents: [created] });
  const bodies: [string, string, string][] = [
    ["msg_A1", "{", ""],
    [
      "msg_B2",
      JSON.stringify({ intentId: "pi_0001", kind: "sttle" }),
      "pi_0001",
    ],
  ];
  for (const [id, body, intentId] of bodies) {
    const res = await app.request(
      "/v1/qstash",
      await qstashRequest(body, {
        "upstash-message-id": id,
        "upstash-retried": "2",
      }),
    );
    assert.equal(res.status, 489);
    assert.equal(res.headers.get("upstash-nonretryable-error"), "true");
    await problemOf(res);
    const letter = await store.getDeadLetter(`qstash/${id}/unreadable`);
    assert.equal(letter?.intentId, intentId);
    assert.equal(letter?.deliveries, 3);
    assert.match(letter?.reason ?? "", /^unreadable QStash message: /);
  }
  assert.equal(writes(), 2, "each letter, and nothing else");
  // Without a message id, each is named by its own body's hash: two
  // unreadable messages keep two letters, not one.
  for (const body of ["[", "not json"]) {
    const res = await app.request("/v1/qstash", await qstashRequest(body));
    assert.equal(res.status, 489);
    await res.body?.cancel();
  }
  const named = (await store.listDeadLetters({ limit: 10 })).items
    .map((letter) => letter.jobId)
    .filter((jobId) => jobId.startsWith("qstash/sha256-"));
  assert.equal(named.length, 2, named.join(", "));
  for (const jobId of named) {
    assert.match(jobId, /^qstash\/sha256-[0-9a-f]{32}\/unreadable$/);
  }
  assert.equal(writes(), 4);
  // Its intent is created, so a job can still move it: the letter stays
  // until one has (DELETE is refused, 409).
  const refused = await app.request(
    "/v1/dead-letters/qstash/msg_B2/unreadable",
    { method: "DELETE", headers: { authorization: `Bearer ${OPS}` } },
  );
  assert.equal(refused.status, 409);
  await refused.body?.cancel();
  const removed = await app.request(
    "/v1/dead-letters/qstash/msg_A1/unreadable",
    { method: "DELETE", headers: { authorization: `Bearer ${OPS}` } },
  );
  assert.equal(removed.status, 200);
  await removed.body?.cancel();
});

Deno.test("createApp() answers 503 for an unreadable QStash message it cannot keep, so QStash redelivers it", async () => {
  const memory = new MemoryStore();
  const { app } = await makeApp({
    deps: {
      store: lettersDown(memory),
    },
  });
  const res = await app.request("/v1/qstash", await qstashRequest("{"));
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("upstash-nonretryable-error"), null);
  assert.match((await problemOf(res)).detail, /QStash will redeliver it/);
});

// ---------------------------------------------------------------------------
// Pub/Sub

async function pubsubRequest(
  body: string,
  token?: string,
): Promise<RequestInit> {
  const google = await theGoogle();
  return {
    method: "POST",
    body,
    headers: {
      authorization: `Bearer ${token ?? await google.token()}`,
      "content-type": "application/json",
    },
  };
}

Deno.test("createApp() takes a Pub/Sub push with deliveryAttempt and answers 503 with a note for a retry", async () => {
  const { app } = await makeApp({ intents: [created] });
  const res = await app.request(
    "/v1/pubsub",
    await pubsubRequest(envelope(job, { deliveryAttempt: 2 })),
  );
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("retry-after"), null);
  const answer = await res.json();
  assert.equal(answer.delivery, 2);
  assert.match(answer.note, /subscription's retry policy/);
});

Deno.test("createApp() takes a Pub/Sub token under the Bearer scheme in any case, as HTTP does", async () => {
  const google = await theGoogle();
  for (const scheme of ["bearer", "BEARER"]) {
    const { app } = await makeApp({ intents: [created] });
    const init = await pubsubRequest(envelope(job, { deliveryAttempt: 2 }));
    const res = await app.request("/v1/pubsub", {
      ...init,
      headers: {
        ...init.headers as Record<string, string>,
        authorization: `${scheme} ${await google.token()}`,
      },
    });
    assert.equal(res.status, 503, scheme); // verified, and retried
    assert.equal((await res.json()).delivery, 2, scheme);
  }
});

Deno.test("createApp() counts Pub/Sub deliveries by subscription and message id when deliveryAttempt is absent or 0", async () => {
  const { app, store } = await makeApp({ intents: [created] });
  for (const [attempt, n] of [[undefined, 1], [0, 2]] as const) {
    const body = envelope(job, {
      messageId: "m-1",
      ...(attempt === undefined ? {} : { deliveryAttempt: attempt }),
    });
    const res = await app.request("/v1/pubsub", await pubsubRequest(body));
    assert.equal((await res.json()).delivery, n);
  }
  // `projects/p/subscriptions/relayer`'s count of message m-1.
  assert.equal(await store.deliveries("pubsub/p/relayer/m-1"), 2);
  assert.equal(await store.deliveries("pubsub/m-1"), 0);
});

Deno.test("createApp() reads the snake_case Pub/Sub envelope too, and acks a poison with 204", async () => {
  const { app, store } = await makeApp({ intents: [created] });
  const res = await app.request(
    "/v1/pubsub",
    await pubsubRequest(envelope(job, { deliveryAttempt: 3, snake: true })),
  );
  assert.equal(res.status, 204);
  assert.equal(await res.text(), "");
  assert.equal((await store.getDeadLetter("pi_0001/settle"))?.deliveries, 3);
});

Deno.test("createApp() refuses a Pub/Sub push without a valid Google token for this audience", async () => {
  const { app, writes } = await makeApp({ intents: [created] });
  const google = await theGoogle();
  const body = envelope(job, { deliveryAttempt: 1 });
  const now = Math.floor(Date.now() / 1000);
  const tokens: [string, string | null][] = [
    ["wrong audience", await google.token({ aud: "https://other.test" })],
    ["wrong issuer", await google.token({ iss: "https://evil.test" })],
    ["expired", await google.token({ iat: now - 7200, exp: now - 3600 })],
    ["unknown key", await google.token({}, { kid: "another-key" })],
    // Every claim and the kid right, signed by another key pair: only the
    // signature tells it apart.
    [
      "another key under the configured kid",
      await (await fakeGoogle()).token(),
    ],
    [
      "wrong service account",
      await google.token({ email: "someone@else.test" }),
    ],
    ["email not verified", await google.token({ email_verified: false })],
    [
      "email_verified missing",
      await google.token({ email_verified: undefined }),
    ],
    [
      "email_verified a string",
      await google.token({ email_verified: "true" }),
    ],
    [
      "an issuer that only ends in Google's",
      await google.token({ iss: "https://evil.test/accounts.google.com" }),
    ],
    [
      "an issuer that only starts with Google's",
      await google.token({ iss: "accounts.google.com.evil.test" }),
    ],
    // OIDC's iss is a string; an array of Google's would pass a pattern
    // that reads it as text.
    [
      "an issuer in an array",
      await google.token({ iss: ["https://accounts.google.com"] }),
    ],
    [
      "an issuer in an array without its scheme",
      await google.token({ iss: ["accounts.google.com"] }),
    ],
    ["no token", null],
  ];
  for (const [name, token] of tokens) {
    const init = token === null
      ? { method: "POST", body }
      : await pubsubRequest(body, token);
    const res = await app.request("/v1/pubsub", init);
    assert.equal(res.status, 401, name);
  }
  assert.equal(writes(), 0);
});

Deno.test("createApp() refuses to build a Pub/Sub route without a service account or an audience (an empty one would check none)", async () => {
  const google = await theGoogle();
  const keys = {
    audience: PUBSUB.audience,
    jwks: google.jwks,
    serviceAccount: PUBSUB.serviceAccount,
  };
  // A JavaScript caller can leave a field out, or give an empty one.
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ ...keys, serviceAccount: undefined }, /'serviceAccount' is missing/],
    [{ ...keys, audience: undefined }, /'audience' is missing/],
    [{ ...keys, audience: "" }, /'audience' is missing/],
  ];
  for (const [pubsub, message] of cases) {
    assert.throws(
      () =>
        createApp({
          store: new MemoryStore(),
          sender: new ScriptedSender({}),
          pubsub: pubsub as unknown as PubSubKeys,
        }),
      (error) => error instanceof TypeError && message.test(error.message),
    );
  }
});

Deno.test("createApp() refuses keys that would turn a check off or can be guessed: an empty or short secret or token, an empty QStash key, no QStash url", () => {
  // Each of these would accept what it should refuse: an HMAC under "",
  // "Bearer " as the ops token, the environment's QSTASH_* keys, or a
  // QStash token signed for any other URL (no url, no `sub` check).
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ webhookSecret: "" }, /'webhookSecret' is empty/],
    [{ opsToken: "" }, /'opsToken' is empty/],
    // A short key or token is found by trying: the service's own rule.
    [
      { webhookSecret: "short" },
      /'webhookSecret' is 5 characters long: use a random secret of at least 16/,
    ],
    [
      { opsToken: "fifteen-chars-x" },
      /'opsToken' is 15 characters long: use a random token of at least 16/,
    ],
    [{ qstash: { ...QSTASH, currentSigningKey: "" } }, /'currentSigningKey'/],
    [{ qstash: { ...QSTASH, nextSigningKey: undefined } }, /'nextSigningKey'/],
    [
      { qstash: { ...QSTASH, url: undefined } },
      /'url' is not an http\(s\) URL/,
    ],
    [{ qstash: { ...QSTASH, url: "relayer.example" } }, /'url' is not/],
    // Whoever signs deliveries would hold the ops routes: the service's
    // OPS_TOKEN rule, held in code too.
    [
      { webhookSecret: SECRET, opsToken: SECRET },
      /^Cannot create app as 'opsToken' is 'webhookSecret': whoever holds a signing secret would also hold the ops routes/,
    ],
    [
      {
        webhookSecret: "another-secret-of-16",
        webhookSecretNext: SECRET,
        opsToken: SECRET,
      },
      /'opsToken' is 'webhookSecretNext'/,
    ],
    [
      { qstash: QSTASH, opsToken: QSTASH.nextSigningKey },
      /'opsToken' is 'qstash\.nextSigningKey'/,
    ],
  ];
  for (const [keys, message] of cases) {
    assert.throws(
      () =>
        createApp({
          store: new MemoryStore(),
          sender: new ScriptedSender({}),
          ...keys,
        }),
      (error) => error instanceof TypeError && message.test(error.message),
      JSON.stringify(keys),
    );
  }
});

Deno.test("createApp() refuses a token of another Google account for the right audience (any account can get one)", async () => {
  const { app, store } = await makeApp({
    intents: [{
      id: "pi_0001",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    }],
  });
  const google = await theGoogle();
  // What the attacker sent: a real Google token for our audience,
  // from their own account, with a huge deliveryAttempt.
  const token = await google.token({
    email: "attacker@evil-project.iam.gserviceaccount.com",
    email_verified: true,
  });
  const res = await app.request(
    "/v1/pubsub",
    await pubsubRequest(envelope(job, { deliveryAttempt: 1000 }), token),
  );
  assert.equal(res.status, 401);
  assert.equal((await store.getIntent("pi_0001"))?.state, "settling");
});

Deno.test("createApp() allows Google's clock to differ from ours by up to 30 s on a Pub/Sub token: issued 5 s ahead, or 10 s past its exp, verifies; 30 s past (the bound itself), 31 s past, 32 s ahead, or without exp, does not", async () => {
  const google = await theGoogle();
  // Claims are whole seconds of the wall clock (the verifier reads it), so
  // each case is signed just before it is sent; "ahead" keeps a second
  // more than the rounding down of now can take away, and time passing
  // only moves the others further from their bound.
  const cases: [string, (nowS: number) => Record<string, unknown>, number][] = [
    ["issued 5 s ahead", (nowS) => ({ iat: nowS + 5, nbf: nowS + 5 }), 503],
    ["10 s past its exp", (n) => ({ iat: n - 3610, exp: n - 10 }), 503],
    // exp + 30 s is at most now: refused whenever the request is sent.
    ["30 s past its exp", (n) => ({ iat: n - 3630, exp: n - 30 }), 401],
    ["31 s past its exp", (n) => ({ iat: n - 3631, exp: n - 31 }), 401],
    ["issued 32 s ahead", (nowS) => ({ iat: nowS + 32 }), 401],
    ["no exp", () => ({ exp: undefined }), 401],
  ];
  for (const [name, claims, status] of cases) {
    const { app } = await makeApp({ intents: [created] });
    const token = await google.token(claims(Math.floor(Date.now() / 1000)));
    const res = await app.request(
      "/v1/pubsub",
      await pubsubRequest(envelope(job, { deliveryAttempt: 1 }), token),
    );
    assert.equal(res.status, status, name);
    await res.body?.cancel();
  }
});

Deno.test("createApp() takes the Pub/Sub service account in any case: Google writes the email in lower case", async () => {
  const google = await theGoogle();
  const { app } = await makeApp({
    intents: [created],
    deps: {
      pubsub: {
        audience: PUBSUB.audience,
        jwks: google.jwks,
        serviceAccount: PUBSUB.serviceAccount.toUpperCase(),
      },
    },
  });
  const res = await app.request(
    "/v1/pubsub",
    await pubsubRequest(envelope(job, { deliveryAttempt: 1 })),
  );
  assert.equal(res.status, 503);
  await res.body?.cancel();
});

/**
 * A caching JWKS source, as `googleJwks()` is: it serves what it fetched
 * until asked to refresh. `keys` is what Google publishes now.
 */
function rotatingKeys(initial: JsonWebKey[]) {
  let cached: JsonWebKey[] | undefined;
  const source = {
    keys: initial,
    refreshes: 0,
    jwks: (options: { refresh?: boolean } = {}) => {
      if (options.refresh) source.refreshes++;
      if (options.refresh || cached === undefined) cached = source.keys;
      return Promise.resolve(cached);
    },
  };
  return source;
}

/**
 * The app over a caching source of Google's keys that lists only the
 * first; `rotated` is a key Google may list later (`source.keys`), `tick`
 * moves the app's clock, and `push` answers a push with `token` (by
 * default one of the first key).
 */
async function rotatingApp() {
  const google = await theGoogle();
  const rotated = { ...google.jwks[0]!, kid: "rotated-in" } as JsonWebKey;
  const source = rotatingKeys([google.jwks[0]!]);
  let clock = 1_000_000;
  const { app, writes } = await makeApp({
    intents: [created],
    deps: {
      now: () => clock,
      pubsub: {
        audience: PUBSUB.audience,
        jwks: source.jwks,
        serviceAccount: PUBSUB.serviceAccount,
      },
    },
  });
  const body = envelope(job, { deliveryAttempt: 1 });
  return {
    google,
    rotated,
    source,
    writes,
    tick: (ms: number) => void (clock += ms),
    async push(token?: string): Promise<number> {
      const res = await app.request(
        "/v1/pubsub",
        await pubsubRequest(body, token),
      );
      await res.body?.cancel();
      return res.status;
    },
  };
}

Deno.test("createApp() refetches Google's keys once for an unknown kid, and accepts a token signed by a rotated-in key", async () => {
  const { google, rotated, source, tick, push } = await rotatingApp();
  await push(); // the keys are fetched and cached
  // Google rotated its keys: the cache does not know "rotated-in".
  source.keys = [google.jwks[0]!, rotated];
  const token = await google.token({}, { kid: "rotated-in" });
  assert.equal(await push(token), 503); // accepted: a retry, not authorized yet
  assert.equal(source.refreshes, 1);
  // Known now: no further refetch.
  tick(1);
  await push(token);
  assert.equal(source.refreshes, 1);
});

Deno.test("createApp() refetches Google's keys for unknown kids at most once a minute by its clock, then refuses", async () => {
  const { google, source, writes, tick, push } = await rotatingApp();
  const send = async (kid: string) => push(await google.token({}, { kid }));
  assert.equal(await send("made-up-1"), 401);
  assert.equal(source.refreshes, 1);
  assert.equal(await send("made-up-2"), 401);
  tick(59_999);
  assert.equal(await send("made-up-3"), 401);
  assert.equal(source.refreshes, 1); // a flood of made-up kids: one fetch a minute
  tick(1);
  assert.equal(await send("made-up-4"), 401);
  assert.equal(source.refreshes, 2);
  assert.equal(writes(), 0);
});

Deno.test("createApp() spends the refetch a minute only on a token with an unknown kid whose claims name its issuer, audience and account: a forger's made-up kid just before Google rotates does not lock the new key out", async () => {
  const { google, rotated, source, tick, push } = await rotatingApp();
  const at = Math.floor(Date.now() / 1000);
  // Made-up kids with claims that are not this route's: refused, no fetch.
  for (
    const claims of [
      { aud: "https://elsewhere.example/push" },
      { email: "someone@else.iam.gserviceaccount.com" },
      { email_verified: false },
      { iss: "https://evil.example" },
      { exp: at - 3600, iat: at - 7200 },
    ]
  ) {
    assert.equal(
      await push(await google.token(claims, { kid: "made-up" })),
      401,
      JSON.stringify(claims),
    );
  }
  assert.equal(await push("eyJraWQiOiJ4In0.bm90LWpzb24.AAAA"), 401);
  assert.equal(source.refreshes, 0);
  // Google rotates: the first push of its new key is taken at once.
  source.keys = [google.jwks[0]!, rotated];
  tick(1);
  assert.equal(await push(await google.token({}, { kid: "rotated-in" })), 503);
  assert.equal(source.refreshes, 1);
});

Deno.test("createApp() acks an authenticated but unreadable Pub/Sub message with 204, logs it and keeps it as a dead letter", async () => {
  const lines: string[] = [];
  const { app, store } = await makeApp({
    intents: [created],
    deps: { log: (line) => lines.push(line) },
  });
  const cases: [string, string, string, RegExp][] = [
    ["not JSON", "{", `pubsub/sha256-`, /The body is not JSON/],
    ["no message", "{}", "pubsub/sha256-", /'message' object/],
    [
      "bad base64",
      JSON.stringify({ message: { messageId: "m-1", data: "!!!" } }),
      "pubsub/m-1/unreadable",
      /standard base64/,
    ],
    [
      "not a job",
      JSON.stringify({ message: { messageId: "m-2", data: btoa("not json") } }),
      "pubsub/m-2/unreadable",
      // The envelope, the body, was JSON: its data was not.
      /: 'message\.data', decoded, is not JSON: send a job such as \{"intentId":"pi_0001","kind":"settle"\}\.$/,
    ],
    [
      "no message id",
      JSON.stringify({ message: { data: btoa(JSON.stringify(job)) } }),
      "pubsub/sha256-",
      /messageId/,
    ],
    [
      "a message id with a control character",
      envelope(job, { deliveryAttempt: 1, messageId: "m\u00005" }),
      "pubsub/sha256-",
      /messageId/,
    ],
    [
      "job without kind",
      envelope({ intentId: "pi_0001" }, { messageId: "m-4" }),
      "pubsub/m-4/unreadable",
      /'kind' must be "settle"/,
    ],
  ];
  const kept = async () => (await store.listDeadLetters({ limit: 100 })).items;
  for (const [name, body, jobId, reason] of cases) {
    const before = new Set((await kept()).map((d) => d.jobId));
    const res = await app.request("/v1/pubsub", await pubsubRequest(body));
    assert.equal(res.status, 204, name);
    assert.equal(await res.text(), "");
    const letter = (await kept()).find((d) =>
      !before.has(d.jobId) && d.jobId.startsWith(jobId)
    );
    assert.ok(letter, `${name}: no dead letter ${jobId}`);
    assert.match(letter.jobId, /^pubsub\/[^/]+\/unreadable$/);
    assert.match(letter.reason, /^unreadable Pub\/Sub message: /);
    assert.match(letter.reason, reason, name);
    assert.equal(letter.cause, "declared");
    assert.equal(letter.poisonedAt, NOW);
    const line = lines.find((l) => l.includes(letter.jobId));
    assert.ok(line, `${name}: not logged`);
    assert.doesNotMatch(line, new RegExp(SECRET));
  }
  // The intent a job without kind named is kept on its letter, untouched.
  assert.equal(
    (await store.getDeadLetter("pubsub/m-4/unreadable"))?.intentId,
    "pi_0001",
  );
  assert.equal((await store.getIntent("pi_0001"))?.state, "created");
  // Its dead letter cannot be taken for a job and redriven.
  const redrive = await app.request(
    `/v1/dead-letters/${encodeURIComponent("pubsub/m-4/unreadable")}/redrive`,
    { method: "POST", headers: { authorization: `Bearer ${OPS}` } },
  );
  assert.equal(redrive.status, 400);
  await problemOf(redrive);
});

Deno.test("createApp() answers 503 for an unreadable Pub/Sub message it cannot keep, so Pub/Sub redelivers it", async () => {
  const memory = new MemoryStore();
  const google = await theGoogle();
  const app = createApp({
    store: lettersDown(memory, "KV down at secret-host"),
    sender: new ScriptedSender({}),
    pubsub: {
      audience: PUBSUB.audience,
      jwks: google.jwks,
      serviceAccount: PUBSUB.serviceAccount,
    },
  });
  const res = await app.request("/v1/pubsub", await pubsubRequest("{"));
  assert.equal(res.status, 503);
  assert.doesNotMatch(JSON.stringify(await problemOf(res)), /secret-host/);
});

Deno.test("createApp() refuses an unauthenticated unreadable Pub/Sub message with 401, keeping nothing", async () => {
  const { app, writes } = await makeApp({ intents: [created] });
  const res = await app.request("/v1/pubsub", { method: "POST", body: "{" });
  assert.equal(res.status, 401);
  assert.equal(writes(), 0);
});

// ---------------------------------------------------------------------------
// Ops routes

const ops = { authorization: `Bearer ${OPS}` };

Deno.test("createApp() ops routes refuse a missing or wrong token", async () => {
  const { app } = await makeApp({ intents: [created] });
  for (
    const headers of [{}, { authorization: "Bearer nope" }, {
      authorization: OPS,
    }]
  ) {
    const res = await app.request("/v1/intents/pi_0001", { headers });
    assert.equal(res.status, 401);
    await problemOf(res);
  }
});

Deno.test("createApp() ops routes take the Bearer scheme in any case, as HTTP does", async () => {
  const { app } = await makeApp({ intents: [created] });
  for (const scheme of ["Bearer", "bearer", "BEARER"]) {
    const res = await app.request("/v1/intents/pi_0001", {
      headers: { authorization: `${scheme} ${OPS}` },
    });
    assert.equal(res.status, 200);
    await res.body?.cancel();
  }
  const res = await app.request("/v1/intents/pi_0001", {
    headers: { authorization: `Basic ${OPS}` },
  });
  assert.equal(res.status, 401);
  await problemOf(res);
});

Deno.test("createApp() GET /v1/intents/:id shows the intent, its deliveries and dead letter", async () => {
  const { app } = await makeApp({ intents: [created] });
  await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job })),
  );
  const res = await app.request("/v1/intents/pi_0001", { headers: ops });
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.intent.state, "created");
  assert.equal(body.deliveries, 1);
  assert.equal(body.deadLetter, null);
  assert.equal(
    (await app.request("/v1/intents/pi_9", { headers: ops })).status,
    404,
  );
  assert.equal(
    (await app.request("/v1/intents/bad%20id", { headers: ops })).status,
    400,
  );
});

Deno.test("createApp() lists dead letters and redrives one, refusing a failed intent with 409", async () => {
  const enqueued: unknown[] = [];
  const { app } = await makeApp({
    intents: [created, { id: "pi_0002", state: "authorized", hold: "pending" }],
    scripts: { pi_0002: { sends: [{ error: poison(notSent("no")) }] } },
    deps: {
      redriveTo: { publish: (j) => Promise.resolve(void enqueued.push(j)) },
    },
  });
  // pi_0001 runs out of deliveries; pi_0002's first declares poison and
  // not sent (its last would send nothing: an authorized intent's send
  // waits for a delivery that can read its receipt).
  for (const [intentId, delivery] of [["pi_0001", 3], ["pi_0002", 1]]) {
    await app.request(
      "/v1/deliveries",
      await genericRequest(
        JSON.stringify({ job: { intentId, kind: "settle" }, delivery }),
      ),
    );
  }
  const list =
    await (await app.request("/v1/dead-letters?limit=10", { headers: ops }))
      .json();
  assert.deepEqual(list.items.map((d: { jobId: string }) => d.jobId).sort(), [
    "pi_0001/settle",
    "pi_0002/settle",
  ]);

  const redriven = await app.request(
    "/v1/dead-letters/pi_0001%2Fsettle/redrive",
    { method: "POST", headers: ops },
  );
  assert.equal(redriven.status, 202);
  assert.deepEqual(await redriven.json(), {
    job,
    jobId: "pi_0001/settle",
    enqueued: true,
  });
  assert.deepEqual(enqueued, [job]);

  const refused = await app.request(
    "/v1/dead-letters/pi_0002%2Fsettle/redrive",
    { method: "POST", headers: ops },
  );
  assert.equal(refused.status, 409);
  assert.match((await problemOf(refused)).detail, /already failed/);
  assert.equal(
    (await app.request("/v1/dead-letters/pi_7%2Fsettle/redrive", {
      method: "POST",
      headers: ops,
    })).status,
    404,
  );
  for (const limit of ["0", "0x10", "1e1", "3.0", "%203%20", "1001"]) {
    assert.equal(
      (await app.request(`/v1/dead-letters?limit=${limit}`, { headers: ops }))
        .status,
      400,
      limit,
    );
  }
  // An id a URL would resolve away could be created, never read back.
  for (const id of [".", ".."]) {
    const created = await app.request("/v1/intents", {
      method: "POST",
      headers: ops,
      body: JSON.stringify({ id, state: "created" }),
    });
    assert.equal(created.status, 400, id);
    assert.match((await problemOf(created)).detail, /not "\." or "\.\."/);
  }
  assert.equal(
    (await app.request("/v1/dead-letters?cursor=zzz", { headers: ops })).status,
    400,
  );
});

Deno.test("createApp() POST /v1/jobs enqueues on the local queue, or says it is off, and refuses a bad job with a 400 either way", async () => {
  const { app: off } = await makeApp();
  const res = await off.request("/v1/jobs", {
    method: "POST",
    headers: ops,
    body: JSON.stringify(job),
  });
  assert.equal(res.status, 503);
  assert.match(
    (await problemOf(res)).detail,
    /set QSTASH_TOKEN, or KV_QUEUE=1 on a Deno KV file, as the local queue runs neither on Deno Deploy nor with KV_URL or DATABASE_URL/,
  );
  // A bad job is the caller's to fix first, queue or not.
  const badOff = await off.request("/v1/jobs", {
    method: "POST",
    headers: ops,
    body: "{}",
  });
  assert.equal(badOff.status, 400);

  const enqueued: unknown[] = [];
  const { app, store } = await makeApp({
    deps: { enqueue: (j) => Promise.resolve(void enqueued.push(j)) },
  });
  // A job for no intent would only retry "not found" until poisoned.
  const missing = await app.request("/v1/jobs", {
    method: "POST",
    headers: ops,
    body: JSON.stringify(job),
  });
  assert.equal(missing.status, 404);
  assert.match(
    (await problemOf(missing)).detail,
    /^There is no intent pi_0001: create it first/,
  );
  assert.deepEqual(enqueued, []);
  await store.createIntent({ id: "pi_0001" });
  const ok = await app.request("/v1/jobs", {
    method: "POST",
    headers: ops,
    body: JSON.stringify(job),
  });
  assert.equal(ok.status, 202);
  // 'job' stays the id it always was here; 'jobId' reads the same on a
  // redrive's answer, whose 'job' is the job itself.
  assert.deepEqual(await ok.json(), {
    job: "pi_0001/settle",
    jobId: "pi_0001/settle",
    enqueued: true,
  });
  assert.deepEqual(enqueued, [job]);
  const bad = await app.request("/v1/jobs", {
    method: "POST",
    headers: ops,
    body: "{}",
  });
  assert.equal(bad.status, 400);
});

Deno.test("createApp() POST /v1/jobs answers 503 when the queue refuses the job, logs why, and never shows the error", async () => {
  const lines: string[] = [];
  const { app, store } = await makeApp({
    deps: {
      enqueue: () =>
        Promise.reject(new Error("QStash publish failed: 401 token=secret-x")),
      log: (line) => lines.push(line),
    },
  });
  await store.createIntent({ id: "pi_0001" });
  const res = await app.request("/v1/jobs", {
    method: "POST",
    headers: ops,
    body: JSON.stringify(job),
  });
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("retry-after"), "5");
  const p = await problemOf(res);
  assert.equal(p.type, "urn:relayer:problem:enqueue-failed");
  assert.match(p.detail, /^The queue did not take pi_0001\/settle .*try again/);
  assert.doesNotMatch(JSON.stringify(p), /secret-x|401/);
  assert.deepEqual(lines, [
    "relayer enqueue of pi_0001/settle failed: Error: QStash publish failed: 401 token=secret-x",
  ]);
});

Deno.test("createApp() bad-JSON refusals show the body each route takes", async () => {
  const { app } = await makeApp({
    deps: { enqueue: () => Promise.resolve() },
  });
  const delivery = await app.request(
    "/v1/deliveries",
    await genericRequest("{"),
  );
  assert.equal(delivery.status, 400);
  assert.equal(
    (await problemOf(delivery)).detail,
    'The body is not JSON: send {"job":{"intentId":"pi_0001","kind":"settle"},"delivery":1,"messageId":"m-1"} (\'delivery\' and \'messageId\' are optional).',
  );
  // A bare job, signed: valid JSON, but not the route's body.
  const bare = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify(job)),
  );
  assert.equal(bare.status, 400);
  assert.match(
    (await problemOf(bare)).detail,
    /^'job' is missing: .*; this body looks like a bare job: wrap it in \{"job": …\}\. Kept as the dead letter generic\/sha256-[0-9a-f]{32}\/unreadable: publish a readable job for intent pi_0001, then discard the letter\.$/,
  );
  const intent = await app.request("/v1/intents", {
    method: "POST",
    headers: ops,
    body: "{",
  });
  assert.equal(intent.status, 400);
  const p = await problemOf(intent);
  assert.equal(p.type, "urn:relayer:problem:bad-intent");
  assert.match(
    p.detail,
    /send an intent such as \{"id":"pi_0001","state":"authorized"\}/,
  );
  const jobs = await app.request("/v1/jobs", {
    method: "POST",
    headers: ops,
    body: "{",
  });
  assert.match(
    (await problemOf(jobs)).detail,
    /send a job such as \{"intentId"/,
  );
});

Deno.test("createApp() answers /healthz without a token", async () => {
  const { app } = await makeApp();
  const res = await app.request("/healthz");
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { status: "ok" });
});

Deno.test("createApp() never leaks a stack trace when an ops route fails", async () => {
  const app = createApp({
    store: new Proxy(new MemoryStore(), {
      get: () => () => Promise.reject(new Error("boom at /srv/secret.ts:1:1")),
    }),
    sender: new ScriptedSender({}),
    opsToken: OPS,
    webhookSecret: SECRET,
    log: () => {},
  });
  const res = await app.request("/v1/intents/pi_0001", { headers: ops });
  assert.equal(res.status, 503);
  assert.doesNotMatch(
    JSON.stringify(await problemOf(res)),
    /boom|secret|at \//,
  );
});

Deno.test("createApp() answers a bad cursor or intent id with a 400, and the store's own failure (a failed fetch's TypeError, or any error) on an ops route with a 503 and Retry-After", async () => {
  const memory = new MemoryStore();
  const good = createApp({
    store: memory,
    sender: new ScriptedSender({}),
    opsToken: OPS,
  });
  const cursor = await good.request("/v1/dead-letters?cursor=W10%3D", {
    headers: ops,
  });
  assert.equal(cursor.status, 400);
  assert.equal(
    (await problemOf(cursor)).type,
    "urn:relayer:problem:bad-cursor",
  );
  const id = await good.request("/v1/intents", {
    method: "POST",
    headers: ops,
    body: '{"id":"pi 1","state":"authorized"}',
  });
  assert.equal(id.status, 400);
  assert.match((await problemOf(id)).detail, /^'id' must be .*"pi 1"\.$/);
  // KV Connect and other stores over fetch: a network failure is a TypeError.
  const failing = createApp({
    store: new Proxy(memory, {
      get: (target, key) =>
        key === "createIntent" || key === "listDeadLetters"
          ? () => Promise.reject(new TypeError("error sending request"))
          : key === "getIntent"
          ? () => Promise.reject(new Error("connection refused"))
          : Reflect.get(target, key),
    }),
    sender: new ScriptedSender({}),
    opsToken: OPS,
    log: () => {},
  });
  const answers = [
    await failing.request("/v1/dead-letters", { headers: ops }),
    await failing.request("/v1/intents", {
      method: "POST",
      headers: ops,
      body: '{"id":"pi_1","state":"authorized"}',
    }),
    await failing.request("/v1/intents/pi_1", { headers: ops }),
  ];
  for (const res of answers) {
    assert.equal(res.status, 503, res.url);
    assert.equal(res.headers.get("retry-after"), "5");
    const problem = await problemOf(res);
    assert.equal(problem.type, "urn:relayer:problem:store-failed");
    // A write (the creation) may have landed before its answer was lost.
    assert.match(
      problem.detail,
      answers.indexOf(res) === 1
        ? /it may have landed or not\. Read it \(GET \/v1\/intents\/pi_1\) before you try again\.$/
        : /could not reach the store .*: try again\.$/,
    );
  }
  // A lock another database session held (PostgresStore's 55P03, 57014)
  // is not an unreachable store: the answer sends the operator to it.
  const held = createApp({
    store: new Proxy(memory, {
      get: (target, key) =>
        key === "getIntent"
          ? () =>
            Promise.reject(
              heldBySession(
                "Cannot read intent pi_1 as another session held a lock it needed for over 5000ms (lock_timeout; see pg_locks and pg_stat_activity): nothing was written; retry",
                new Error("canceling statement due to lock timeout"),
              ),
            )
          : Reflect.get(target, key),
    }),
    sender: new ScriptedSender({}),
    opsToken: OPS,
    log: () => {},
  });
  const answer = await held.request("/v1/intents/pi_1", { headers: ops });
  assert.equal(answer.status, 503);
  assert.equal(answer.headers.get("retry-after"), "5");
  assert.equal(
    (await problemOf(answer)).detail,
    "The read of intent pi_1 was held up in the database (another session's lock, or a statement cancelled by statement_timeout or pg_cancel_backend; the relayer's log names it): nothing changed; try again.",
  );
});

Deno.test("createApp() validates maxBodyBytes", () => {
  assert.throws(
    () =>
      createApp({
        store: new MemoryStore(),
        sender: new ScriptedSender({}),
        maxBodyBytes: 0,
      }),
    /'maxBodyBytes' must be an integer >= 1/,
  );
});

Deno.test("createApp() POST /v1/intents creates an intent for setup, refusing bad or duplicate ones and fields it would not use", async () => {
  const { app, store } = await makeApp();
  const create = (body: unknown) =>
    app.request("/v1/intents", {
      method: "POST",
      headers: ops,
      body: JSON.stringify(body),
    });
  const res = await create({ id: "pi_0009", state: "authorized" });
  assert.equal(res.status, 201);
  assert.equal((await res.json()).intent.hold, "pending");
  assert.equal((await store.getIntent("pi_0009"))?.state, "authorized");
  const duplicate = await create({ id: "pi_0009" });
  assert.equal(duplicate.status, 409);
  assert.equal(
    (await problemOf(duplicate)).detail,
    "Cannot create intent pi_0009 as it exists: read it with GET /v1/intents/pi_0009 (this route only creates, it changes no intent).",
  );
  assert.equal((await create({ id: "bad id" })).status, 400);
  assert.equal((await create({ id: "pi_0010", state: "settled" })).status, 400);
  // Nor a state past authorized: a settling intent made here would say a
  // send may have left, with none on record, and no job to follow it up.
  for (const state of ["settling", "needs_review", "failed"]) {
    const refused = await create({ id: "pi_0010", state, hold: "pending" });
    assert.equal(refused.status, 400, state);
    assert.equal(
      (await problemOf(refused)).detail,
      '\'state\' must be "created" or "authorized".',
    );
  }
  assert.equal(await store.getIntent("pi_0010"), null);
  // A field it would not use is refused, not dropped unseen.
  for (
    const [body, detail] of [
      [
        { id: "pi_0010", hold: "voided" },
        /^'hold' must be "pending" \(or left out\): current value is "voided"\.$/,
      ],
      [
        { id: "pi_0010", amount: 100 },
        /^"amount" is not a field of a new intent: send 'id'/,
      ],
      // A job's field where the intent's id belongs: named, not an id
      // said to be undefined.
      [
        { intentId: "pi_0010", state: "authorized" },
        /^"intentId" is not a field of a new intent: send 'id'/,
      ],
      // An id there but bad, no field at all, or a body that is no object
      // (an array's indexes are no fields): the id is the slip.
      [
        { id: "bad id", amount: 100 },
        /^'id' must be .*: current value is "bad id"\.$/,
      ],
      [{}, /^'id' must be .*: current value is undefined\.$/],
      [["pi_0010"], /^'id' must be .*: current value is undefined\.$/],
      ["pi_0010", /^'id' must be .*: current value is undefined\.$/],
    ] as const
  ) {
    const refused = await create(body);
    assert.equal(refused.status, 400);
    assert.match((await problemOf(refused)).detail, detail);
  }
  assert.equal(await store.getIntent("pi_0010"), null);
  const held = await create({ id: "pi_0011", hold: "pending" });
  assert.equal((await held.json()).intent.hold, "pending");
  assert.equal(
    (await app.request("/v1/intents", { method: "POST", body: "{}" })).status,
    401,
  );
});

Deno.test("createApp() answers 503 when Google's keys cannot be fetched, so Pub/Sub redelivers, and says why in the log at most once a minute", async () => {
  const lines: string[] = [];
  let clock = 1_000_000;
  const { app, writes } = await makeApp({
    intents: [created],
    deps: {
      now: () => clock,
      log: (line) => lines.push(line),
      pubsub: {
        audience: "https://relayer.example.test/v1/pubsub",
        jwks: () => Promise.reject(new Error("googleapis unreachable")),
        serviceAccount: PUBSUB.serviceAccount,
      },
    },
  });
  const push = async () =>
    await app.request(
      "/v1/pubsub",
      await pubsubRequest(envelope(job, { deliveryAttempt: 1 })),
    );
  const res = await push();
  assert.equal(res.status, 503);
  assert.doesNotMatch(JSON.stringify(await problemOf(res)), /googleapis/);
  assert.equal(writes(), 0);
  const said =
    /^relayer cannot verify Pub\/Sub pushes now: .*googleapis unreachable.* \(answering 503, so Pub\/Sub redelivers\)$/;
  assert.equal(
    lines.filter((line) => said.test(line)).length,
    1,
    lines.join("\n"),
  );
  clock += 59_999;
  await (await push()).body?.cancel();
  assert.equal(lines.filter((line) => said.test(line)).length, 1);
  clock += 1;
  await (await push()).body?.cancel();
  assert.equal(lines.filter((line) => said.test(line)).length, 2);
});

/** A store's property, its methods bound to it (they read private fields). */
function bound(target: object, key: string | symbol): unknown {
  const value = Reflect.get(target, key, target);
  return typeof value === "function" ? value.bind(target) : value;
}

Deno.test("createApp() GET /readyz answers 200 while the store answers a read, and 503 with Retry-After, logged, while it fails or hangs; one probe serves a second", async () => {
  // A time of today: stepped back an hour, it is still one after 1970.
  let clock = 1_800_000_000_000;
  let reads = 0;
  let mode: "ok" | "fail" | "hang" = "ok";
  const lines: string[] = [];
  const memory = new MemoryStore();
  const app = createApp({
    store: new Proxy(memory, {
      get: (target, key) =>
        key === "getIntent"
          ? (id: string) => {
            reads++;
            if (mode === "fail") return Promise.reject(new Error("db down"));
            if (mode === "hang") return new Promise(() => {});
            return target.getIntent(id);
          }
          : bound(target, key),
    }),
    sender: new ScriptedSender({}),
    now: () => clock,
    log: (line) => lines.push(line),
  });
  const ready = await app.request("/readyz");
  assert.equal(ready.status, 200);
  assert.deepEqual(await ready.json(), { status: "ready" });
  // Within the second, the same probe answers: the store is read once.
  mode = "fail";
  assert.equal((await app.request("/readyz")).status, 200);
  assert.equal(reads, 1);
  clock += 1_000;
  const failed = await app.request("/readyz");
  assert.equal(failed.status, 503);
  assert.equal(failed.headers.get("retry-after"), "5");
  const problem = await problemOf(failed);
  assert.equal(problem.type, "urn:relayer:problem:not-ready");
  assert.doesNotMatch(JSON.stringify(problem), /db down/);
  assert.deepEqual(lines, [
    "relayer not ready: the store failed a read: Error: db down",
  ]);
  // A clock stepped back does not keep an old answer.
  mode = "ok";
  clock -= 3_600_000;
  assert.equal((await app.request("/readyz")).status, 200);
  // A store that never answers is not ready either, within 2 s.
  mode = "hang";
  clock += 1_000;
  const started = Date.now();
  assert.equal((await app.request("/readyz")).status, 503);
  assert.ok(Date.now() - started < 3_000);
  assert.match(lines.at(-1)!, /no answer within 2000ms/);
  // /healthz says only that the process answers.
  assert.equal((await app.request("/healthz")).status, 200);
  assert.equal((await app.request("/readyz", { method: "POST" })).status, 405);
});

Deno.test("createApp() GET /readyz answers 503 for a store that answers reads but refuses writes (a primary gone read-only), as deliveries treat it, and logs why", async () => {
  let readOnly = false;
  const lines: string[] = [];
  const memory = new MemoryStore();
  let clock = 1_000_000;
  const app = createApp({
    store: new Proxy(memory, {
      get: (target, key) =>
        key === "admit" && readOnly
          ? () =>
            Promise.reject(
              new Error("cannot execute INSERT in a read-only transaction"),
            )
          : bound(target, key),
    }),
    sender: new ScriptedSender({}),
    now: () => clock,
    log: (line) => lines.push(line),
  });
  assert.equal((await app.request("/readyz")).status, 200);
  readOnly = true;
  clock += 1_000;
  const refused = await app.request("/readyz");
  assert.equal(refused.status, 503);
  assert.match((await problemOf(refused)).detail, /refused a write/);
  assert.deepEqual(lines, [
    "relayer not ready: the store refused a write: Error: cannot execute INSERT in a read-only transaction",
  ]);
});

Deno.test("createApp() refuses a replay of a signed QStash message that is not a job (401), whatever Upstash-Message-Id it carries: the header is not signed, and no letter is written or replaced", async () => {
  const { app, store, writes } = await makeApp({ intents: [created] });
  const init = await qstashRequest("{", { "upstash-message-id": "msg_A1" });
  const first = await app.request("/v1/qstash", init);
  assert.equal(first.status, 489);
  await first.body?.cancel();
  const letter = await store.getDeadLetter("qstash/msg_A1/unreadable");
  assert.ok(letter !== null);
  for (const id of ["msg_A1", "msg_victim", "anything"]) {
    const replay = await app.request("/v1/qstash", {
      ...init,
      headers: { ...init.headers, "upstash-message-id": id },
    });
    assert.equal(replay.status, 401, id);
    assert.match((await replay.json()).detail, /already delivered/);
  }
  // Each replay tried its letter's write, which its claim refused.
  assert.equal(writes(), 4);
  assert.deepEqual(
    (await store.listDeadLetters()).items.map((d) => d.jobId),
    ["qstash/msg_A1/unreadable"],
  );
  assert.equal(
    (await store.getDeadLetter("qstash/msg_A1/unreadable"))?.version,
    letter.version,
  );
});

Deno.test("createApp() refuses an insecureDev that is not a boolean, such as the text of a setting", async () => {
  for (const insecureDev of ["false", "0", "no", 1, {}]) {
    assert.throws(
      () =>
        createApp({
          store: new MemoryStore(),
          sender: new ScriptedSender({}),
          insecureDev: insecureDev as unknown as boolean,
        }),
      (error: Error) => {
        assert.ok(error instanceof TypeError);
        assert.match(error.message, /'insecureDev' must be true or false/);
        return true;
      },
    );
  }
  // Left out or false, an unconfigured route stays closed.
  const app = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    insecureDev: false,
  });
  assert.equal((await app.request("/v1/dead-letters")).status, 503);
});

Deno.test("createApp() takes only a function for 'monotonicNow', and a reading of it that is not a finite number fails the resolution (500) rather than end the send-in-flight wait, writing nothing", async () => {
  assert.throws(
    () =>
      createApp({
        store: new MemoryStore(),
        sender: new ScriptedSender({}),
        monotonicNow: 5 as unknown as () => number,
      }),
    /'monotonicNow' must be a function/,
  );
  for (const reading of [NaN, Infinity, "0"]) {
    const lines: string[] = [];
    const { app, store } = await makeApp({
      intents: [{ id: "pi_0002", state: "needs_review", hold: "pending" }],
      deps: {
        log: (line) => lines.push(line),
        monotonicNow: () => reading as number,
      },
    });
    const before = await store.getIntent("pi_0002");
    const res = await failByHand(app, before?.version);
    assert.equal(res.status, 500, await res.clone().text());
    await res.body?.cancel();
    assert.deepEqual(await store.getIntent("pi_0002"), before);
    assert.ok(
      lines.some((line) => line.includes("'monotonicNow' returned")),
      lines.join("\n"),
    );
  }
});

Deno.test("createApp() checks its clock's readings as the relayer does: an operator's resolution and a counted delivery fail naming 'now', and nothing is written", async () => {
  const lines: string[] = [];
  let mono = 0;
  const { app, store } = await makeApp({
    intents: [
      { id: "pi_0002", state: "needs_review", hold: "pending" },
      AUTHORIZED,
    ],
    deps: {
      now: () => NOW + 0.5,
      log: (line) => lines.push(line),
      monotonicNow: () => mono,
    },
  });
  const before = await store.getIntent("pi_0002");
  // Imported in review with nothing on record, it may have sent: the
  // operator looked its nonce up, and a send that may still run has had
  // its lease, so the write is all that is left.
  const fail = () => failByHand(app, before?.version);
  const waited = await fail();
  assert.equal(waited.status, 409, await waited.clone().text());
  assert.match((await waited.json()).type, /send-in-flight$/);
  mono += 30_000; // the lease
  const resolve = await fail();
  assert.ok(resolve.status >= 500, await resolve.text());
  assert.deepEqual(await store.getIntent("pi_0002"), before);
  // A delivery without its number: the store counts it, at the app's time.
  const body = JSON.stringify({ job });
  const delivered = await app.request(
    "/v1/deliveries",
    await genericRequest(body),
  );
  assert.ok(delivered.status >= 500, await delivered.text());
  assert.equal(await store.deliveries("pi_0001/settle"), 0);
  for (const route of ["resolution of intent pi_0002", "/v1/deliveries"]) {
    assert.ok(
      lines.some((line) =>
        line.includes(route) &&
        line.includes(
          "'now' must return a whole number of milliseconds, as Date.now() does: it returned 1000000.5",
        )
      ),
      `${route}:\n${lines.join("\n")}`,
    );
  }
});
