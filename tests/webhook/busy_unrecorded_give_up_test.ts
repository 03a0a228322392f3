/**
 * A queue's give-up the store answered busy twice, at its resolution and
 * again at its replay record (another session's lock, a statement
 * cancelled): the give-up is a retry (503), and its signed request is on
 * no record, so the same bytes sent again are taken. Its count is in its
 * signed body, so it cannot come back as a later delivery; what could
 * harm is its coming back after the queue's own retry of the give-up
 * dropped the job and a job published again sent the payment: resolved
 * again, it sent that payment, its tx pending, to review.
 *
 * It changes nothing, as every give-up names its message (QStash's
 * failure callback its `sourceMessageId` and `dlqId`, the generic route's
 * `gaveUp.messageId`, which it requires): the letter the queue's retry
 * wrote names that message, and answers the copy as it answered the
 * retry; once the letter is gone, the message's give-up marks (32 days)
 * do. Pinned here on both (a job published again meets the letter, a
 * redriven one the marks), so that neither the marks nor the letter's
 * check can be dropped while such a request is left on no record.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore, type Store } from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { heldWrites } from "../_held_writes.ts";
import {
  onFreshSchema,
  postgresAvailable,
  serverUpFirst,
} from "../_postgres.ts";
import { lockWrites } from "./_locked_writes.ts";
import { genericRequest, makeApp, NOW, OPS, SECRET } from "./_app.ts";
import { failedRequest, failureCallback, signHmac } from "./_signing.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

/** `store`, its writes refused as another session's lock while `on.busy`. */
function heldWhile(memory: MemoryStore, on: { busy: boolean }): Store {
  const held = heldWrites(memory);
  return new Proxy(memory, {
    get(target, key) {
      const source = on.busy ? held : target;
      const value = Reflect.get(source, key, source);
      return typeof value === "function" ? value.bind(source) : value;
    },
  });
}

/** A bridge's give-up on message `m-1` of `job`, after 3 deliveries. */
const genericGiveUp = JSON.stringify({
  job,
  gaveUp: { deliveries: 3, messageId: "m-1" },
});

/** QStash's failure callback for `job`, its retries spent. */
const qstashGiveUp = failureCallback(job);

/** How a queue's give-up is posted: its route, and a signed request (fresh each call). */
interface GiveUpRoute {
  readonly name: string;
  readonly path: string;
  request(clock: { now: number }): Promise<RequestInit>;
}

const routes: readonly GiveUpRoute[] = [
  {
    name: "POST /v1/deliveries",
    path: "/v1/deliveries",
    request: (clock) =>
      genericRequest(genericGiveUp, {
        signature: signHmac(
          SECRET,
          genericGiveUp,
          Math.floor(clock.now / 1000),
        ),
      }),
  },
  {
    name: "POST /v1/qstash/failed",
    path: "/v1/qstash/failed",
    request: () => failedRequest(qstashGiveUp),
  },
];

/** Sends `init` again (its bytes as they were) to `path`. */
function post(
  app: {
    request: (path: string, init: RequestInit) => Response | Promise<Response>;
  },
  path: string,
  init: RequestInit,
): Promise<Response> {
  return Promise.resolve(app.request(path, init));
}

/**
 * How the job comes back after the give-up dropped it: published again by
 * the payments API (the letter stays), or redriven by an operator (the
 * letter goes).
 */
type ComesBack = "published again" | "redriven";

/**
 * The give-up busy twice, the store back, the queue's own retry of it
 * resolving the job (dropped, the intent authorized), the job back as
 * `back` says and sent (its tx pending), then the first give-up sent
 * again, its bytes as they were: asserts the payment stays settling with
 * its job.
 */
