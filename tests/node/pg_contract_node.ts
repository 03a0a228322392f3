/**
 * The store contract suite on Node and on Bun: `PostgresStore` over the npm
 * client `postgres` (postgres.js, bundled in) against the real server whose
 * URL `deno task node-check` or `deno task bun-check` passes as
 * `RELAYER_PG_URL`, run by `node --test` or by `bun test`, each through its
 * own runner (`_runner.ts`). Each store gets a schema of its own, dropped
 * when it closes.
 *
 * @module
 */

import process from "node:process";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { storeContract } from "../store/_contract.ts";
import { runner } from "./_runner.ts";

const url = process.env.RELAYER_PG_URL;
if (!url) {
  throw new Error(
    "RELAYER_PG_URL is not set: run deno task node-check or deno task bun-check",
  );
}
const runtime = process.versions.bun === undefined ? "Node" : "Bun";
const { test, after } = await runner();
const admin = postgres(url, { max: 2, onnotice: () => {} });
after(() => admin.end());

let opened = 0;
storeContract(`PostgresStore on ${runtime} (postgres.js)`, async () => {
  const schema = `${runtime.toLowerCase()}_${process.pid}_${++opened}`;
  const sql = postgres(url, { max: 4, onnotice: () => {} });
  const store = new PostgresStore(sql, { schema });
  await store.migrate();
  return {
    store,
    close: async () => {
      await sql.end();
      await admin.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
    },
  };
}, { test });
