/**
 * What the ops routes' answers tell a cache and a browser: an answer that
 * holds a payment (an intent, its hold, its tx hashes, a dead letter) is
 * never stored by a proxy or a browser, whatever its status; and no answer
 * lets a page of another origin read it or send it a token.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { type Job, MemoryStore, ScriptedSender } from "../../mod.ts";

const OPS = "ops-token-for-answer-tests";
const ops = { authorization: `Bearer ${OPS}` };

/** An app whose store holds pi_0001 (created) with a dead letter, and pi_0002 (settled). */
async function opsApp(log: (line: string) => void = () => {}) {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  await store.createIntent({ id: "pi_0002", state: "settled" });
  const app = createApp({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 1 },
    insecureDev: true, // an unsigned delivery makes the dead letter
    opsToken: OPS,
    redriveTo: { publish: (_job: Job) => Promise.resolve() },
    enqueue: (_job: Job) => Promise.resolve(),
    log,
  });
  const poisoned = await app.request("/v1/deliveries", {
    method: "POST",
    body: JSON.stringify({
      job: { intentId: "pi_0001", kind: "settle" },
      delivery: 1,
    }),
  });
  assert.equal((await poisoned.json()).outcome, "poison");
  return app;
}

Deno.test("createApp() answers every ops route with Cache-Control: no-store, whatever the status, so no proxy or browser keeps a payment", async () => {
  const app = await opsApp();
  const calls: [string, RequestInit, number][] = [
    ["/v1/intents/pi_0001", { headers: ops }, 200],
    ["/v1/intents/pi_0001", { method: "HEAD", headers: ops }, 200],
    ["/v1/intents/pi_0404", { headers: ops }, 404],
    ["/v1/intents/pi_0001", {}, 401],
    ["/v1/dead-letters", { headers: ops }, 200],
    ["/v1/dead-letters?limit=0", { headers: ops }, 400],
    ["/v1/dead-letters", { headers: { authorization: "Bearer nope" } }, 401],
    ["/v1/dead-letters", { method: "PUT", headers: ops }, 405],
    [
      "/v1/intents",
      {
        method: "POST",
        headers: ops,
        body: JSON.stringify({ id: "pi_0003", state: "authorized" }),
      },
      201,
    ],
    [
      "/v1/intents/pi_0002/resolve",
      {
        method: "POST",
        headers: ops,
        body: JSON.stringify({ to: "failed", version: "1" }),
      },
      409,
    ],
    [
      "/v1/jobs",
      {
        method: "POST",
        headers: ops,
        body: JSON.stringify({ intentId: "pi_0003", kind: "settle" }),
      },
      202,
    ],
    [
      "/v1/dead-letters/pi_0001/settle",
      { method: "DELETE", headers: ops },
      409,
    ],
    [
      "/v1/dead-letters/pi_0001/settle/redrive",
      { method: "POST", headers: ops },
      202,
    ],
    [
      "/v1/dead-letters/pi_0001%2Fsettle",
      { method: "DELETE", headers: ops },
      404,
    ],
  ];
  for (const [path, init, status] of calls) {
    const res = await app.request(path, init);
    const what = `${init.method ?? "GET"} ${path}`;
    assert.equal(res.status, status, `${what}: ${await res.clone().text()}`);
    assert.equal(res.headers.get("cache-control"), "no-store", what);
    await res.body?.cancel();
  }
  // A queue's delivery is not an operator's read: its answer is unchanged.
  const health = await app.request("/healthz");
  assert.equal(health.headers.get("cache-control"), null);
  await health.body?.cancel();
});

Deno.test("createApp() answers a browser's preflight of an ops route with no CORS permission, and a cross-origin read with none either", async () => {
  const app = await opsApp();
  const preflight = await app.request("/v1/dead-letters", {
    method: "OPTIONS",
    headers: {
      origin: "https://elsewhere.example",
      "access-control-request-method": "GET",
      "access-control-request-headers": "authorization",
    },
  });
  assert.equal(preflight.status, 405);
  await preflight.body?.cancel();
  const read = await app.request("/v1/dead-letters", {
    headers: { ...ops, origin: "https://elsewhere.example" },
  });
  assert.equal(read.status, 200);
  await read.body?.cancel();
  for (const res of [preflight, read]) {
    for (const [name] of res.headers) {
      assert.ok(!name.startsWith("access-control-"), name);
    }
  }
});

Deno.test("createApp() takes the ops token in one Authorization header as Bearer alone: a second header, the query, Basic or a tab refuse the call, and the log never holds it", async () => {
  const lines: string[] = [];
  const app = await opsApp((line) => void lines.push(line));
  const twice = new Headers();
  twice.append("authorization", `Bearer ${OPS}`);
  twice.append("authorization", `Bearer ${OPS}`);
  const refused: [string, HeadersInit][] = [
    ["/v1/dead-letters", twice],
    [`/v1/dead-letters?access_token=${OPS}`, {}],
    [`/v1/intents/pi_0001?token=${OPS}`, {}],
    ["/v1/dead-letters", { authorization: `Basic ${btoa(`ops:${OPS}`)}` }],
    ["/v1/dead-letters", { authorization: `Bearer\t${OPS}` }],
    ["/v1/dead-letters", { authorization: `Bearer ${OPS}x` }],
    ["/v1/dead-letters", { authorization: `Bearer ${OPS.slice(0, -1)}` }],
  ];
  for (const [path, headers] of refused) {
    const res = await app.request(path, { headers });
    assert.equal(
      res.status,
      401,
      `${path} ${JSON.stringify([...new Headers(headers)])}`,
    );
    assert.equal(res.headers.get("www-authenticate"), 'Bearer realm="relayer"');
    await res.body?.cancel();
  }
  assert.ok(
    lines.some((line) => / refused 401: /.test(line)),
    lines.join("\n"),
  );
  for (const line of lines) {
    assert.ok(!line.includes(OPS.slice(0, 12)), line);
  }
});
