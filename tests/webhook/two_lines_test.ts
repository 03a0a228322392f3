/**
 * One job, two messages on an external queue (an operator's `POST
 * /v1/jobs` sent again after a lost answer, or a bridge's duplicate): each
 * message is its own line of redeliveries. Does the job still get the
 * policy's whole window, and is the rescue that `STUCK_AFTER` promises
 * made before it gives up? Driven on a virtual clock, each line redelivered
 * as its queue does (our delay, or Pub/Sub's own minimum backoff), the
 * Sender's every send unknown (a 502: the bytes may have reached a node).
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  createRelayer,
  MemoryStore,
  ScriptedSender,
  type Sender,
} from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { createQueueHandler } from "../../cloudflare/queue_handler.ts";
import { envelope, PUBSUB, QSTASH, signHmac, signQStash } from "./_signing.ts";
import { NOW, SECRET, theGoogle } from "./_app.ts";

/** MAX_DELIVERIES 6, BASE = CAP 1 s, JITTER none, STUCK_AFTER 4 s: a window of 5 s per line. */
const POLICY = {
  maxDeliveries: 6,
  baseMs: 1_000,
  capMs: 1_000,
  jitter: "none",
  stuckAfterMs: 4_000,
} as const;
const WINDOW_MS = 5_000;

const JOB = { intentId: "pi_0001", kind: "settle" } as const;

/** What a line's queue does after one delivery: redeliver after `afterMs`, or stop. */
type Step = { readonly afterMs: number } | {
  readonly outcome: string;
  readonly delivery: number;
};

/** The world of one run: the clock the relayer reads, and its Sender. */
interface World {
  readonly store: MemoryStore;
  readonly sender: Sender;
  readonly now: () => number;
}

interface Run {
  /** Virtual ms from the first delivery to the poison answer. */
  readonly gaveUpAt: number;
  /** Which line poisoned, at which delivery number. */
  readonly poisonedBy: string;
  readonly delivery: number;
  /** Sends made, and how many were rescues (`replace: true`). */
  readonly sends: number;
  readonly rescues: number;
  readonly state: string;
}

/**
 * Two lines of pi_0001's settle job, the second queued `offsetMs` after
 * the first, each redelivered as `build(world)`'s delivery says, at most
 * MAX_DELIVERIES times (the queue's own limit, set to the policy's).
 */
async function twoLines(
  build: (
    world: World,
  ) => Promise<(line: string, k: number) => Promise<Step>>,
  offsetMs = 100,
): Promise<Run> {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  let sends = 0;
  let rescues = 0;
  const scripted = new ScriptedSender({
    pi_0001: { sends: [{ error: new Error("signer answered 502") }] },
  });
  const sender: Sender = {
    send(intent, options) {
      sends++;
      if (options.replace) rescues++;
      return scripted.send(intent, options);
    },
    receipt: (hash) => scripted.receipt(hash),
  };
  let t = 0;
  const deliver = await build({ store, sender, now: () => NOW + t });
  // [at, line, k]: the next delivery of each line.
  const pending: [number, string, number][] = [
    [0, "A", 1],
    [offsetMs, "B", 1],
  ];
  let poisoned: { at: number; line: string; delivery: number } | undefined;
  while (pending.length > 0) {
    pending.sort((a, b) => a[0] - b[0]);
    const [at, line, k] = pending.shift()!;
    t = at;
    const step = await deliver(line, k);
    if ("afterMs" in step) {
      if (k < POLICY.maxDeliveries) {
        pending.push([at + step.afterMs, line, k + 1]);
      }
    }
    // The give-up, as the store shows it (Pub/Sub's 204 and Cloudflare's
    // ack do not tell a poison from a done).
    const letter = await store.getDeadLetter("pi_0001/settle");
    if (letter !== null && poisoned === undefined) {
      poisoned = { at, line, delivery: letter.deliveries };
    }
  }
  assert.ok(poisoned, "no line poisoned the job");
  return {
    gaveUpAt: poisoned.at,
    poisonedBy: poisoned.line,
    delivery: poisoned.delivery,
    sends,
    rescues,
    state: (await store.getIntent("pi_0001"))!.state,
  };
}

/** The webhook app on the run's world, every route configured. */
async function appOf(world: World) {
  const g = await theGoogle();
  return createApp({
    store: world.store,
    sender: world.sender,
    policy: POLICY,
    now: world.now,
    random: () => 0,
    qstash: QSTASH,
    pubsub: {
      audience: PUBSUB.audience,
      jwks: g.jwks,
      serviceAccount: PUBSUB.serviceAccount,
    },
    webhookSecret: SECRET,
    clockSkewMs: 0,
  });
}

/** An answer of the app as a queue honouring `Retry-After` (or `fixedMs`) reads it. */
async function stepOf(res: Response, fixedMs?: number): Promise<Step> {
  if (res.status === 503) {
    const after = Number(res.headers.get("retry-after"));
    return { afterMs: fixedMs ?? after * 1000 };
  }
  assert.ok(res.status === 200 || res.status === 204, `${res.status}`);
  if (res.status === 204) return { outcome: "ended", delivery: 0 };
  const body = await res.json();
  return { outcome: body.outcome, delivery: body.delivery };
}