async function replayAfterPublishedAgain(
  route: GiveUpRoute,
  back: ComesBack,
  store: Store,
  storeBack: () => void | Promise<void>,
  read: () => Promise<unknown>,
): Promise<void> {
  const clock = { now: NOW };
  const { app } = await makeApp({
    deps: {
      store,
      now: () => clock.now,
      redriveTo: { publish: () => Promise.resolve() },
    },
    scripts: {
      pi_0001: { sends: [{ txHash: "0xabc" }], receipts: ["pending"] },
    },
  });
  const first = await route.request(clock);
  const busy = await post(app, route.path, first);
  const busyText = await busy.text();
  assert.equal(busy.status, 503, busyText);
  assert.equal(JSON.parse(busyText).outcome, "retry", busyText);
  await storeBack();
  // The queue's own retry of the give-up, signed afresh: the job dropped.
  clock.now += 1_000;
  const retry = await post(app, route.path, await route.request(clock));
  const retryText = await retry.text();
  assert.equal(retry.status, 200, retryText);
  assert.equal(JSON.parse(retryText).outcome, "poison", retryText);
  assert.match(JSON.stringify(await read()), /"state":"authorized"/);
  // Past the drop's lease, the job comes back, and its first delivery
  // sends the payment.
  clock.now += 60_000;
  if (back === "redriven") {
    const redrive = await app.request(
      "/v1/dead-letters/pi_0001/settle/redrive",
      { method: "POST", headers: { authorization: `Bearer ${OPS}` } },
    );
    assert.equal(redrive.status, 202, await redrive.text());
  }
  const again = await genericRequest(JSON.stringify({ job, delivery: 1 }), {
    signature: signHmac(
      SECRET,
      JSON.stringify({ job, delivery: 1 }),
      Math.floor(clock.now / 1000),
    ),
  });
  const sent = await post(app, "/v1/deliveries", again);
  const sentText = await sent.text();
  assert.equal(JSON.parse(sentText).outcome, "retry", sentText);
  const before = JSON.stringify(await read());
  assert.match(before, /"state":"settling"/);
  assert.match(before, /0xabc/);
  // The first give-up again, its bytes as they were, within its signature's age.
  clock.now += 1_000;
  const replay = await post(app, route.path, first);
  const replayText = await replay.text();
  // Taken (its request on no record), and answered as the queue's retry
  // was, from the letter that retry wrote, or once it is gone from the
  // message's give-up marks: the first resolution stands.
  assert.equal(replay.status, 200, replayText);
  if (back === "redriven") {
    assert.match(
      JSON.parse(replayText).reason,
      /repeated its give-up for a message already resolved/,
      replayText,
    );
  } else {
    assert.deepEqual(
      [JSON.parse(replayText).outcome, JSON.parse(replayText).reason],
      [JSON.parse(retryText).outcome, JSON.parse(retryText).reason],
      replayText,
    );
  }
  assert.equal(
    JSON.stringify(await read()),
    before,
    `the give-up sent again (${replay.status} ${replayText}) moved the payment its job ${back} sent`,
  );
}

serverUpFirst();

for (
  const [route, back] of routes.flatMap((route) =>
    (["published again", "redriven"] as const).map((back) =>
      [route, back] as const
    )
  )
) {
  Deno.test(`${route.name}: a give-up the store answered busy at its resolution and its replay record, sent again once the job was ${back} and sent, leaves the payment settling`, async () => {
    const memory = new MemoryStore();
    await memory.createIntent({
      id: "pi_0001",
      state: "authorized",
      hold: "pending",
    });
    const on = { busy: true };
    await replayAfterPublishedAgain(
      route,
      back,
      heldWhile(memory, on),
      () => {
        on.busy = false;
      },
      () => memory.getIntent("pi_0001"),
    );
  });
}

for (
  const [route, back] of routes.flatMap((route) =>
    (["published again", "redriven"] as const).map((back) =>
      [route, back] as const
    )
  )
) {
  Deno.test({
    name:
      `${route.name} on PostgreSQL: a give-up another session's lock held at its resolution and its replay record, sent again once the job was ${back} and sent, leaves the payment settling`,
    ignore: !postgresAvailable,
    fn: onFreshSchema(
      { max: 2, connectionWaitMs: 1_000 },
      async ({ admin, schema, store }) => {
        await store.createIntent({
          id: "pi_0001",
          state: "authorized",
          hold: "pending",
        });
        const unlock = await lockWrites(admin, schema);
        let unlocked = false;
        const reader = new PostgresStore(admin, { schema });
        try {
          await replayAfterPublishedAgain(
            route,
            back,
            store,
            async () => {
              unlocked = true;
              await unlock();
            },
            () => reader.getIntent("pi_0001"),
          );
        } finally {
          if (!unlocked) await unlock();
        }
      },
    ),
  });
}
