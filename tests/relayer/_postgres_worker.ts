/**
 * One relayer process of `postgres_processes_test.ts`: a PostgresStore on
 * the test's database and schema, an HttpSender to the test's signer stub,
 * and an at-least-once queue of its own that delivers every job, each
 * delivery in `copies` concurrent copies, until the job is done. The
 * delivery number is counted in the store (no number from the queue), so
 * the counts of both processes meet in one table.
 *
 * `deno run --allow-net=127.0.0.1 --allow-env _postgres_worker.ts <json>`,
 * where `<json>` is `{ url, schema, signer, jobs, copies }`; it prints one
 * line of JSON: `{ deliveries: { [jobId]: n }, outcomes: { [action]: n } }`.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import postgres from "postgres";
import { createRelayer, jobIdOf } from "../../mod.ts";
import { HttpSender } from "../../relayer/http_sender.ts";
import { PostgresStore } from "../../store/postgres.ts";

interface Args {
  url: string;
  schema: string;
  signer: string;
  jobs: string[];
  copies: number;
}

const args = JSON.parse(Deno.args[0]!) as Args;
const sql = postgres(args.url, { max: 8, onnotice: () => {} });
const store = new PostgresStore(sql, { schema: args.schema });
const relayer = createRelayer({
  store,
  sender: new HttpSender({ url: args.signer, timeoutMs: 5_000 }),
  // Never poison: every job runs until its intent is settled.
  policy: { maxDeliveries: 10_000, baseMs: 1, capMs: 1, jitter: "none" },
  leaseMs: 10_000,
});

const deliveries: Record<string, number> = {};
const outcomes: Record<string, number> = {};
// Deliveries not answered yet. A run takes a few seconds; one that has not
// ended within a minute says what it waits on and fails, rather than
// hanging the test run.
const pending = new Map<number, { jobId: string; at: number }>();
let started = 0;
let phase = "delivering";
const watchdog = setTimeout(() => {
  const waiting = [...pending.values()].map(({ jobId, at }) =>
    `${jobId} for ${Date.now() - at}ms`
  );
  console.error(
    `worker stuck while ${phase}; deliveries unanswered: ${
      waiting.join(", ") || "none"
    }`,
  );
  Deno.exit(3);
}, 60_000);
function tracked<T>(jobId: string, delivery: Promise<T>): Promise<T> {
  const n = ++started;
  pending.set(n, { jobId, at: Date.now() });
  return delivery.finally(() => pending.delete(n));
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

await Promise.all(args.jobs.map(async (intentId) => {
  const job = { intentId, kind: "settle" } as const;
  const id = jobIdOf(job);
  for (let round = 0; round < 2_000; round++) {
    const results = await Promise.all(
      Array.from(
        { length: args.copies },
        () => tracked(id, relayer.deliver(job)),
      ),
    );
    deliveries[id] = (deliveries[id] ?? 0) + results.length;
    for (const outcome of results) {
      outcomes[outcome.action] = (outcomes[outcome.action] ?? 0) + 1;
    }
    if (results.some((outcome) => outcome.action !== "retry")) return;
    await sleep(2 + Math.random() * 5);
  }
  throw new Error(`${id} did not end after 2000 rounds`);
}));

phase = "ending the client";
await sql.end({ timeout: 5 });
clearTimeout(watchdog);
console.log(JSON.stringify({ deliveries, outcomes }));
