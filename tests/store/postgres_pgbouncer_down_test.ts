/**
 * PostgresStore behind a real PgBouncer (transaction mode, `?prepare=false`)
 * whose server is down: its logins to the server fail, and for
 * `server_login_retry` after each failure it refuses every client's query
 * with 08P01 and no severity postgres.js reads ("server login has been
 * failing, try again later (server_login_retry)"), then closes the client.
 * A new connection's first query is postgres.js 3.4.9's own array-types
 * query, whose promise it drops: refused so, it is an unhandled rejection
 * that `isTypeFetchLost` takes (as `main.ts` does, which keeps the process
 * through it). The store's reads and a start's migration fail, none
 * answered as "no such intent", and all answer again once the server is
 * back.
 *
 * Without `pgbouncer` these tests are skipped with one loud line, except
 * under `CI=true`, where that fails the run.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import {
  isTypeFetchLost,
  PostgresStore,
  reconnectBackoffS,
} from "../../store/postgres.ts";
import { connectionLost } from "../../store/_postgres_errors.ts";
import {
  startPgBouncer,
  startPostgres,
} from "../../support/postgres_server.ts";
import { pgbouncerAvailable } from "../_postgres.ts";

/** Whether this suite runs: `false` only where PostgreSQL or PgBouncer is missing, outside CI. */
const available: boolean = await pgbouncerAvailable();

/** The store's bound on a read's wait (`connectionWaitMs`). */
const WAIT_MS = 3_000;

/**
 * What a call during the outage came to: `answered` (wrong: nothing can
 * be read from a server that is down), PgBouncer's refusal while its
 * logins fail, the connection lost, the store's own bound on the wait, or
 * anything else (shown whole).
 */
function outcome(call: Promise<unknown>): Promise<string> {
  return call.then(
    (value) => `answered ${JSON.stringify(value)}`,
    (error) => {
      const { code, message } = (error ?? {}) as {
        code?: unknown;
        message?: unknown;
      };
      if (code === "08P01" && /server_login_retry/.test(String(message))) {
        return "refused";
      }
      if (connectionLost(error)) return "lost";
      if (/did not answer the store's/.test(String(message))) return "bound";
      return `failed ${String(code)} ${String(message ?? error)}`;
    },
  );
}

/** Asks `ask` until it answers, every 250 ms, for at most `ms`; its last outcome. */
async function untilAnswered(
  ask: () => Promise<unknown>,
  ms: number,
): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    const line = await outcome(ask());
    if (line.startsWith("answered") || Date.now() > deadline) return line;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

Deno.test({
  name:
    "PostgresStore through PgBouncer whose logins to the server fail: its reads and a start fail, refused or lost, none answered; the types query's refusal is isTypeFetchLost's; both answer once the server is back",
  ignore: !available,
  // postgres.js's own reconnect timer (connection.js's reconnect), set as
  // a query opens again a connection PgBouncer closed, outlives
  // sql.end(), and so does the connect it makes: not the store's.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const server = await startPostgres();
    const bouncer = await startPgBouncer(server, {
      mode: "transaction",
      poolSize: 2,
    });
    const clients: { sql: postgres.Sql; store: PostgresStore }[] = [];
    const open = () => {
      const sql = postgres(bouncer.url, {
        prepare: false,
        max: 2,
        onnotice: () => {},
        backoff: reconnectBackoffS,
      });
      const store = new PostgresStore(sql, { connectionWaitMs: WAIT_MS });
      clients.push({ sql, store });
      return store;
    };
    // Every unhandled rejection: those isTypeFetchLost takes are kept from
    // ending the run, as main.ts keeps them; any other ends it.
    const unhandled: unknown[] = [];
    const onRejection = (event: PromiseRejectionEvent) => {
      unhandled.push(event.reason);
      if (isTypeFetchLost(event.reason)) event.preventDefault();
    };
    globalThis.addEventListener("unhandledrejection", onRejection);
    try {
      const serving = open();
      await serving.migrate();
      await serving.createIntent({ id: "pi_down", state: "authorized" });
      assert.equal((await serving.getIntent("pi_down"))?.state, "authorized");

      await server.halt("fast");
      // Three rounds: a read on the open store, and a start (a new client
      // and store, its migration, then a read).
      const seen = new Set<string>();
      for (let round = 0; round < 3; round++) {
        seen.add(await outcome(serving.getIntent("pi_down")));
        const starting = open();
        seen.add(await outcome(starting.migrate()));
        seen.add(await outcome(starting.getIntent("pi_down")));
      }
      // Each failed, none answered (a read answered null would be "no
      // such intent", and its job dropped), and PgBouncer's refusal was
      // among them.
      assert.deepEqual(
        [...seen].filter((line) =>
          !["refused", "lost", "bound"].includes(line)
        ),
        [],
      );
      assert.ok(seen.has("refused"), `PgBouncer's refusal met: ${[...seen]}`);
      // New connections' types queries refused so, each an unhandled
      // rejection isTypeFetchLost takes (another would have ended the test).
      assert.ok(unhandled.length > 0, "a types query was refused");
      assert.deepEqual(unhandled.filter((r) => !isTypeFetchLost(r)), []);

      await server.resume();
      // PgBouncer tries its login again after server_login_retry (1 s).
      const read = await untilAnswered(
        () => serving.getIntent("pi_down"),
        15_000,
      );
      assert.match(read, /^answered \{"id":"pi_down","state":"authorized"/);
      const started = open();
      assert.equal(
        await untilAnswered(() => started.migrate(), 15_000),
        "answered undefined",
      );
      assert.equal((await started.getIntent("pi_down"))?.state, "authorized");
    } finally {
      globalThis.removeEventListener("unhandledrejection", onRejection);
      // Each store first: its probes of the pool after a lost connection
      // stop with it, their timer too.
      for (const { store } of clients) store.close();
      await Promise.all(clients.map(({ sql }) => sql.end({ timeout: 0 })));
      await bouncer.stop();
      await server.stop();
    }
  },
});
