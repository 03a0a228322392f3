/**
 * Redrives raced by two instances over one store: two handles of one
 * Deno KV file (the local queue, enqueued in the removal's commit), two
 * PostgreSQL clients on one schema (published first), and two processes
 * on one KV file killed mid-way. Each letter leaves as exactly one job.
 *
 * @module
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { deserialize } from "node:v8";
import { type Job, ScriptedSender, type Store } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { createApp, type WebhookApp } from "../../webhook/app.ts";
import { connect, freshSchema, postgresAvailable } from "../_postgres.ts";

const OPS = "ops-token-for-redrive-instances";
const ops = { authorization: `Bearer ${OPS}` };

/** Intents `pi_0` … `pi_<n-1>`, authorized, each with its job's dead letter. */
async function letters(store: Store, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    await store.createIntent({
      id: `pi_${i}`,
      state: "authorized",
      hold: "pending",
    });
    await store.putDeadLetter({
      jobId: `pi_${i}/settle`,
      intentId: `pi_${i}`,
      deliveries: 3,
      cause: "exhausted",
      reason: "no luck after 3 deliveries",
      resolution: "job dropped, intent still authorized",
      lastError: "not authorized yet",
      poisonedAt: i,
    });
  }
}

/** How many messages of each intent's job wait on a Deno KV file's queue. */
function queued(path: string): Map<string, number> {
  const db = new DatabaseSync(path);
  try {
    const rows = db.prepare(
      "SELECT data FROM queue UNION ALL SELECT data FROM queue_running",
    ).all() as { data: Uint8Array }[];
    const count = new Map<string, number>();
    for (const { data } of rows) {
      const { job } = deserialize(data) as { job: Job };
      count.set(job.intentId, (count.get(job.intentId) ?? 0) + 1);
    }
    return count;
  } finally {
    db.close();
  }
}

/** The intents whose letter and queued jobs are not exactly one of the two. */
async function notOneJob(
  store: Store,
  path: string,
  n: number,
): Promise<string[]> {
  const jobs = queued(path);
  const wrong: string[] = [];
  for (let i = 0; i < n; i++) {
    const letter = await store.getDeadLetter(`pi_${i}/settle`) !== null;
    const messages = jobs.get(`pi_${i}`) ?? 0;
    if (Number(letter) + messages !== 1) {
      wrong.push(`pi_${i}: letter ${letter}, ${messages} queued`);
    }
  }
  return wrong;
}

/** Both apps redrive every letter at once: one 202 a letter, the other 404 or 409. */
async function raceRedrives(
  apps: readonly WebhookApp[],
  n: number,
): Promise<void> {
  const answers = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      Promise.all(apps.map(async (app) => {
        const res = await app.request(
          `/v1/dead-letters/pi_${i}/settle/redrive`,
          { method: "POST", headers: ops },
        );
        return `${res.status} ${await res.text()}`;
      }))),
  );
  for (const [i, pair] of answers.entries()) {
    const statuses = pair.map((a) => a.slice(0, 3));
    assert.equal(
      statuses.filter((s) => s === "202").length,
      1,
      `pi_${i}: ${pair.join(" | ")}`,
    );
    for (const status of statuses) {
      assert.ok(["202", "404", "409"].includes(status), pair.join(" | "));
    }
  }
}

Deno.test("two instances on one Deno KV file redrive the same letters at once: each letter leaves as one message on the file's queue", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/relayer.kv`;
  const kvs = [await Deno.openKv(path), await Deno.openKv(path)];
  try {
    const stores = kvs.map((kv) =>
      new KvStore(kv, { enqueueOptions: () => ({ delay: 3_600_000 }) })
    );
    const n = 20;
    await letters(stores[0]!, n);
    const apps = stores.map((store) =>
      createApp({
        store,
        sender: new ScriptedSender({}),
        opsToken: OPS,
        redriveTo: {
          message: (job: Job) => ({ job, id: crypto.randomUUID() }),
        },
      })
    );
    await raceRedrives(apps, n);
    assert.deepEqual(await notOneJob(stores[1]!, path, n), []);
    assert.equal([...queued(path).values()].reduce((a, b) => a + b, 0), n);
  } finally {
    for (const kv of kvs) kv.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name:
    "two instances on one PostgreSQL schema redrive the same letters at once: one 202 a letter, every publish of a letter under one deduplication id",
  ignore: !postgresAvailable,
  async fn() {
    const schema = freshSchema();
    const clients = [await connect(2), await connect(2)];
    try {
      const stores = clients.map((sql) => new PostgresStore(sql, { schema }));
      await stores[0]!.migrate();
      const n = 20;
      await letters(stores[0]!, n);
      const published = new Map<string, Set<string>>();
      const apps = stores.map((store) =>
        createApp({
          store,
          sender: new ScriptedSender({}),
          opsToken: OPS,
          redriveTo: {
            publish: (job: Job, deduplicationId: string) => {
              const ids = published.get(job.intentId) ?? new Set();
              published.set(job.intentId, ids.add(deduplicationId));
              return Promise.resolve();
            },
          },
        })
      );
      await raceRedrives(apps, n);
      for (let i = 0; i < n; i++) {
        assert.equal(published.get(`pi_${i}`)?.size, 1, `pi_${i}`);
        assert.equal(await stores[1]!.getDeadLetter(`pi_${i}/settle`), null);
      }
    } finally {
      await clients[0]!.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      for (const sql of clients) await sql.end({ timeout: 1 });
    }
  },
});

Deno.test("two processes redriving the same letters of one Deno KV file, killed mid-way, leave each letter or its one message, never both or neither", async () => {
  const n = 200;
  const child = new URL("./_redrive_child.ts", import.meta.url).pathname;
  for (const afterMs of [0, 20, 60, 5_000]) {
    const dir = await Deno.makeTempDir();
    const path = `${dir}/relayer.kv`;
    try {
      const kv = await Deno.openKv(path);
      await letters(new KvStore(kv), n);
      kv.close();
      const processes = [0, n / 2].map((offset) =>
        new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "--allow-read",
            "--allow-write",
            "--unstable-kv",
            child,
            path,
            String(n),
            String(offset),
          ],
          stdout: "piped",
          stderr: "piped",
        }).spawn()
      );
      const readers = processes.map((p) => p.stdout.getReader());
      for (const reader of readers) {
        const { value } = await reader.read();
        assert.match(new TextDecoder().decode(value), /ready/);
      }
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        new Promise((resolve) => timer = setTimeout(resolve, afterMs)),
        Promise.all(processes.map((p) => p.status)),
      ]);
      clearTimeout(timer);
      for (const p of processes) {
        try {
          p.kill("SIGKILL");
        } catch {
          // It had ended.
        }
      }
      for (const [i, p] of processes.entries()) {
        const status = await p.status;
        readers[i]!.releaseLock();
        await p.stdout.cancel();
        const stderr = new TextDecoder().decode(
          await new Response(p.stderr).arrayBuffer(),
        );
        assert.ok(status.success || status.signal === "SIGKILL", stderr);
      }
      const reopened = await Deno.openKv(path);
      try {
        const wrong = await notOneJob(new KvStore(reopened), path, n);
        assert.deepEqual(wrong, [], `killed after ${afterMs} ms`);
      } finally {
        reopened.close();
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});
