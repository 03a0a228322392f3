/**
 * A child process for postgres_begin_cut_test.ts: a write on a client made
 * with `fetch_types: false`, whose transaction goes through `sql.begin()`.
 * A relay holds the write's statements (sent once its `BEGIN` answered),
 * or with `commit` as its fourth argument postgres.js's own `COMMIT`
 * (sent once the store's `COMMIT AND CHAIN` answered), until the server
 * has ended that session (idle in its transaction: `pg_terminate_backend`),
 * then a write and a read on each connection of the pool. Prints how the
 * write ended, whether within `connectionWaitMs`, whether it is on record,
 * and how many answered, if the process lived through them.
 *
 * @module
 */

import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { endSession, goodbye, relayed, useThePool } from "./_cut.ts";

const [url, schema, name, at = "flight"] = Deno.args as [
  string,
  string,
  string,
  string?,
];
// What the relay holds: the write's statements, behind the bound of its
// lock waits, or postgres.js's COMMIT (prepared: "commit" as its text).
const holds = at === "commit"
  ? (text: string) => text.includes("commit\u0000")
  : (text: string) => text.includes("SET LOCAL lock_timeout");
const admin = postgres(url, { max: 1, onnotice: () => {} });

let armed = false;
let held = false;
const sql = postgres(
  relayed(url, async (text) => {
    if (armed && holds(text)) {
      armed = false;
      held = await endSession(admin, name, "idle in transaction");
      await goodbye();
    }
  }),
  {
    max: 2,
    fetch_types: false,
    onnotice: () => {},
    connection: { application_name: name },
  },
);
const waitMs = 3000;
const store = new PostgresStore(sql, { schema, connectionWaitMs: waitMs });
armed = true;
const started = performance.now();
const write = await store.createIntent({ id: "cut", state: "authorized" })
  .then(
    () => "landed",
    (error: Error) =>
      /^PostgreSQL lost the connection during the write \(.*\): it may have landed or not; the next read says which$/
          .test(error.message)
        ? "lost the connection"
        : `failed with ${error.message}`,
  );
const within = performance.now() - started < waitMs ? "within" : "past";
const onRecord = (await store.getIntent("cut").catch(() => null)) === null
  ? "not on record"
  : "on record";
const answered = await useThePool(store);
await Deno.stdout.write(
  new TextEncoder().encode(
    held
      ? `alive, the write ${write} ${within} connectionWaitMs (${onRecord}), ${answered} of 8 written and read\n`
      : "not held\n",
  ),
);
Deno.exit(0);
