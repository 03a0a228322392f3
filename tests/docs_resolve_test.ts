/**
 * What routes.md and runbook.md tell an operator about resolving a payment
 * in review, held to the route: the bodies they give do what they say on a
 * review the relayer made, and every refusal the route can answer is named
 * where the operator reads.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createApp } from "../webhook/app.ts";
import {
  createRelayer,
  definePolicy,
  MemoryStore,
  notSent,
  ScriptedSender,
  type SenderScript,
} from "../mod.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const read = (path: string) => Deno.readTextFileSync(join(ROOT, path));

const OPS = "ops-token-for-docs-tests";
const headers = { authorization: `Bearer ${OPS}` };

/** routes.md's section on a payment in review, up to the next heading. */
function reviewSection(): string {
  const routes = read("docs/routes.md");
  const start = routes.indexOf("## A payment in review");
  assert.notEqual(start, -1, "routes.md has no 'A payment in review'");
  const end = routes.indexOf("\n## ", start + 1);
  return routes.slice(start, end === -1 ? undefined : end);
}

/**
 * The problem types the resolve route answers, with their statuses, from
 * its source: its own `problem(…)` calls and `storeFailed`'s 503.
 */
function resolveProblems(): Map<string, number> {
  const source = read("webhook/app.ts");
  const start = source.indexOf('app.post("/v1/intents/:id/resolve"');
  assert.notEqual(start, -1, "webhook/app.ts has no resolve route");
  const end = source.indexOf("\n  app.", start + 1);
  const route = source.slice(start, end);
  const found = new Map<string, number>();
  for (
    const [, status, type] of route.matchAll(
      /problem\(\s*(\d{3}),\s*"([a-z-]+)"/g,
    )
  ) {
    found.set(type!, Number(status));
  }
  // Its store's failures answer through storeFailed: 503 store-failed,
  // whose write's answer may have been lost after it landed.
  if (/\bstoreFailed\(/.test(route)) found.set("store-failed", 503);
  assert.ok(found.size >= 8, `too few problems read: ${[...found.keys()]}`);
  return found;
}

/** The lease of the apps here (the relayer's default). */
const LEASE_MS = 30_000;

/**
 * An app whose store holds `pi_1` where the relayer left it: in review
 * after `script`, its job's deliveries spent. `resolve` posts a body;
 * `afterTheWait` posts it, checks that the first answer is 409
 * `send-in-flight` with a `Retry-After` of a lease (a send of a payment that
 * may have sent may still run in some instance, with nothing on record),
 * steps the app's monotonic clock a lease on, as the operator waits, and
 * returns the answer to the same body posted again.
 */
async function reviewedBy(script: SenderScript) {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
  });
  let clock = 0;
  const sender = new ScriptedSender({ pi_1: script });
  const policy = definePolicy({
    maxDeliveries: 4,
    baseMs: 1_000,
    capMs: 1_000,
    jitter: "none",
    stuckAfterMs: 1_000,
  });
  const relayer = createRelayer({ store, sender, policy, now: () => clock });
  for (let delivery = 1; delivery <= 4; delivery++) {
    await relayer.deliver({ intentId: "pi_1", kind: "settle" }, delivery);
    clock += 1_000;
  }
  const intent = await store.getIntent("pi_1");
  assert.equal(intent?.state, "needs_review", JSON.stringify(intent));
  let mono = 0;
  const app = createApp({
    store,
    sender,
    opsToken: OPS,
    now: () => clock,
    monotonicNow: () => mono,
  });
  const resolve = (body: string) =>
    app.request("/v1/intents/pi_1/resolve", { method: "POST", headers, body });
  const afterTheWait = async (body: string) => {
    const first = await resolve(body);
    const problem = await first.json();
    assert.equal(first.status, 409, `${body}: ${JSON.stringify(problem)}`);
    assert.equal(problem.type, "urn:relayer:problem:send-in-flight", body);
    assert.equal(first.headers.get("retry-after"), String(LEASE_MS / 1000));
    assert.equal((await store.getIntent("pi_1"))?.hold, "pending", body);
    mono += LEASE_MS;
    return await resolve(body);
  };
  return { store, resolve, afterTheWait, version: intent.version };
}

