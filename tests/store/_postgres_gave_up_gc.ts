/**
 * Run with `--v8-flags=--expose-gc --allow-env --allow-net=127.0.0.1`, and
 * `DATABASE_URL` and `SCHEMA` set (a migrated schema): holds the one
 * connection of a pool of one, so that every write of a `PostgresStore`
 * on it gives up waiting for a connection (`connectionWaitMs` 20), and
 * prints as JSON how much the heap grew, after a garbage collection, over
 * the last 4,000 such writes, 500 at once (the first 1,000 warm up).
 *
 * @module
 */

// deno-lint-ignore-file no-console
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with --v8-flags=--expose-gc");
const heap = async () => {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return Deno.memoryUsage().heapUsed;
};

const sql = postgres(Deno.env.get("DATABASE_URL")!, {
  max: 1,
  onnotice: () => {},
  max_lifetime: null,
});
const store = new PostgresStore(sql, {
  schema: Deno.env.get("SCHEMA")!,
  connectionWaitMs: 20,
});
const held = await sql.reserve();
let made = 0;
let refused = 0;
const write = async (count: number) => {
  const writes = [];
  for (const end = made + count; made < end; made++) {
    writes.push(
      store.createIntent({ id: `pi_${made}` }).then(
        () => {},
        (error: Error) => {
          if (/gave the store no connection/.test(error.message)) refused++;
          else throw error;
        },
      ),
    );
  }
  await Promise.all(writes);
};
// In waves of 500 at once, each given up before the next: as a stall of
// the pool meets a steady load.
const waves = async (count: number) => {
  for (let i = 0; i < count; i++) await write(500);
};
await waves(2);
const before = await heap();
await waves(8);
const grewBytes = await heap() - before;
held.release();
// Queued behind the first write's reserve(), which takes the connection
// back and hands it on: the pool is idle once this answers.
await sql`SELECT 1`;
store.close();
await sql.end();
console.log(JSON.stringify({ writes: made, refused, grewBytes }));
