/**
 * A child process for postgres_pooler_check_test.ts: migrate() through a
 * relay that, when the pooler check's second connection opens its
 * transaction, holds it until the server has ended the first connection
 * (idle between its queries: pg_terminate_backend), then lets it
 * through; or, with `rollback` as its fourth argument, holds the second
 * connection's `ROLLBACK` until the server has ended that session; then a
 * write and a read on each connection of the pool. Prints how many
 * answered, if the process lived through them.
 *
 * @module
 */

import { deepStrictEqual as assertEquals } from "node:assert";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";

const [url, schema, name, cut = "idle"] = Deno.args as [
  string,
  string,
  string,
  string?,
];
const real = new URL(url);
const admin = postgres(url, { max: 1, onnotice: () => {} });

const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
const text = new TextDecoder("latin1");
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
          if (
            !held && cut === "rollback" &&
            text.decode(chunk).includes("ROLLBACK\0")
          ) {
            // The second connection of the check, in its transaction.
            const [row] = await admin`
              SELECT count(pg_terminate_backend(pid))::int AS n
              FROM pg_stat_activity
              WHERE application_name = ${name}
                AND state = 'idle in transaction'`;
            held = row?.n === 1;
            await new Promise((resolve) => setTimeout(resolve, 300));
          }
          if (
            !held && cut === "idle" &&
            /BEGIN isolation level read committed/.test(text.decode(chunk))
          ) {
            held = true;
            // The first connection of the check, idle after its statement.
            const [row] = await admin`
              SELECT pid FROM pg_stat_activity
              WHERE application_name = ${name} AND state = 'idle'
                AND query LIKE 'SELECT pg_backend_pid() AS pid, $1::int AS one'`;
            if (row) {
              await admin`SELECT pg_terminate_backend(${row.pid as number})`;
              await new Promise((resolve) => setTimeout(resolve, 300));
            }
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
  max: 4,
  onnotice: () => {},
  connection: { application_name: name },
});
const store = new PostgresStore(sql, { schema, connectionWaitMs: 3000 });
await store.migrate();
// The pool's connections, each used: one handed back broken is among them.
let answered = 0;
await Promise.all(Array.from({ length: 8 }, async (_, i) => {
  for (let tries = 0; tries < 20; tries++) {
    try {
      await store.createIntent({ id: `x${i}`, state: "authorized" });
      assertEquals((await store.getIntent(`x${i}`))?.state, "authorized");
      answered++;
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}));
await Deno.stdout.write(
  new TextEncoder().encode(
    held ? `alive, ${answered} of 8 written and read\n` : "not held\n",
  ),
);
Deno.exit(0);
