/**
 * What the tests of a send that outlived its settling share: an app whose
 * lease a step of its clock lapses, a delivery whose send is held while
 * the queue gives its job up, the lease lapsed, and an operator's read and
 * fail of the intent.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Job, ReceiptStatus, Sender, Store } from "../../mod.ts";
import { type AppDeps, createApp, type WebhookApp } from "../../webhook/app.ts";

/** An app on `store` and `deps`, its clock `clock.now`, its lease 200 ms (no skew), giving up after `maxDeliveries` (3), the rest of its policy `deps.policy`. */
export function leasedApp(
  store: Store,
  { clock, maxDeliveries = 3, policy, ...deps }:
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
    policy: { ...policy, maxDeliveries },
  });
}

/** Creates on `store` the intent `pi_1` the tests' sends settle: authorized, its hold pending. */
export async function authorizedIntent(store: Store): Promise<void> {
  await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
  });
}

/**
 * Senders for instances over one store: `sender(true)`'s send hangs until
 * `finish(sent)` (`sending` settles once it began), `sender(false)`'s
 * sends nothing; `receipt` reads `confirmed`'s receipt confirmed, any
 * other dropped.
 */
export function heldSends(confirmed: string) {
  let finish!: (sent: { txHash: string }) => void;
  let began!: () => void;
  const sending = new Promise<void>((resolve) => began = resolve);
  const receipts: Record<string, ReceiptStatus> = { [confirmed]: "confirmed" };
  const receipt = (txHash: string) =>
    Promise.resolve(receipts[txHash] ?? "dropped");
  const sender = (sends: boolean): Sender => ({
    send: () => {
      if (!sends) {
        return Promise.reject(new Error("this instance sends nothing"));
      }
      began();
      return new Promise((resolve) => finish = resolve);
    },
    receipt,
  });
  return {
    sender,
    sending,
    receipt,
    finish: (sent: { txHash: string }) => finish(sent),
  };
}

/** Delivers `job` on `app`; once its send began, steps `clock` a minute on: the delivery, still under way. */
export async function deliverMidSend(
  app: WebhookApp,
  held: { job: Job; clock: { now: number }; sending: Promise<void> },
): Promise<{ delivery: ReturnType<WebhookApp["relayer"]["deliver"]> }> {
  const delivery = app.relayer.deliver(held.job, 1);
  await held.sending;
  held.clock.now += 60_000; // the wall clock steps forward while the send runs
  return { delivery };
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
  const { delivery } = await deliverMidSend(app, held);
  const gaveUp = await (held.giving ?? app).relayer.giveUp(held.job, {
    deliveries: 3,
    queue: { queue: "qstash", messageId: "msg_1" },
  });
  assert.equal(gaveUp.action, "poison");
  return { delivery };
}

/** The intent `pi_1` as `app` answers it to `headers`. */
export async function readIntent(
  app: WebhookApp,
  headers: Record<string, string>,
) {
  return (await (await app.request("/v1/intents/pi_1", { headers })).json())
    .intent;
}

/** Posts a fail by hand of `pi_1` on `version` to `app` with `headers`, saying `nonceChecked` unless it is undefined. */
export async function failByHand(
  app: WebhookApp,
  headers: Record<string, string>,
  version: string,
  nonceChecked: boolean | undefined,
): Promise<Response> {
  return await app.request("/v1/intents/pi_1/resolve", {
    method: "POST",
    headers,
    body: JSON.stringify({ to: "failed", version, nonceChecked }),
  });
}