/** QStash: its message id and `Upstash-Retried` are its line's own. */
async function qstash(world: World) {
  const app = await appOf(world);
  return async (line: string, k: number) => {
    const body = JSON.stringify(JOB);
    return await stepOf(
      await app.request("/v1/qstash", {
        method: "POST",
        body,
        headers: {
          "content-type": "application/json",
          "upstash-signature": await signQStash(body),
          "upstash-message-id": `msg_${line}`,
          "upstash-retried": String(k - 1),
        },
      }),
    );
  };
}

/** A bridge on the generic route: its message id, and no count of its own. */
async function generic(world: World) {
  const app = await appOf(world);
  return async (line: string) => {
    const body = JSON.stringify({ job: JOB, messageId: `bridge-${line}` });
    return await stepOf(
      await app.request("/v1/deliveries", {
        method: "POST",
        body,
        headers: {
          "content-type": "application/json",
          "x-signature": signHmac(
            SECRET,
            body,
            Math.floor(world.now() / 1000),
          ),
        },
      }),
    );
  };
}

/**
 * Pub/Sub push without a dead-letter policy (no `deliveryAttempt`: the
 * store counts by message id), its minimum backoff 1 s per gap.
 */
async function pubsub(world: World) {
  const app = await appOf(world);
  const g = await theGoogle();
  return async (line: string) => {
    const body = envelope(JOB, {
      messageId: line === "A" ? "1000000000000001" : "1000000000000002",
    });
    return await stepOf(
      await app.request("/v1/pubsub", {
        method: "POST",
        body,
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${await g.token()}`,
        },
      }),
      POLICY.baseMs,
    );
  };
}

/** Cloudflare Queues: `message.attempts` is its message's own. */
function cloudflare(world: World) {
  const relayer = createRelayer({
    store: world.store,
    sender: world.sender,
    policy: POLICY,
    now: world.now,
    random: () => 0,
    clockSkewMs: 0,
  });
  const handler = createQueueHandler({
    relayer,
    maxRetries: POLICY.maxDeliveries - 1,
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
  });
  return Promise.resolve(async (line: string, k: number): Promise<Step> => {
    let step: Step = { outcome: "unsettled", delivery: k };
    await handler({
      queue: "jobs",
      messages: [{
        id: `cf-${line}`,
        body: JOB,
        attempts: k,
        ack: () => {
          step = { outcome: "acked", delivery: k };
        },
        retry: (options) => {
          step = { afterMs: (options?.delaySeconds ?? 0) * 1000 };
        },
      }],
    });
    return step;
  });
}

for (
  const [name, build] of [
    ["QStash", qstash],
    ["the generic route (each message with its messageId)", generic],
    ["Pub/Sub without deliveryAttempt", pubsub],
    ["Cloudflare Queues", cloudflare],
  ] as const
) {
  Deno.test(`${name}: two messages of one job each get the policy's window, and the rescue is sent before it gives up`, async () => {
    const run = await twoLines(build);
    assert.ok(
      run.gaveUpAt >= WINDOW_MS,
      `gave up ${run.gaveUpAt} ms after the first delivery, before the policy's window of ${WINDOW_MS} ms: ${
        JSON.stringify(run)
      }`,
    );
    assert.equal(run.rescues, 1, `${run.rescues} rescues before it gave up`);
    assert.equal(run.state, "needs_review");
  });
}

/** A signed generic delivery of `body` at the world's time. */
function genericPost(world: World, body: unknown): RequestInit {
  const text = JSON.stringify(body);
  return {
    method: "POST",
    body: text,
    headers: {
      "content-type": "application/json",
      "x-signature": signHmac(SECRET, text, Math.floor(world.now() / 1000)),
    },
  };
}

/**
 * The generic route over a created pi_0001 (each delivery answers retry),
 * its clock at `NOW + clock.t`: `post(body)` posts `body` to it, signed
 * at that time.
 */
async function countingRoute() {
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  const clock = { t: 0 };
  const world: World = {
    store,
    sender: new ScriptedSender({}),
    now: () => NOW + clock.t,
  };
  const app = await appOf(world);
  const post = (body: unknown) =>
    app.request("/v1/deliveries", genericPost(world, body));
  return { clock, post };
}

Deno.test("the generic route counts a message that names itself by its id, and its give-up without a count says that message's", async () => {
  const { clock, post } = await countingRoute();
  const numbers: number[] = [];
  for (
    const [at, messageId] of [[0, "m-1"], [10, "m-2"], [2_000, "m-1"]] as const
  ) {
    clock.t = at;
    const res = await post({ job: JOB, messageId });
    assert.equal(res.status, 503);
    numbers.push((await res.json()).delivery);
  }
  // m-1 twice, m-2 once: each its own count, as QStash's and Pub/Sub's.
  assert.deepEqual(numbers, [1, 1, 2]);
  clock.t = 4_000;
  const res = await post({ job: JOB, gaveUp: { messageId: "m-1" } });
  assert.equal(res.status, 200);
  assert.equal(
    (await res.json()).reason,
    "the queue gave up after 2 deliveries",
  );
});

Deno.test("the generic route still counts a delivery that names no message by its job id (docs/queues.md: send messageId)", async () => {
  const { clock, post } = await countingRoute();
  const numbers: number[] = [];
  for (const at of [0, 1_000]) {
    clock.t = at;
    const res = await post({ job: JOB });
    numbers.push((await res.json()).delivery);
  }
  assert.deepEqual(numbers, [1, 2]);
});
