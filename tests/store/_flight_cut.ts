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

import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { afterFirstRead } from "../_postgres.ts";
import { endSession, goodbye, relayed, useThePool } from "./_cut.ts";

const [url, schema, name] = Deno.args as [string, string, string, string?];
const admin = postgres(url, { max: 1, onnotice: () => {} });

let armed = false;
let held = false;
const sql = postgres(
  relayed(url, async (text) => {
    // The flight's COMMIT (a Parse of "COMMIT"), sent alone once the
    // statement before it answered.
    if (armed && text.includes("COMMIT\0")) {
      armed = false;
      held = await endSession(admin, name, "idle in transaction (aborted)");
      await goodbye();
    }
  }),
  {
    max: Deno.args[3] === "one" ? 1 : 2,
    onnotice: () => {},
    connection: { application_name: name },
  },
);
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
const answered = await useThePool(store);
await Deno.stdout.write(
  new TextEncoder().encode(
    held
      ? `alive, the write ${refused}, ${answered} of 8 written and read\n`
      : "not held\n",
  ),
);
Deno.exit(0);
