/**
 * The move from Deno KV to PostgreSQL, filled and checked through the
 * webhook's own routes: a service on a Deno KV file takes a first
 * delivery, a send that is still in flight when it stops (its write ahead
 * on record, its outcome never), a poison, QStash's give-up of a message,
 * a replayed request, an exhausted job and a redrive; it is moved; then a
 * service on Deno KV and one on PostgreSQL, started afresh on the same
 * clock, are asked the same things, one after the other, and answer the
 * same to every read and every refusal, and send the same.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type Intent,
  notSent,
  poison,
  ScriptedSender,
  type Sender,
  type SenderScript,
  type Store,
} from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { moveKvToPostgres } from "../../store/kv_to_postgres.ts";
import { createApp } from "../../webhook/app.ts";
import { OPS, SECRET } from "../webhook/_app.ts";
import { QSTASH, signHmac, signQStash } from "../webhook/_signing.ts";
import { openPostgresStore, postgresAvailable } from "../_postgres.ts";

const MINUTE = 60_000;
const ops = { authorization: `Bearer ${OPS}` };

/** The service as a route sees it: its store and sender on a shared clock. */
function service(
  store: Store,
  sender: Sender,
  clock: { now: number },
  enqueued: unknown[],
) {
  return createApp({
    store,
    sender,
    policy: { maxDeliveries: 3 },
    now: () => clock.now,
    random: () => 0,
    qstash: QSTASH,
    webhookSecret: SECRET,
    opsToken: OPS,
    redriveTo: {
      publish: (job) => {
        enqueued.push(job);
        return Promise.resolve();
      },
    },
  });
}

type App = ReturnType<typeof service>;

/** The generic route's request for `intentId`, signed at `atMs`. */
function generic(
  intentId: string,
  atMs: number,
  fields: Record<string, unknown> = {},
): { path: string; init: RequestInit } {
  const body = JSON.stringify({
    job: { intentId, kind: "settle" },
    ...fields,
  });
  return {
    path: "/v1/deliveries",
    init: {
      method: "POST",
      body,
      headers: {
        "content-type": "application/json",
        "x-signature": signHmac(SECRET, body, Math.floor(atMs / 1000)),
      },
    },
  };
}

/** QStash's delivery of `intentId` as message `messageId`. */
async function qstash(intentId: string, messageId: string, retried: number) {
  const body = JSON.stringify({ intentId, kind: "settle" });
  return {
    path: "/v1/qstash",
    init: {
      method: "POST",
      body,
      headers: {
        "content-type": "application/json",
        "upstash-signature": await signQStash(body),
        "upstash-message-id": messageId,
        "upstash-retried": String(retried),
      },
    },
  };
}

/** QStash's failure callback for message `messageId` of `intentId`. */
async function qstashFailed(intentId: string, messageId: string) {
  const url = `${QSTASH.url}/failed`;
  const body = JSON.stringify({
    status: 503,
    retried: 3,
    maxRetries: 3,
    dlqId: `dlq_${messageId}`,
    sourceMessageId: messageId,
    url: QSTASH.url,
    method: "POST",
    sourceBody: btoa(JSON.stringify({ intentId, kind: "settle" })),
  });
  return {
    path: "/v1/qstash/failed",
    init: {
      method: "POST",
      body,
      headers: {
        "content-type": "application/json",
        "upstash-signature": await signQStash(body, { url }),
      },
    },
  };
}

/** A response's status and body, its versions taken out (they differ by store). */
async function answer(response: Response) {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(
      text,
      (key, value) => key === "version" || key === "cursor" ? undefined : value,
    );
  } catch {
    // not JSON: the text itself
  }
  return { status: response.status, body };
}

/** Sends one request to both services, KV first; both answers. */
async function both(
  kv: App,
  pg: App,
  request: { path: string; init?: RequestInit },
) {
  // A body is read once: each service gets its own copy of the request.
  const copy = () => ({
    ...request.init,
    headers: { ...(request.init?.headers as Record<string, string>) },
  });
  const fromKv = await answer(await kv.request(request.path, copy()));
  const fromPg = await answer(await pg.request(request.path, copy()));
  return { fromKv, fromPg };
}

function unversioned(intent: Intent | null) {
  if (intent === null) return null;
  const { version: _, ...rest } = intent;
  return rest;
}

/** What each intent is scripted to do, on every service. */
const SCRIPTS: Record<string, SenderScript> = {
  pi_first: { sends: [{ txHash: "0xf1" }], receipts: ["pending", "confirmed"] },
  pi_poison: {
    sends: [{ error: poison(notSent(new Error("signer: chain id"))) }],
  },
  pi_exhaust: {
    sends: [
      { error: new Error("rpc: connection refused") },
      { error: new Error("rpc: connection refused") },
      { error: new Error("rpc: connection refused") },
    ],
  },
  pi_giveup: { sends: [{ txHash: "0x61" }], receipts: ["pending"] },
  pi_redrive: { sends: [{ txHash: "0x4ed" }], receipts: ["pending"] },
};

