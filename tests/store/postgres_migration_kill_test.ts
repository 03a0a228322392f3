/**
 * PostgresStore.migrate() killed with SIGKILL at any moment of its run (a
 * deploy's first start killed by its platform, alone or while a second
 * instance migrates the same schema): the next migrate() finishes the
 * schema, and the store works on it, failing a payment with its hold
 * voided in the one write. The kills are spread over the time one
 * migration takes, from its first statement on.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { PostgresStore } from "../../store/postgres.ts";

const CHILD = new URL("./_migrating.ts", import.meta.url).pathname;
const ROUNDS = 8;

/** A migrating child, once it said `start`, and the rest of what it says. */
async function migrating(url: string, schema: string) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-net=127.0.0.1,localhost",
      "--allow-env",
      "--allow-read",
      CHILD,
      url,
      schema,
    ],
    cwd: new URL("../../", import.meta.url).pathname,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let said = "";
  while (!said.includes("start")) {
    const { value, done } = await lines.read();
    if (done) break;
    said += value;
  }
  const rest = (async () => {
    for (;;) {
      const { value, done } = await lines.read();
      if (done) return said;
      said += value;
    }
  })();
  const stderr = new Response(child.stderr).text();
  return { child, rest, stderr };
}

Deno.test({
  name:
    "PostgresStore.migrate() killed with SIGKILL at any moment, alone or beside a second migration of the schema, leaves a schema the next migrate() finishes and the store works on",
  ignore: !postgresAvailable,
  fn: timeout(120_000, async () => {
    const url = await postgresUrl();
    const admin = await connect(2);
    const schemas: string[] = [];
    try {
      // How long one migration takes here, from its `start`.
      const timing = freshSchema();
      schemas.push(timing);
      const first = await migrating(url, timing);
      const from = performance.now();
      assert.match(await first.rest, /migrated/);
      const spanMs = performance.now() - from;
      await first.child.status;
      await first.stderr;
      let cut = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const schema = freshSchema();
        schemas.push(schema);
        const pair = round % 2 === 1;
        const children = await Promise.all(
          (pair ? [0, 1] : [0]).map(() => migrating(url, schema)),
        );
        await new Promise((r) => setTimeout(r, spanMs * round / ROUNDS));
        try {
          children[0]!.child.kill("SIGKILL");
        } catch {
          // it ended first
        }
        const said = await Promise.all(children.map((c) => c.rest));
        for (const c of children) {
          await c.child.status;
          await c.stderr;
        }
        if (!said[0]!.includes("migrated")) cut++;
        // The other instance, never killed, migrated.
        if (pair) assert.match(said[1]!, /migrated/, `round ${round}`);
        const store = new PostgresStore(admin, { schema });
        await store.migrate();
        const intent = await store.createIntent({
          id: "pi_0001",
          state: "settling",
          hold: "pending",
          settlingSince: 0,
          lastBroadcast: { outcome: "not_sent", at: 0 },
        });
        const failed = await store.transition(intent.id, {
          from: "settling",
          to: "failed",
          version: intent.version,
          at: 1,
          ledger: "void",
        });
        assert.deepEqual([failed.state, failed.hold], ["failed", "voided"]);
      }
      // The kills met migrations under way, not only finished ones.
      assert.ok(cut >= 2, `${cut} of ${ROUNDS} kills cut a migration`);
    } finally {
      for (const schema of schemas) {
        await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      }
      await admin.end();
    }
  }),
});
