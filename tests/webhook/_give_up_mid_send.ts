/**
 * What the tests of a send that outlived its settling share: an app whose
 * lease a step of its clock lapses, a delivery whose send is held while
 * the queue gives its job up, the lease lapsed, and an operator's read and
 * fail of the intent.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type Intent,
  type Job,
  notSent,
  type ReceiptStatus,
  type Sender,
  type Store,
} from "../../mod.ts";
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

/**
 * The end of a fail by hand posted while a send ran: `answer` is read,
 * then the send leaves (`leaves`) and its `delivery` ends. The payment
 * must still be in review, its hold pending, and the fail refused 409.
 * Returns the answer's body, the intent after, and `what`, which says
 * both (after `context`, where given) for the test's further checks.
 *
 * @example A fail refused while a send of another instance ran
 * ```ts ignore
 * const answer = await failByHand(failApp, headers, seen.version, true);
 * const { body, what } = await refusedWhileSending(store, answer, {
 *   delivery,
 *   leaves: () => finish({ txHash: "0xT" }),
 * });
 * assert.match(body.type, /send-in-flight$/, what);
 * ```
 */
export async function refusedWhileSending(
  store: Store,
  answer: Response,
  send: { delivery: Promise<unknown>; leaves: () => void; context?: string },
): Promise<{
  // deno-lint-ignore no-explicit-any
  body: any;
  after: Intent | null;
  what: string;
}> {
  const body = await answer.json();
  send.leaves();
  await send.delivery;
  const after = await store.getIntent("pi_1");
  const what = `${send.context ?? ""}${answer.status} ${
    JSON.stringify(body)
  }; ${after?.state}/${after?.hold} txs ${JSON.stringify(after?.txHashes)}`;
  assert.equal(`${after?.state}/${after?.hold}`, "needs_review/pending", what);
  assert.equal(answer.status, 409, what);
  return { body, after, what };
}

/**
 * The end of a race at one millisecond: `second`'s send, written ahead at
 * the wall clock `first`'s ended send read (`mayHaveSent` false), runs
 * until `finish`; the wall clock steps a minute, `first` gives the job up
 * into review, and the operator's fail (the nonce looked up: unused, the
 * tx has not left) is posted to `first`. It must be refused 409
 * `send-in-flight`, the hold still pending once the tx then leaves.
 */
export async function sameMillisecondFailRefused(
  store: Store,
  apps: { first: WebhookApp; second: WebhookApp },
  race: {
    job: Job;
    clock: { now: number };
    sending: Promise<void>;
    finish: (sent: { txHash: string }) => void;
    headers: Record<string, string>;
  },
): Promise<void> {
  const { first, second } = apps;
  const { job, clock, headers } = race;
  const delivery = second.relayer.deliver(job, 2).catch((e) => e);
  await race.sending;
  const ahead = await store.getIntent("pi_1");
  assert.equal(ahead?.broadcasting, clock.now);
  assert.equal(ahead?.mayHaveSent, false);
  clock.now += 60_000; // the wall clock steps forward mid-send
  const gaveUp = await first.relayer.giveUp(job, {
    deliveries: 3,
    queue: { queue: "qstash", messageId: "msg_1" },
  });
  assert.equal(gaveUp.action, "poison");
  const seen = await readIntent(first, headers);
  assert.equal(seen.state, "needs_review");
  const answer = await failByHand(first, headers, seen.version, true);
  const { body, what } = await refusedWhileSending(store, answer, {
    delivery,
    leaves: () => race.finish({ txHash: "0xT" }),
  });
  assert.match(body.type, /send-in-flight$/, what);
}

/**
 * The race at one millisecond, whole, on `store` with the intent `pi_1`
 * created: the first instance's send stays home (declared `not_sent`), its
 * record written through `through` (`store` unless given, when the
 * delivery must succeed) and landed once `landed` settles; the payment
 * then settling with no write-ahead (`mayHaveSent` false), the second
 * instance, whose wall clock reads what the first's read, sends, held,
 * and {@linkcode sameMillisecondFailRefused} follows. Its apps take
 * `opsToken`.
 *
 * @example The race on a MemoryStore
 * ```ts
 * import { MemoryStore } from "../../mod.ts";
 * import { sameMillisecondRace } from "./_give_up_mid_send.ts";
 *
 * await sameMillisecondRace(new MemoryStore(), "ops-token-of-the-example");
 * ```
 */
export async function sameMillisecondRace(
  store: Store,
  opsToken: string,
  first: { through?: Store; landed?: () => Promise<unknown> } = {},
): Promise<void> {
  const headers = { authorization: `Bearer ${opsToken}` };
  const job = { intentId: "pi_1", kind: "settle" } as const;
  await authorizedIntent(store);
  const clock = { now: 1_000_000 };
  const { sender: held, sending, finish, receipt } = heldSends("0xT");
  const homeSender: Sender = {
    send: () => Promise.reject(notSent(new Error("rpc refused it"))),
    receipt,
  };
  const app = (over: Store, sender: Sender) =>
    leasedApp(over, { clock, opsToken, sender });
  const home = app(first.through ?? store, homeSender);
  // The second instance's send hangs until `finish`.
  const second = app(store, held(true));
  const delivered = home.relayer.deliver(job, 1);
  await (first.through === undefined ? delivered : delivered.catch(() => {}));
  await first.landed?.();
  const between = await store.getIntent("pi_1");
  assert.equal(between?.state, "settling");
  assert.equal(between?.broadcasting, null, "the record landed");
  assert.equal(between?.mayHaveSent, false);
  // The second instance's wall clock reads what the first's read.
  await sameMillisecondFailRefused(store, { first: home, second }, {
    job,
    clock,
    sending,
    finish,
    headers,
  });
}