/** The relayer's ways into review, each a payment that may have sent. */
const REVIEWS: Record<string, SenderScript> = {
  "last broadcast unknown": { sends: [{ error: new Error("rpc timeout") }] },
  "last broadcast sent, its tx dropped": {
    sends: [{ txHash: "0xa" }, { txHash: "0xb" }],
    receipts: ["dropped"],
  },
  "an earlier broadcast may have been sent": {
    sends: [
      { error: new Error("rpc timeout") },
      { error: notSent(new Error("nonce too low")) },
    ],
  },
};

Deno.test("routes.md and runbook.md name every 409 and 503 the resolve route answers", () => {
  const section = reviewSection();
  const runbook = read("docs/runbook.md");
  const missing: string[] = [];
  for (const [type, status] of resolveProblems()) {
    if (!section.includes(`\`${type}\``)) {
      missing.push(`routes.md (A payment in review): ${status} ${type}`);
    }
    if (
      (status === 409 || status === 503) && !runbook.includes(`\`${type}\``)
    ) {
      missing.push(`runbook.md: ${status} ${type}`);
    }
  }
  assert.deepEqual(missing, []);
});

Deno.test("a payment the relayer put in review (its last broadcast unknown, sent and dropped, or after an earlier send) may have sent: the route fails it only once the operator says they looked its nonce up, after a send-in-flight wait", async () => {
  for (const [name, script] of Object.entries(REVIEWS)) {
    const { store, afterTheWait, version } = await reviewedBy(script);
    const bare = await afterTheWait(JSON.stringify({ to: "failed", version }));
    assert.equal(bare.status, 409, name);
    assert.match((await bare.json()).type, /nonce-unchecked$/, name);
    assert.equal((await store.getIntent("pi_1"))?.hold, "pending", name);
  }
});

Deno.test("the failing bodies routes.md and runbook.md give fail a payment the relayer put in review, its hold voided, posted again after the 409 send-in-flight they say comes first", async () => {
  const bodies = [
    ...reviewSection().matchAll(
      /\{"to":"failed","version":"<version>"[^}]*\}/g,
    ),
    ...read("docs/runbook.md").matchAll(
      /\{"to":"failed","version":"<version>"[^}]*\}/g,
    ),
  ].map(([body]) => body);
  assert.ok(bodies.length >= 2, `too few bodies found: ${bodies}`);
  for (const body of bodies) {
    for (const [name, script] of Object.entries(REVIEWS)) {
      const { store, afterTheWait, version } = await reviewedBy(script);
      const res = await afterTheWait(body.replace("<version>", version));
      assert.equal(res.status, 200, `${body} on ${name}: ${await res.text()}`);
      const intent = await store.getIntent("pi_1");
      assert.equal(intent?.state, "failed", `${body} on ${name}`);
      assert.equal(intent?.hold, "voided", `${body} on ${name}`);
    }
  }
});

Deno.test("routes.md and runbook.md say a fail of a payment that may have sent answers 409 send-in-flight first, and that it is posted again after its Retry-After, the intent read and the nonce looked up again", () => {
  const section = reviewSection().replace(/\s+/g, " ");
  const runbook = read("docs/runbook.md").replace(/\s+/g, " ");
  assert.match(
    section,
    /every payment that may have sent, which is every payment the relayer puts in review, answers its first fail 409 `send-in-flight`/,
  );
  assert.match(
    section,
    /Wait the `Retry-After`, read the intent again .*, look the nonce up again, and send the fail again/,
  );
  assert.match(
    runbook,
    /A payment that may have sent .* answers that first fail 409 `send-in-flight` with a `Retry-After`/,
  );
  // The runbook shows the second post, after reading the intent again.
  const step = runbook.slice(runbook.indexOf("answers that first fail 409"));
  assert.match(
    step,
    /^[^]*?Wait the `Retry-After`, read the intent again \(`curl -s \$R\/v1\/intents\/<id> -H "\$ops"`[^]*?look the nonce up again, then send the fail again[^]*?`curl -s -X POST \$R\/v1\/intents\/<id>\/resolve -H "\$ops" -d '\{"to":"failed","version":"<version>","nonceChecked":true\}'`/,
  );
});
