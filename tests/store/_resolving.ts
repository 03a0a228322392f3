/**
 * A child process for resolution_kill_test.ts: fails every `settling`
 * intent of the store with its hold voided (the give-up's resolution,
 * `ledger: "void"`), and every `needs_review` one (the resolve route's),
 * four at a time, saying `start` once connected and each id once resolved,
 * for the test to SIGKILL it midway.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import postgres from "postgres";
import { KvStore } from "../../store/kv.ts";
import { PostgresStore } from "../../store/postgres.ts";
import type { Store } from "../../store/store.ts";

const [kind, where, schema, count] = Deno.args as [
  "kv" | "postgres",
  string,
  string,
  string,
];
let close = () => Promise.resolve();
let store: Store;
if (kind === "kv") {
  const kv = await Deno.openKv(where);
  store = new KvStore(kv);
  close = () => Promise.resolve(kv.close());
} else {
  // Named by its schema, for the test to wait until the server let go of
  // its sessions once it is killed.
  const sql = postgres(where, {
    max: 8,
    onnotice: () => {},
    connection: { application_name: schema },
  });
  store = new PostgresStore(sql, { schema });
  close = () => sql.end();
}
// Connected (its first read answered) before it says so.
await store.getIntent("pi_0000");
console.log("start");
// Four at a time, a line for each resolved.
let next = 0;
await Promise.all(
  Array.from({ length: 4 }, async () => {
    for (let i = next++; i < Number(count); i = next++) {
      const id = `pi_${String(i).padStart(4, "0")}`;
      const intent = (await store.getIntent(id))!;
      if (intent.state !== "settling" && intent.state !== "needs_review") {
        continue;
      }
      await store.transition(id, {
        from: intent.state,
        to: "failed",
        version: intent.version,
        at: 1,
        ledger: "void",
      });
      console.log(id);
    }
  }),
);
console.log("resolved");
await close();
