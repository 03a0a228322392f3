/**
 * A child process for postgres_flight_cut_test.ts: a write whose flight
 * fails on a statement of its own (its intent moved on between its read
 * and its flight, `RL002`), on a connection new to its statements, so
 * postgres.js 3.4.9 sends the statements behind the failed one one round
 * trip at a time. A relay holds the flight's `COMMIT` until the server has
 * ended that session (`pg_terminate_backend`), so the `COMMIT` fails as
 * the connection closes. Then a read and a write on each connection of
 * the pool. Prints how many answered, if the process lived through them.
 *
 * @module
 */

import { deepStrictEqual as assertEquals } from "node:assert";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { afterFirstRead } from "../_postgres.ts";

const [url, schema, name] = Deno.args as [string, string, string];
const real = new URL(url);
const admin = postgres(url, { max: 1, onnotice: () => {} });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
const text = new TextDecoder("latin1");
let armed = false;
let held = false;
(async () => {
  for await (const client of listener) {
    (async () => {
      const server = await Deno.connect({
        hostname: real.hostname,
        port: Number(real.port || 5432),
      });
      server.readable.pipeTo(client.writable).catch(() => {});
      const writer = server.writable.getWriter();
      try {
        for await (const chunk of client.readable) {
          // The flight's COMMIT (a Parse of "COMMIT"), sent alone once the
          // statement before it answered.
          if (armed && text.decode(chunk).includes("COMMIT\0")) {
            armed = false;
            const [row] = await admin`
              SELECT count(pg_terminate_backend(pid))::int AS n
              FROM pg_stat_activity
              WHERE application_name = ${name}
                AND state = 'idle in transaction (aborted)'`;
            held = row?.n === 1;
            // The server's goodbye and the close reach the client.
            await sleep(300);
          }
          await writer.write(chunk);
        }
      } catch {
        // either side gone
      }
    })().catch(() => {});
  }
})().catch(() => {});

const proxied = new URL(url);
proxied.port = String((listener.addr as Deno.NetAddr).port);
const sql = postgres(proxied.href, {
  max: 2,
  onnotice: () => {},
  connection: { application_name: name },
});
const store = new PostgresStore(sql, { schema, connectionWaitMs: 3000 });
const other = new PostgresStore(admin, { schema });
// Created on another client: every statement of the write below is new to
// the connection it reserves.
await other.createIntent({ id: "a", state: "authorized", hold: "pending" });
// Another writer moves the intent between the write's read and its flight.
const racing = new PostgresStore(
  afterFirstRead(sql, async () => {
    await other.transition("a", {
      from: "authorized",
      to: "settling",
      version: "1",
      at: 500,
    });
    armed = true;
  }),
  { schema, connectionWaitMs: 3000 },
);
const refused = await racing.transition("a", {
  from: "authorized",
  to: "settling",
  version: "1",
  at: 600,
}).then(() => "written", (error: Error) => error.name);
// The pool's connections, each used: one handed back closed is among them.
let answered = 0;
await Promise.all(Array.from({ length: 8 }, async (_, i) => {
  for (let tries = 0; tries < 20; tries++) {
    try {
      await store.createIntent({ id: `x${i}`, state: "authorized" });
      assertEquals((await store.getIntent(`x${i}`))?.state, "authorized");
      answered++;
      return;
    } catch {
      await sleep(100);
    }
  }
}));
await Deno.stdout.write(
  new TextEncoder().encode(
    held
      ? `alive, the write ${refused}, ${answered} of 8 written and read\n`
      : "not held\n",
  ),
);
Deno.exit(0);
