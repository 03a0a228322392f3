/**
 * One relayer process of `processes_race_test.ts`: a KvStore on the
 * test's SQLite file (its own `Deno.openKv` handle, as a second `deno
 * serve` on the file has) or a PostgresStore on the test's database and
 * schema, an HttpSender to the test's signer stub, and an at-least-once
 * queue of its own.
 *
 * - A `deliver` job is delivered in `copies` concurrent copies until it is
 *   done, its delivery counted in the store (no number from the queue), so
 *   the counts of both processes meet under one key.
 * - A `race` job is a QStash message: process 0 delivers it, `copies` at a
 *   time with the queue's numbers, until its answers end or 40 rounds
 *   passed; process 1 waits a few milliseconds, then gives up on it (as
 *   QStash's failure callback), repeated until answered, then delivers a
 *   late copy. It prints when the give-up answered (`Date.now()`).
 *
 * `deno run --allow-net=127.0.0.1 --allow-env --allow-read --allow-write
 * --unstable-kv _race_worker.ts <json>`, where `<json>` is `{ store,
 * signer, role, copies, jobs: [{ intentId, kind }] }` and `store` is `{
 * path }` or `{ url, schema }`; it prints one line of JSON: `{
 * deliveries: { [jobId]: n }, outcomes: { [action]: n }, gaveUp: {
 * [jobId]: { at, action, reason } }, thrown: [message] }`.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { createRelayer, jobIdOf, type Outcome } from "../../mod.ts";
import { HttpSender } from "../../relayer/http_sender.ts";
import postgres from "postgres";
import { KvStore } from "../../store/kv.ts";
import { PostgresStore } from "../../store/postgres.ts";

interface Args {
  store: { path: string } | { url: string; schema: string };
  signer: string;
  role: 0 | 1;
  copies: number;
  jobs: { intentId: string; kind: "deliver" | "race" }[];
}

const args = JSON.parse(Deno.args[0]!) as Args;
const kv = "path" in args.store ? await Deno.openKv(args.store.path) : null;
const sql = "url" in args.store
  ? postgres(args.store.url, { max: 8, onnotice: () => {} })
  : null;
const relayer = createRelayer({
  store: kv !== null ? new KvStore(kv) : new PostgresStore(sql!, {
    schema: (args.store as { schema: string }).schema,
  }),
  sender: new HttpSender({ url: args.signer, timeoutMs: 5_000 }),
  // Never poisoned by a count: a deliver job runs until its intent is
  // settled, and only the queue's give-up ends a race job.
  policy: { maxDeliveries: 10_000, baseMs: 1, capMs: 1, jitter: "none" },
  leaseMs: 10_000,
});

const deliveries: Record<string, number> = {};
const outcomes: Record<string, number> = {};
const gaveUp: Record<string, { at: number; action: string; reason: string }> =
  {};
const thrown: string[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const watchdog = setTimeout(() => {
  console.error("worker stuck for a minute");
  Deno.exit(3);
}, 60_000);

function counted(id: string, outcome: Outcome): Outcome {
  deliveries[id] = (deliveries[id] ?? 0) + 1;
  outcomes[outcome.action] = (outcomes[outcome.action] ?? 0) + 1;
  return outcome;
}

/** A delivery whose throw (the store failed it) is kept, as a queue would redeliver it. */
async function delivered(
  id: string,
  delivery: () => Promise<Outcome>,
): Promise<Outcome | undefined> {
  try {
    return counted(id, await delivery());
  } catch (error) {
    thrown.push(`${id}: ${(error as Error).message}`);
    return undefined;
  }
}

await Promise.all(args.jobs.map(async ({ intentId, kind }) => {
  const job = { intentId, kind: "settle" } as const;
  const id = jobIdOf(job);
  const message = { queue: "qstash", messageId: `msg_${intentId}` };
  if (kind === "deliver") {
    for (let round = 0; round < 2_000; round++) {
      const results = await Promise.all(
        Array.from(
          { length: args.copies },
          () => delivered(id, () => relayer.deliver(job)),
        ),
      );
      if (results.some((o) => o !== undefined && o.action !== "retry")) return;
      await sleep(2 + Math.random() * 5);
    }
    throw new Error(`${id} did not end after 2000 rounds`);
  }
  if (args.role === 0) {
    for (let round = 1; round <= 40; round++) {
      const results = await Promise.all(
        Array.from(
          { length: args.copies },
          () => delivered(id, () => relayer.deliver(job, round, { message })),
        ),
      );
      if (results.some((o) => o !== undefined && o.action !== "retry")) return;
      await sleep(1 + Math.random() * 3);
    }
    return;
  }
  await sleep(Math.random() * 40);
  for (let attempt = 0; attempt < 2_000; attempt++) {
    let outcome: Outcome;
    try {
      outcome = await relayer.giveUp(job, { deliveries: 3, queue: message });
    } catch (error) {
      thrown.push(`${id} give-up: ${(error as Error).message}`);
      await sleep(5);
      continue;
    }
    if (outcome.action !== "retry") {
      gaveUp[id] = {
        at: Date.now(),
        action: outcome.action,
        reason: outcome.action === "poison"
          ? `${outcome.reason}; ${outcome.resolution}`
          : outcome.reason,
      };
      // A late copy of the message, after the give-up answered.
      await delivered(id, () => relayer.deliver(job, 4, { message }));
      return;
    }
    await sleep(5);
  }
  throw new Error(`${id}: the give-up was not answered after 2000 tries`);
}));

kv?.close();
await sql?.end({ timeout: 5 });
clearTimeout(watchdog);
console.log(JSON.stringify({ deliveries, outcomes, gaveUp, thrown }));
