/**
 * The seed's example: three payments, a scripted Sender, a virtual clock,
 * at most 3 deliveries and no jitter. `deno task demo` prints exactly
 * `testdata/poison_job.golden.txt`.
 *
 * - pi_0001: the Sender declares poison and not-sent → the intent fails.
 * - pi_0002: the Sender only times out → needs review (money may have moved).
 * - pi_0003: never authorized → the job is dropped; the intent is untouched.
 *
 * Pass a store to {@linkcode runDemo} to replay it on another backend.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import {
  createRelayer,
  describePolicy,
  formatOutcome,
  type Job,
  MemoryStore,
  notSent,
  poison,
  ScriptedSender,
  type Store,
} from "../mod.ts";

/**
 * Replays the three payments on `store` and returns the lines the demo
 * prints.
 *
 * @param store An empty store.
 * @returns The demo's output, one string per line.
 */
export async function runDemo(
  store: Store = new MemoryStore(),
): Promise<string[]> {
  let clock = 0;
  const lines: string[] = [];
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  await store.createIntent({
    id: "pi_0002",
    state: "authorized",
    hold: "pending",
  });
  await store.createIntent({ id: "pi_0003", state: "created" });

  const sender = new ScriptedSender({
    pi_0001: {
      sends: [{
        error: poison(notSent(new Error("signer: chain id mismatch"))),
      }],
    },
    pi_0002: { sends: [{ error: new Error("rpc: connection refused") }] },
  });
  const relayer = createRelayer({
    store,
    sender,
    policy: { maxDeliveries: 3, jitter: "none" },
    now: () => clock,
    random: () => 0,
  });

  lines.push(`policy  ${describePolicy(relayer.policy)}`, "");
  for (const intentId of ["pi_0001", "pi_0002", "pi_0003"]) {
    const job: Job = { intentId, kind: "settle" };
    for (let delivery = 1;; delivery++) {
      const outcome = await relayer.deliver(job, delivery);
      lines.push(`worker  ${formatOutcome(job, outcome)}`);
      if (outcome.action !== "retry") break;
      clock += outcome.delayMs; // the queue waits, then delivers again
    }
  }

  lines.push("");
  for (const id of ["pi_0001", "pi_0002", "pi_0003"]) {
    const intent = await store.getIntent(id);
    lines.push(
      `${id} ${(intent?.state ?? "missing").padEnd(13)}hold ${
        intent?.hold ?? "-"
      }`,
    );
  }
  return lines;
}

if (import.meta.main) {
  console.log((await runDemo()).join("\n"));
}
