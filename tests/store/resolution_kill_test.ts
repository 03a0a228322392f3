/**
 * The resolution's write (void the hold, then fail the payment: the
 * give-up's `settling` → `failed` and the resolve route's `needs_review` →
 * `failed`) in a process killed with SIGKILL as it resolves 60 payments
 * four at a time (once 0, 10, 20, 30 or 40 of them were), on KvStore over
 * a SQLite file and on PostgresStore: each intent is
 * found resolved whole (`failed`, hold voided) or not at all (its state,
 * hold pending), never `failed` with its hold live nor unresolved with it
 * voided; the writes left undone then succeed.
 *
 * @module
 */

import assert from "node:assert/strict";
import type postgres from "postgres";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { KvStore } from "../../store/kv.ts";
import { PostgresStore } from "../../store/postgres.ts";
import type { Store } from "../../store/store.ts";

const CHILD = new URL("./_resolving.ts", import.meta.url).pathname;
const INTENTS = 60;
const ROUNDS = 5;

/** Each round's intents: half settling with a declared not-sent, half in review. */
async function seed(store: Store): Promise<void> {
  for (let i = 0; i < INTENTS; i++) {
    const id = `pi_${String(i).padStart(4, "0")}`;
    await store.createIntent(
      i % 2 === 0
        ? {
          id,
          state: "settling",
          hold: "pending",
          settlingSince: 0,
          lastBroadcast: { outcome: "not_sent", at: 0 },
        }
        : { id, state: "needs_review", hold: "pending" },
    );
  }
}

/**
 * Runs the child, and kills it once it said it resolved `after` intents,
 * plus `extraMs`; whether it had finished.
 */
async function resolveKilled(args: string[], after: number, extraMs: number) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--unstable-kv",
      "--allow-net=127.0.0.1,localhost",
      "--allow-env",
      "--allow-read",
      "--allow-write",
      CHILD,
      ...args,
    ],
    cwd: new URL("../../", import.meta.url).pathname,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let said = "";
  const resolved = () => (said.match(/^pi_/gm) ?? []).length;
  while (!said.includes("start") || resolved() < after) {
    const { value, done } = await lines.read();
    if (done) break;
    said += value;
  }
  await new Promise((r) => setTimeout(r, extraMs));
  try {
    child.kill("SIGKILL");
  } catch {
    // it ended first
  }
  for (;;) {
    const { value, done } = await lines.read();
    if (done) break;
    said += value;
  }
  await child.status;
  await new Response(child.stderr).text();
  return said.includes("resolved");
}

/**
 * Waits until the server let go of every session of the killed child
 * (named by `schema`): SIGKILL ends the client, not the server's work on
 * what it already sent, so a COMMIT in flight may land after the kill, and
 * a check read before it would find the intent changed under its write.
 */
async function serverLetGo(admin: postgres.Sql, schema: string) {
  const deadline = performance.now() + 10_000;
  for (;;) {
    const [{ sessions }] = await admin<[{ sessions: number }]>`
      SELECT count(*)::int AS sessions FROM pg_stat_activity
      WHERE application_name = ${schema}`;
    if (sessions === 0) return;
    if (performance.now() > deadline) {
      throw new Error(
        `the server still holds ${sessions} sessions of the killed child 10 s after the kill`,
      );
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Every intent resolved whole or not at all; then the rest resolve. */
async function check(store: Store): Promise<{ done: number }> {
  let done = 0;
  for (let i = 0; i < INTENTS; i++) {
    const id = `pi_${String(i).padStart(4, "0")}`;
    const intent = (await store.getIntent(id))!;
    const from = i % 2 === 0 ? "settling" : "needs_review";
    if (intent.state === "failed") {
      assert.equal(intent.hold, "voided", `${id} failed with its hold live`);
      done++;
      continue;
    }
    assert.deepEqual(
      [intent.state, intent.hold],
      [from, "pending"],
      `${id} half resolved`,
    );
    const failed = await store.transition(id, {
      from,
      to: "failed",
      version: intent.version,
      at: 2,
      ledger: "void",
    });
    assert.deepEqual([failed.state, failed.hold], ["failed", "voided"]);
  }
  return { done };
}

Deno.test({
  name:
    "KvStore: a process killed with SIGKILL while failing payments with their holds voided leaves each resolved whole or not at all",
  fn: timeout(120_000, async () => {
    const dir = await Deno.makeTempDir();
    try {
      const partial: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const path = `${dir}/round${round}.kv`;
        const kv = await Deno.openKv(path);
        try {
          await seed(new KvStore(kv));
        } finally {
          kv.close();
        }
        await resolveKilled(
          ["kv", path, "-", String(INTENTS)],
          round * 10,
          round % 2,
        );
        const again = await Deno.openKv(path);
        try {
          partial.push((await check(new KvStore(again))).done);
        } finally {
          again.close();
        }
      }
      // The kills met the writes under way.
      assert.ok(
        partial.filter((done) => done < INTENTS).length >= ROUNDS - 1,
        `resolved before the kill: ${partial.join(", ")}`,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
});

Deno.test({
  name:
    "PostgresStore: a process killed with SIGKILL while failing payments with their holds voided leaves each resolved whole or not at all",
  ignore: !postgresAvailable,
  fn: timeout(120_000, async () => {
    const url = await postgresUrl();
    const admin = await connect(2);
    const schemas: string[] = [];
    try {
      const partial: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const schema = freshSchema();
        schemas.push(schema);
        const store = new PostgresStore(admin, { schema });
        await store.migrate();
        await seed(store);
        await resolveKilled(
          ["postgres", url, schema, String(INTENTS)],
          round * 10,
          round % 2,
        );
        await serverLetGo(admin, schema);
        partial.push((await check(store)).done);
      }
      assert.ok(
        partial.filter((done) => done < INTENTS).length >= ROUNDS - 1,
        `resolved before the kill: ${partial.join(", ")}`,
      );
    } finally {
      for (const schema of schemas) {
        await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      }
      await admin.end();
    }
  }),
});
