/**
 * A Pub/Sub message id is unique within its topic only (Google's
 * `PubsubMessage.messageId`): two dead-letter topics pushing to one
 * service, or a job topic and a dead-letter topic, may each carry a message
 * under the same id. A give-up on one copy must then not be taken for
 * another message's: not a repeat of another job's give-up (the intent
 * left with no job and no letter), not a late copy of a delivery of
 * another job (its payment never sent).
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, ScriptedSender, type Store } from "../../mod.ts";
import { BACKENDS, openAuthorized } from "../_stores.ts";

const T0 = 1_000_000;
const LEASE_MS = 10_000;
/** Past a give-up's lease on an authorized intent: `leaseMs` + `clockSkewMs` (5 s), and a second. */
const LATER_MS = LEASE_MS + 5_000 + 1_000;
/** The id both dead-letter topics gave their copies. */
const COPY_ID = "1";

/** A dead-letter copy's ids: its id, and the source message it forwards. */
function copyOf(subscription: string, published: string, intentId: string) {
  return {
    queue: "pubsub",
    messageId: COPY_ID,
    dlqId: `p/${subscription}@${published}#${intentId}`,
  } as const;
}

/** A relayer on `store` whose sends are `0x…` with receipts pending; and its clock. */
function relayerOn(store: Store, ids: readonly string[]) {
  const clock = { t: T0 };
  const sender = new ScriptedSender(
    Object.fromEntries(ids.map((id) => [id, {
      sends: [{ txHash: `0x${id.length}` }],
      receipts: ["pending", "pending", "pending"],
    }])),
  );
  const relayer = createRelayer({
    store,
    sender,
    policy: { maxDeliveries: 3, jitter: "none" },
    now: () => clock.t,
    leaseMs: LEASE_MS,
  });
  const sends = () => sender.calls.filter((c) => c.method === "send").length;
  return { relayer, clock, sends };
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a Pub/Sub give-up of another job whose dead-letter copy has the same id (another topic) still resolves its intent`, async () => {
    const { store, close } = await openAuthorized(backend, "pi_a");
    try {
      await store.createIntent({
        id: "pi_b",
        state: "authorized",
        hold: "pending",
      });
      const { relayer, clock, sends } = relayerOn(store, ["pi_a", "pi_b"]);
      const jobA = { intentId: "pi_a", kind: "settle" } as const;
      const jobB = { intentId: "pi_b", kind: "settle" } as const;
      // Topic A's dead-letter topic gives up on pi_a's message.
      const a = await relayer.giveUp(jobA, {
        deliveries: 5,
        queue: copyOf("jobs-a", "2026-11-30T11:00:00.123+00:00", "pi_a"),
      });
      assert.equal(
        a.action === "poison" && a.resolution,
        "job dropped, intent still authorized",
      );
      // pi_b's job, on topic B, sends and waits for its receipt.
      const sent = await relayer.deliver(jobB, 1, {
        message: {
          queue: "pubsub",
          dlqId: "p/jobs-b@2026-11-30T11:30:00.000Z#pi_b",
        },
      });
      assert.equal(sent.action, "retry");
      assert.equal(sends(), 1);
      clock.t += LATER_MS;
      // Topic B's dead-letter topic gives up on it, its copy under the
      // same id as topic A's: another message, which must resolve.
      const b = await relayer.giveUp(jobB, {
        deliveries: 5,
        queue: copyOf("jobs-b", "2026-11-30T11:30:00.000+00:00", "pi_b"),
      });
      assert.equal(b.action, "poison", b.reason);
      assert.equal((await store.getIntent("pi_b"))?.state, "needs_review");
      assert.equal(
        (await store.getDeadLetter("pi_b/settle"))?.queue?.messageId,
        COPY_ID,
      );
    } finally {
      await close();
    }
  });

  Deno.test(`${backend.name}: a Pub/Sub give-up of a redriven job on another topic, its copy under the id of the first give-up's, still resolves the intent`, async () => {
    const { store, close } = await openAuthorized(backend, "pi_a");
    try {
      const { relayer, clock, sends } = relayerOn(store, ["pi_a"]);
      const job = { intentId: "pi_a", kind: "settle" } as const;
      await relayer.giveUp(job, {
        deliveries: 5,
        queue: copyOf("jobs-a", "2026-11-30T11:00:00.123+00:00", "pi_a"),
      });
      // Redriven onto topic B (its publish is the caller's), sent there
      // once the give-up's lease is over.
      assert.deepEqual(await relayer.redrive("pi_a/settle"), job);
      clock.t += LATER_MS;
      const sent = await relayer.deliver(job, 1, {
        message: {
          queue: "pubsub",
          dlqId: "p/jobs-b@2026-11-30T11:30:00.000Z#pi_a",
        },
      });
      assert.equal(sent.action, "retry");
      assert.equal(sends(), 1);
      const b = await relayer.giveUp(job, {
        deliveries: 5,
        queue: copyOf("jobs-b", "2026-11-30T11:30:00.000+00:00", "pi_a"),
      });
      assert.equal(b.action, "poison", b.reason);
      assert.equal((await store.getIntent("pi_a"))?.state, "needs_review");
    } finally {
      await close();
    }
  });

  Deno.test(`${backend.name}: a Pub/Sub give-up on another topic, its copy under the id a letter on record names, is not taken for a repeat of that letter's give-up`, async () => {
    const { store, close } = await openAuthorized(backend, "pi_a");
    try {
      const { relayer, clock, sends } = relayerOn(store, ["pi_a"]);
      const job = { intentId: "pi_a", kind: "settle" } as const;
      await relayer.giveUp(job, {
        deliveries: 5,
        queue: copyOf("jobs-a", "2026-11-30T11:00:00.123+00:00", "pi_a"),
      });
      clock.t += LATER_MS;
      // A job published again on topic B (not a redrive: the letter stays).
      await relayer.deliver(job, 1, {
        message: {
          queue: "pubsub",
          dlqId: "p/jobs-b@2026-11-30T11:30:00.000Z#pi_a",
        },
      });
      assert.equal(sends(), 1);
      assert.equal((await store.getIntent("pi_a"))?.state, "settling");
      const b = await relayer.giveUp(job, {
        deliveries: 5,
        queue: copyOf("jobs-b", "2026-11-30T11:30:00.000+00:00", "pi_a"),
      });
      assert.equal(b.action, "poison", b.reason);
      assert.equal((await store.getIntent("pi_a"))?.state, "needs_review");
      assert.match(
        (await store.getDeadLetter("pi_a/settle"))?.queue?.dlqId ?? "",
        /^p\/jobs-b@/,
      );
    } finally {
      await close();
    }
  });

  Deno.test(`${backend.name}: a delivery naming its Pub/Sub message id sends when a dead-letter copy of another job had the same id (another topic)`, async () => {
    const { store, close } = await openAuthorized(backend, "pi_a");
    try {
      await store.createIntent({
        id: "pi_b",
        state: "authorized",
        hold: "pending",
      });
      const { relayer, sends } = relayerOn(store, ["pi_a", "pi_b"]);
      await relayer.giveUp({ intentId: "pi_a", kind: "settle" }, {
        deliveries: 5,
        queue: copyOf("jobs-a", "2026-11-30T11:00:00.123+00:00", "pi_a"),
      });
      // pi_b's job pulled from its own topic, where Google gave it the
      // same id: a delivery of a message no queue gave up on.
      const b = await relayer.deliver({ intentId: "pi_b", kind: "settle" }, 1, {
        message: { queue: "pubsub", messageId: COPY_ID },
      });
      assert.equal(b.action, "retry", b.reason);
      assert.equal(sends(), 1);
      assert.equal((await store.getIntent("pi_b"))?.state, "settling");
    } finally {
      await close();
    }
  });

  Deno.test(`${backend.name}: a repeat of a Pub/Sub give-up known by its copy's id alone is known, also by the mark an earlier version wrote`, async () => {
    const { store, close } = await openAuthorized(backend, "pi_a");
    try {
      const { relayer } = relayerOn(store, ["pi_a"]);
      const job = { intentId: "pi_a", kind: "settle" } as const;
      // A copy published to the dead-letter topic by hand: no source.
      const byHand = { queue: "pubsub", messageId: "7" } as const;
      await relayer.giveUp(job, { deliveries: 5, queue: byHand });
      await relayer.redrive("pi_a/settle");
      const repeat = await relayer.giveUp(job, {
        deliveries: 5,
        queue: byHand,
      });
      assert.equal(repeat.action, "done");
      assert.match(repeat.reason, /already resolved/);
      // As an earlier version marked such a give-up once resolved.
      await store.admit({
        count: "gaveup/pubsub/message/8",
        now: T0,
        ttlMs: 32 * 24 * 60 * 60 * 1000,
      });
      const earlier = await relayer.giveUp(job, {
        deliveries: 5,
        queue: { queue: "pubsub", messageId: "8" },
      });
      assert.equal(earlier.action, "done");
      assert.match(earlier.reason, /already resolved/);
      assert.equal(await store.getDeadLetter("pi_a/settle"), null);
    } finally {
      await close();
    }
  });
}
