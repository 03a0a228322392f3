/**
 * A child process for claim_answer_lost_test.ts: a delivery that finds its
 * intent already settled writes only its replay record, on a PostgresStore
 * through a relay that lets that record's `COMMIT` reach the server and
 * then ends the client's connection before the answer comes back: the
 * record is on record, and the delivery cannot know. Prints how the
 * delivery ended, and how the same signed request again ends.
 *
 * @module
 */

import postgres from "postgres";
import { createRelayer, ScriptedSender } from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { relayed } from "../store/_cut.ts";

const [url, schema, name] = Deno.args as [string, string, string];
const admin = postgres(url, { max: 1, onnotice: () => {} });

let armed = false;
/** The connection whose flight claims the record, once seen. */
let claiming: number | undefined;
/** Each connection's prepared `COMMIT`, by its statement's name. */
const commits = new Map<number, string>();
let cut = false;
const sql = postgres(
  relayed(url, (text, connection) => {
    const parsed = /P[^]{4}([^\0]*)\0COMMIT\0/.exec(text);
    if (parsed) commits.set(connection, parsed[1]!);
    // The record's INSERT (the sweep before it deletes from that table too).
    if (armed && text.includes(`"claims" (key, expires_at)`)) {
      claiming = connection;
      return Promise.resolve();
    }
    // Then the flight's COMMIT: parsed there, or bound once prepared.
    const commit = commits.get(connection);
    if (
      armed && claiming === connection &&
      (text.includes("COMMIT\0") ||
        (commit !== undefined && text.includes(`\0${commit}\0`)))
    ) {
      armed = false;
      cut = true;
      return Promise.resolve("cut");
    }
    return Promise.resolve();
  }),
  { max: 2, onnotice: () => {}, connection: { application_name: name } },
);
const store = new PostgresStore(sql, { schema, connectionWaitMs: 3000 });
await new PostgresStore(admin, { schema }).createIntent({
  id: "pi_0001",
  state: "settled",
  hold: "captured",
});
const relayer = createRelayer({
  store,
  sender: new ScriptedSender({}),
  policy: { maxDeliveries: 5 },
});
const job = { intentId: "pi_0001", kind: "settle" } as const;
const claim = () => ({
  key: "qstash/jwt_1",
  now: Date.now(),
  expiresAt: Date.now() + 300_000,
});
const ended = (outcome: Promise<{ action: string }>) =>
  outcome.then(
    (o) => o.action,
    (error: Error) =>
      / it may have landed or not; /.test(error.message)
        ? `${error.name} (it may have landed)`
        : error.name,
  );
armed = true;
const first = await ended(relayer.deliver(job, 3, { claim: claim() }));
const again = await ended(relayer.deliver(job, 3, { claim: claim() }));
await Deno.stdout.write(
  new TextEncoder().encode(
    cut ? `first ${first}, again ${again}\n` : "not cut\n",
  ),
);
Deno.exit(0);
