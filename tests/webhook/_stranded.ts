/**
 * What the tests of an intent a queue may strand share: a service on a
 * store whose intent is authorized and whose one send is pending, another
 * delivery's lease held as if it was killed mid-send, a Pub/Sub
 * subscription's pushes while it retains the message, and the check that
 * the intent ended resolved or dead-lettered (`stranded: …` where not).
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore, ScriptedSender, type Store } from "../../mod.ts";
import { type AppDeps, createApp, type WebhookApp } from "../../webhook/app.ts";
import { job, pubsubPush } from "./_late_copy.ts";

/**
 * A service (`deps` with its clock `clock.now`, from 1 000 000, and no
 * jitter) on a fresh store whose intent `intentId` is authorized, its hold
 * pending; its one send is `0xabc`, whose receipt stays pending.
 */
export async function settlingService(
  intentId: string,
  deps: Omit<AppDeps, "store" | "sender" | "now" | "random">,
): Promise<{ app: WebhookApp; clock: { now: number }; store: Store }> {
  const store = new MemoryStore();
  await store.createIntent({
    id: intentId,
    state: "authorized",
    hold: "pending",
  });
  const sender = new ScriptedSender({
    [intentId]: { sends: [{ txHash: "0xabc" }], receipts: ["pending"] },
  });
  const clock = { now: 1_000_000 };
  const app = createApp({
    ...deps,
    store,
    sender,
    now: () => clock.now,
    random: () => 0,
  });
  return { app, clock, store };
}

/**
 * Another instance's delivery of a copy of `intentId`'s job wrote ahead of
 * a send at `now` and was killed: its lease (`leaseMs`) stands until it
 * lapses.
 */
export async function killedMidSend(
  store: Store,
  intentId: string,
  now: number,
  leaseMs: number,
): Promise<void> {
  const intent = (await store.getIntent(intentId))!;
  await store.beginBroadcast(intent.id, intent.version, now, {
    lease: { owner: "killed", ttlMs: leaseMs, now, keep: true },
  });
}

/**
 * Pub/Sub's pushes of `_late_copy.ts`'s job as message `messageId`,
 * published at `published`, modelled at their worst: push `n` comes
 * `(n − 1) × stepMs` after it, and none once `retentionMs` has passed.
 * Before push `killAt` a delivery is killed mid-send (its lease `leaseMs`);
 * the pushes stop at an ack (204) or after push `lastPush`, each carrying
 * its delivery attempt where `attempts` (a dead-letter policy). Returns
 * each push's answer (`n: status`, or `expired before push n`) and whether
 * the message was acked.
 */
export async function pushesWhileRetained(
  app: WebhookApp,
  { clock, published, retentionMs, stepMs, messageId, store, killAt, leaseMs }:
    {
      clock: { now: number };
      published: number;
      retentionMs: number;
      stepMs: number;
      messageId: string;
      store: Store;
      killAt: number;
      leaseMs: number;
    },
  { lastPush = Infinity, attempts = false } = {},
): Promise<{ answers: string[]; acked: boolean }> {
  const answers: string[] = [];
  for (let push = 1; push <= lastPush; push++) {
    clock.now = published + (push - 1) * stepMs;
    if (clock.now - published >= retentionMs) {
      answers.push(`expired before push ${push}`);
      break;
    }
    if (push === killAt) {
      await killedMidSend(store, job.intentId, clock.now, leaseMs);
    }
    const res = await app.request(
      "/v1/pubsub",
      await pubsubPush(
        messageId,
        "2026-12-05T10:00:00.000Z",
        attempts ? push : undefined,
      ),
    );
    answers.push(`${push}: ${res.status}`);
    await res.body?.cancel();
    if (res.status === 204) return { answers, acked: true }; // done or poisoned
  }
  return { answers, acked: false };
}

/**
 * Fails unless `intentId` is resolved (settled, failed or needs_review) or
 * dead-lettered, saying how it went: `stranded: <state>, no dead letter,
 * with <setting> (<answers><last>)`.
 */
export async function assertNotStranded(
  store: Store,
  intentId: string,
  setting: string,
  answers: readonly string[],
  last = "",
): Promise<void> {
  const intent = (await store.getIntent(intentId))!;
  const letter = await store.getDeadLetter(`${intentId}/settle`);
  assert.ok(
    ["settled", "failed", "needs_review"].includes(intent.state) ||
      letter !== null,
    `stranded: ${intent.state}, no dead letter, with ${setting} (${
      answers.join(", ")
    }${last})`,
  );
}
