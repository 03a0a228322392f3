/**
 * Run with `--v8-flags=--expose-gc --allow-env`: makes a `PostgresStore`
 * for each of 25,000 schemas (no connection: postgres.js connects on a
 * first query), and prints as JSON how much the heap grew, after a garbage
 * collection, over the last 20,000 (the first 5,000 warm up).
 *
 * @module
 */

// deno-lint-ignore-file no-console
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with --v8-flags=--expose-gc");
const heap = () => {
  gc();
  gc();
  return Deno.memoryUsage().heapUsed;
};

const sql = postgres("postgres://relayer@db.invalid:5432/relayer");
let made = 0;
const make = (count: number) => {
  for (const end = made + count; made < end; made++) {
    new PostgresStore(sql, { schema: `tenant_${made}` });
  }
};
make(5_000);
const before = heap();
make(20_000);
console.log(JSON.stringify({ stores: made, grewBytes: heap() - before }));
Deno.exit(0);
