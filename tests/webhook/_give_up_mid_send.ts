/**
 * What the tests of a send that outlived its settling share: an app whose
 * lease a step of its clock lapses, and a delivery whose send is held
 * while the queue gives its job up, the lease lapsed.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Job, Store } from "../../mod.ts";
import { type AppDeps, createApp, type WebhookApp } from "../../webhook/app.ts";

/** An app on `store` and `deps`, its clock `clock.now`, its lease 200 ms (no skew), giving up after `maxDeliveries` (3). */
export function leasedApp(
  store: Store,
  { clock, maxDeliveries = 3, ...deps }:
    & { clock: { now: number }; maxDeliveries?: number }
    & Omit<AppDeps, "store">,
): WebhookApp {
  return createApp({
    store,
    ...deps,
    now: () => clock.now,
    random: () => 0,
    leaseMs: 200,
    clockSkewMs: 0,
    policy: { maxDeliveries },
  });
}

/** Delivers `job` on `app`; once its send began, steps `clock` a minute on and has `giving` (or `app`) give the job up (poisoned): the delivery, still under way. */
export async function giveUpMidSend(
  app: WebhookApp,
  held: {
    job: Job;
    clock: { now: number };
    sending: Promise<void>;
    giving?: WebhookApp;
  },
): Promise<{ delivery: ReturnType<WebhookApp["relayer"]["deliver"]> }> {
  const delivery = app.relayer.deliver(held.job, 1);
  await held.sending;
  held.clock.now += 60_000; // the wall clock steps forward while the send runs
  const gaveUp = await (held.giving ?? app).relayer.giveUp(held.job, {
    deliveries: 3,
    queue: { queue: "qstash", messageId: "msg_1" },
  });
  assert.equal(gaveUp.action, "poison");
  return { delivery };
}
