import assert from "node:assert/strict";
import {
  createRelayer,
  HttpSender,
  type Intent,
  type Relayer,
} from "../mod.ts";
import { KvStore } from "../store/kv.ts";
import {
  createQueueHandler,
  type QueueMessage,
} from "../cloudflare/queue_handler.ts";
import { localQueueConsumer } from "../webhook/_local_queue.ts";

// The two queue consumers, Cloudflare's and the local Deno KV queue's,
// with the op and resource sanitizers on (off by default in Deno 2): a
// batch or message whose handling returns while a timer (a send's or a
// receipt's timeout, a give-up's wait), a KV read or a commit still runs
// fails them. Each runs over Deno KV and an HttpSender whose timeout
// (60 s) is longer than the test, so with a lease of twice that (the least
// createRelayer takes with it; the give-up's wait is 5 s either way).

const sanitized = { sanitizeOps: true, sanitizeResources: true } as const;

/** A signer: sends answered with a tx hash, except pi_fails's; receipts confirmed. */
async function signer(input: RequestInfo | URL, init?: RequestInit) {
  const url = String(input);
  if (!url.endsWith("/send")) return Response.json({ status: "confirmed" });
  const { intentId } = await new Response(init?.body).json() as {
    intentId: string;
  };
  return intentId === "pi_fails"
    ? Response.json({ error: "nonce too low" }, { status: 500 })
    : Response.json({ txHash: `0x${intentId}` });
}

/** A relayer over a fresh Deno KV with `intents`, closed by `close`. */
async function relayerWith(intents: readonly Intent["id"][]) {
  const kv = await Deno.openKv(":memory:");
  const store = new KvStore(kv);
  for (const id of intents) {
    await store.createIntent({ id, state: "authorized", hold: "pending" });
  }
  await store.createIntent({
    id: "pi_settling",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    txHashes: ["0xpi_settling"],
  });
  const relayer: Relayer = createRelayer({
    store,
    sender: new HttpSender({
      url: "https://signer.example",
      timeoutMs: 60_000,
      fetch: signer,
    }),
    leaseMs: 120_000,
    policy: { maxDeliveries: 4 },
  });
  return { relayer, store, kv };
}

function message(
  id: string,
  body: unknown,
  attempts = 1,
): QueueMessage & { calls: string[] } {
  const calls: string[] = [];
  return {
    id,
    body,
    attempts,
    calls,
    ack: () => calls.push("ack"),
    retry: () => calls.push("retry"),
  };
}

Deno.test({
  name:
    "createQueueHandler() leaves no timer, KV read or commit behind a batch: sends answered and failed, a malformed message, a give-up, and the store closed under a batch",
  ...sanitized,
  fn: async () => {
    const { relayer, kv } = await relayerWith(["pi_sends", "pi_fails"]);
    const queue = createQueueHandler({
      relayer,
      maxRetries: 3,
      deadLetterQueue: "jobs-dlq",
      deadLetterMaxRetries: 100,
    });
    const batch = [
      message("m1", { intentId: "pi_sends", kind: "settle" }),
      message("m2", { intentId: "pi_fails", kind: "settle" }),
      message("m3", "{not json"),
    ];
    await queue({ queue: "jobs", messages: batch });
    const dlq = [message("d1", { intentId: "pi_settling", kind: "settle" })];
    await queue({ queue: "jobs-dlq", messages: dlq });
    assert.deepEqual(
      [...batch, ...dlq].map((m) => m.calls.join()),
      ["retry", "retry", "ack", "ack"],
    );
    kv.close();
    const late = message("m4", { intentId: "pi_sends", kind: "settle" }, 2);
    await queue({ queue: "jobs", messages: [late] });
    assert.deepEqual(late.calls, ["retry"]);
  },
});

Deno.test({
  name:
    "localQueueConsumer() leaves no timer, KV read or commit behind a message: sends answered and failed, a malformed message, and the store closed under one",
  ...sanitized,
  fn: async () => {
    const { relayer, kv } = await relayerWith(["pi_sends", "pi_fails"]);
    const enqueued: unknown[] = [];
    const consume = localQueueConsumer({
      relayer,
      enqueue: (message) => {
        enqueued.push(message);
        return Promise.resolve();
      },
      log: () => {},
    });
    await consume({ job: { intentId: "pi_sends", kind: "settle" }, id: "q1" });
    await consume({ job: { intentId: "pi_fails", kind: "settle" }, id: "q2" });
    await consume({ job: "not a job", id: "q3" });
    kv.close();
    await consume({ job: { intentId: "pi_sends", kind: "settle" }, id: "q4" });
    assert.deepEqual(
      enqueued.map((m) => (m as { failures?: number }).failures ?? 0),
      [0, 0, 1],
    );
  },
});