const INTENTS = [
  "pi_first",
  "pi_flight",
  "pi_poison",
  "pi_exhaust",
  "pi_giveup",
  "pi_redrive",
  "pi_idle",
];

Deno.test({
  name:
    "a service moved from Deno KV to PostgreSQL through its routes answers every read and every refusal as it did on Deno KV, and sends the same",
  ignore: !postgresAvailable,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_routes_" });
    const kv = await Deno.openKv(`${dir}/relayer.kv`);
    const pg = await openPostgresStore();
    // The app's clock is the wall clock's second: QStash's tokens are
    // checked by the wall clock, its replay records by the app's.
    const clock = { now: Math.floor(Date.now() / 1000) * 1000 };
    let finishFlight!: (error: Error) => void;
    let flightBegan!: () => void;
    const began = new Promise<void>((resolve) => flightBegan = resolve);
    let flight: Promise<Response> | undefined;
    try {
      // --- The service on Deno KV, as it ran until it was stopped.
      const before = new KvStore(kv);
      for (const id of INTENTS) {
        const created = await service(before, new ScriptedSender({}), clock, [])
          .request("/v1/intents", {
            method: "POST",
            headers: { ...ops, "content-type": "application/json" },
            body: JSON.stringify({ id, state: "authorized", hold: "pending" }),
          });
        assert.equal(created.status, 201, await created.text());
      }
      const scripted = new ScriptedSender(SCRIPTS);
      // pi_flight's send never ends while the service runs: it stopped
      // (crashed) with the tx maybe on its way.
      const sender: Sender = {
        send(intent, options) {
          if (intent.id !== "pi_flight") return scripted.send(intent, options);
          flightBegan();
          return new Promise((_, reject) => finishFlight = reject);
        },
        receipt: (txHash) => scripted.receipt(txHash),
      };
      const enqueued: unknown[] = [];
      const app = service(before, sender, clock, enqueued);
      const send = async (request: { path: string; init: RequestInit }) =>
        await answer(await app.request(request.path, request.init));

      // A first delivery: sent, its receipt pending (counted by the store).
      const first = generic("pi_first", clock.now);
      assert.equal((await send(first)).status, 503);
      // The very same request again: a replay, refused.
      const replayed = await send(first);
      assert.equal(replayed.status, 401, JSON.stringify(replayed));
      // A send in flight: its write ahead on record, its outcome never.
      flight = Promise.resolve(app.request(
        generic("pi_flight", clock.now).path,
        generic("pi_flight", clock.now).init,
      ));
      await began;
      const inFlight = await before.getIntent("pi_flight");
      assert.notEqual(inFlight?.broadcasting, null);
      // A poison: failed, its hold voided, a declared dead letter.
      assert.equal((await send(generic("pi_poison", clock.now))).status, 200);
      // Exhausted over QStash: in review, an exhausted dead letter.
      const exhausting = [];
      for (let retried = 0; retried < 3; retried++) {
        exhausting.push(await qstash("pi_exhaust", "msg_x", retried));
        const outcome = await send(exhausting[retried]!);
        clock.now += 1000;
        if (retried < 2) assert.equal(outcome.status, 503);
        else assert.equal(outcome.status, 200, JSON.stringify(outcome));
      }
      // Sent once over QStash, then given up by QStash: its marks.
      assert.equal(
        (await send(await qstash("pi_giveup", "msg_g", 0))).status,
        503,
      );
      clock.now += 1000;
      const gaveUp = await send(await qstashFailed("pi_giveup", "msg_g"));
      assert.equal(gaveUp.status, 200, JSON.stringify(gaveUp));
      // Given up before any delivery, then redriven by the operator.
      const gaveUpEarly = await send(await qstashFailed("pi_redrive", "msg_r"));
      assert.equal(gaveUpEarly.status, 200, JSON.stringify(gaveUpEarly));
      // Past the give-up's lease.
      clock.now += 36_000;
      const redriven = await send({
        path: "/v1/dead-letters/pi_redrive/settle/redrive",
        init: { method: "POST", headers: ops },
      });
      assert.equal(redriven.status, 202, JSON.stringify(redriven));
      assert.equal(enqueued.length, 1);
      // --- Stopped. A minute on, every lease has lapsed: the move.
      clock.now += MINUTE;
      const report = await moveKvToPostgres(kv, pg.sql, {
        schema: pg.schema,
        now: () => clock.now,
      });
      assert.equal(report.moved.intents, INTENTS.length);
      assert.equal(report.moved.holds, INTENTS.length);

      // --- Two services started afresh on the same clock, one per store.
      const kvStore = new KvStore(kv);
      const kvSender = new ScriptedSender({
        ...SCRIPTS,
        pi_first: { sends: [{ txHash: "0xf1" }], receipts: ["confirmed"] },
        pi_flight: { sends: [{ txHash: "0xf2" }], receipts: ["pending"] },
        pi_giveup: { sends: [], receipts: ["pending"] },
      });
      const pgSender = new ScriptedSender({
        ...SCRIPTS,
        pi_first: { sends: [{ txHash: "0xf1" }], receipts: ["confirmed"] },
        pi_flight: { sends: [{ txHash: "0xf2" }], receipts: ["pending"] },
        pi_giveup: { sends: [], receipts: ["pending"] },
      });
      const kvApp = service(kvStore, kvSender, clock, []);
      const pgApp = service(pg.store, pgSender, clock, []);
      const same = async (
        what: string,
        request: { path: string; init?: RequestInit },
      ) => {
        const { fromKv, fromPg } = await both(kvApp, pgApp, request);
        assert.deepEqual(fromPg, fromKv, what);
        return fromKv;
      };

      // Every read.
      for (const id of INTENTS) {
        assert.deepEqual(
          unversioned(await pg.store.getIntent(id)),
          unversioned(await kvStore.getIntent(id)),
          id,
        );
        await same(`GET ${id}`, {
          path: `/v1/intents/${id}`,
          init: { headers: ops },
        });
      }
      const letters = await same("the dead letters", {
        path: "/v1/dead-letters?limit=1000",
        init: { headers: ops },
      });
      assert.equal(
        (letters.body as { items: unknown[] }).items.length,
        3,
        JSON.stringify(letters),
      );
      for await (
        const entry of kv.list({ prefix: ["relayer", "deliveries"] })
      ) {
        const key = String(entry.key.at(-1));
        assert.equal(
          await pg.store.deliveries(key, clock.now),
          await kvStore.deliveries(key, clock.now),
          key,
        );
      }

      // Every refusal: the replay, still refused.
      const replay = await same("the replayed request", first);
      assert.equal(replay.status, 401, JSON.stringify(replay));
      // QStash's too: its token's id is on record past the move.
      const qstashReplay = await same(
        "a replayed QStash delivery",
        exhausting[0]!,
      );
      assert.equal(qstashReplay.status, 401, JSON.stringify(qstashReplay));
      // A late copy of the message QStash gave up on sends nothing.
      const late = await same(
        "a late copy of the given-up message",
        await qstash("pi_giveup", "msg_g", 1),
      );
      assert.notEqual(late.status, 503, JSON.stringify(late));
      // ...and of the one given up, then redriven: its mark stops it
      // though its intent is still settling.
      const lateRedriven = await same(
        "a late copy of the message given up, then redriven",
        await qstash("pi_redrive", "msg_r", 1),
      );
      assert.equal(lateRedriven.status, 200, JSON.stringify(lateRedriven));
      // The redriven job, published afresh, sends.
      // The send in flight is still maybe sent.
      await same(
        "the next delivery of the send in flight",
        generic("pi_flight", clock.now),
      );
      // The others go on where they stood.
      const confirmed = await same(
        "pi_first's next delivery",
        generic("pi_first", clock.now),
      );
      assert.equal(confirmed.status, 200, JSON.stringify(confirmed));
      await same(
        "pi_redrive's next delivery",
        generic("pi_redrive", clock.now),
      );
      await same("pi_poison, failed", generic("pi_poison", clock.now));
      await same("pi_exhaust, in review", generic("pi_exhaust", clock.now));
      await same("pi_idle's first", generic("pi_idle", clock.now));
      for (const id of INTENTS) {
        await same(`GET ${id} after`, {
          path: `/v1/intents/${id}`,
          init: { headers: ops },
        });
      }
      assert.deepEqual(pgSender.calls, kvSender.calls);
      // The only sends: the redriven job's and pi_idle's first; none for
      // the send in flight, nor for the late copies.
      assert.deepEqual(
        pgSender.calls.filter((call) => call.method === "send"),
        [
          { method: "send", intentId: "pi_redrive", replace: false },
          { method: "send", intentId: "pi_idle", replace: false },
        ],
      );
    } finally {
      // The crashed service's send ends at last; what it writes is moot.
      finishFlight?.(new Error("stopped"));
      await flight?.catch(() => {});
      await pg.close();
      kv.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
