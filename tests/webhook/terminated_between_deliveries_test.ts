/**
 * The service's PostgreSQL client (as `main.ts` makes it: postgres.js with
 * `reconnectBackoffS` and `answeredSocketOption`) whose idle connections
 * the server ended between two deliveries (`pg_terminate_backend`, as an
 * operator, `idle_session_timeout` or a restart ends them), on a real
 * server: once the client saw them close, the next delivery reconnects
 * and settles the payment, and nothing is lost. And a delivery sent
 * before the client saw the ends (on the docs' short client, `postgres(url)`,
 * as on the service's): its look, met by an end, is asked once more on a
 * connection opened anew, and the delivery settles the payment, not a 503.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { createApp } from "../../webhook/app.ts";
import { ScriptedSender } from "../../mod.ts";
import { PostgresStore, reconnectBackoffS } from "../../store/postgres.ts";
import { answeredSocketOption } from "../../store/postgres_socket.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
  serverUpFirst,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { signedDelivery } from "./_signing.ts";

const SECRET = "webhook-secret-for-tests";
const NOW = 1_000_000;

/** A signed POST /v1/deliveries of `intentId`'s settle job as delivery `n`. */
function delivery(intentId: string, n: number): RequestInit {
  return signedDelivery(SECRET, intentId, n, Math.floor(NOW / 1000) + n);
}

serverUpFirst();

/**
 * `store` migrated with three authorized intents, and an app on it whose
 * sender sends each once and sees it confirmed; its log lines in `lines`.
 */
async function threeAuthorized(store: PostgresStore) {
  await store.migrate();
  const ids = ["pi_1", "pi_2", "pi_3"];
  for (const id of ids) {
    await store.createIntent({ id, state: "authorized", hold: "pending" });
  }
  const lines: string[] = [];
  const app = createApp({
    store,
    sender: new ScriptedSender(Object.fromEntries(ids.map((id, i) => [
      id,
      { sends: [{ txHash: `0x${i}` }], receipts: ["confirmed"] },
    ]))),
    now: () => NOW,
    random: () => 0,
    webhookSecret: SECRET,
    log: (line) => lines.push(line),
  });
  return { ids, lines, app };
}

for (const max of [1, 2]) {
  Deno.test({
    name:
      `createApp() on PostgreSQL (a pool of ${max}): a delivery right after the server ended the store's idle connections reconnects and settles the payment, nothing lost`,
    ignore: !postgresAvailable,
    fn: timeout(30_000, async () => {
      const admin = await connect(2);
      const schema = freshSchema();
      const socket = answeredSocketOption(10_000);
      let closes = 0;
      const sql = postgres(await postgresUrl(), {
        onclose: () => void closes++,
        max,
        backoff: reconnectBackoffS,
        ...socket,
        onnotice: () => {},
        max_lifetime: null,
        connection: { application_name: schema },
      });
      const store = new PostgresStore(sql, { schema });
      try {
        const { ids, lines, app } = await threeAuthorized(store);
        const outcomes: string[] = [];
        let seen = closes;
        for (const id of ids) {
          // Sent, then asked back to read the receipt.
          const sent = await app.request("/v1/deliveries", delivery(id, 1));
          assert.equal((await sent.json()).outcome, "retry");
          const [ended] = await admin<{ n: number }[]>`
            SELECT count(pg_terminate_backend(pid))::int AS n
            FROM pg_stat_activity WHERE application_name = ${schema}`;
          assert.ok(ended!.n >= 1, "the store's connections were ended");
          // Until the client saw each close, as between two deliveries. In a
          // pool of 2, one of the two ends is at times never reported to
          // onclose (in about half the runs on an idle machine, the pool
          // already holding a new session): a second after the first close
          // is seen, the delivery goes on, and must still settle.
          for (
            let waited = 0, sinceFirst = 0;
            closes < seen + ended!.n && sinceFirst < 1_000;
            waited += 10
          ) {
            assert.ok(
              waited < 5_000,
              `the client saw ${closes - seen} of the ${ended!.n} ends`,
            );
            if (closes > seen) sinceFirst += 10;
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
          seen = closes;
          const next = await app.request("/v1/deliveries", delivery(id, 2));
          outcomes.push(`${next.status} ${(await next.json()).outcome}`);
        }
        assert.deepEqual(outcomes, ids.map(() => "200 done"), lines.join("\n"));
        for (const id of ids) {
          assert.equal((await store.getIntent(id))?.state, "settled");
        }
      } finally {
        store.close();
        await sql.end({ timeout: 1 });
        await socket.socket.closed(1_000);
        await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await admin.end();
      }
    }),
  });
}

// A pool of 1, and one of 4 (the service's client keeps postgres.js's
// 10): there the read asked again may meet another ended connection whose
// close the client has not seen yet, each failing it once.
for (const max of [1, 4]) {
  for (const answered of [false, true]) {
    Deno.test({
      name: `createApp() on PostgreSQL (${
        answered ? "the service's client" : "postgres(url)"
      }, a pool of ${max}): a delivery sent right as the server ended the store's idle connections, before the client saw them close, settles the payment: its look, met by the end, is asked again`,
      ignore: !postgresAvailable,
      fn: timeout(30_000, async () => {
        const admin = await connect(2);
        const schema = freshSchema();
        const socket = answered ? answeredSocketOption(10_000) : undefined;
        const sql = postgres(await postgresUrl(), {
          max,
          backoff: reconnectBackoffS,
          ...socket,
          onnotice: () => {},
          max_lifetime: null,
          connection: { application_name: schema },
        });
        const store = new PostgresStore(sql, { schema });
        try {
          const { ids, lines, app } = await threeAuthorized(store);
          const outcomes: string[] = [];
          for (const id of ids) {
            const sent = await app.request("/v1/deliveries", delivery(id, 1));
            assert.equal((await sent.json()).outcome, "retry");
            // Every connection of the pool open, then ended, and the next
            // delivery sent at once.
            await Promise.all(
              Array.from({ length: max }, () => store.getIntent(id)),
            );
            const [ended] = await admin<{ n: number }[]>`
              SELECT count(pg_terminate_backend(pid))::int AS n
              FROM pg_stat_activity WHERE application_name = ${schema}`;
            assert.ok(ended!.n >= 1, "the store's connections were ended");
            const next = await app.request("/v1/deliveries", delivery(id, 2));
            outcomes.push(`${next.status} ${(await next.json()).outcome}`);
          }
          // Before: a 503 in every round, the look failing "PostgreSQL
          // lost the connection during the store's read (…): nothing was
          // read, so try again", a delivery of the queue's spent on it.
          assert.deepEqual(
            outcomes,
            ids.map(() => "200 done"),
            lines.join("\n"),
          );
          for (const id of ids) {
            assert.equal((await store.getIntent(id))?.state, "settled");
          }
        } finally {
          store.close();
          await sql.end({ timeout: 1 });
          await socket?.socket.closed(1_000);
          await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          await admin.end();
        }
      }),
    });
  }
}
