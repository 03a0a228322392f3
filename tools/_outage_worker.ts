/**
 * A Worker for `deno task worker-check`'s outage step: the queue handler
 * over a store that the check can take down and bring back, so that real
 * Cloudflare Queues (workerd, through Miniflare) run out the jobs queue's
 * `max_retries`, move the message to the dead-letter queue by their own
 * rules, and retry the give-up there until the store is back.
 *
 * Then the check delivers a late copy of that message (its id, as
 * Miniflare gave it) on the jobs queue, which must send nothing.
 *
 * Routes (the check's only; nothing here is for production):
 * - `POST /seed` creates `pi_0001`, authorized with a pending hold;
 * - `POST /down` and `POST /up` take the store down and bring it back;
 * - `GET /state` answers the intent, its dead letter, the log lines, each
 *   message the handler was given (its queue, id and attempts) and the
 *   signer's sends.
 *
 * The policy is the seed's with 1 s delays, the lease 1 s with no clock
 * skew (so a late copy need not wait out 35 s), and the queue's `max_retries` is 2
 * (`tools/_worker_check.mjs` binds the queues to match).
 *
 * @module
 */

// deno-lint-ignore-file no-console
import {
  createRelayer,
  MemoryStore,
  ScriptedSender,
  type Store,
} from "../mod.ts";
import {
  createQueueHandler,
  type QueueBatch,
} from "../cloudflare/queue_handler.ts";

const real = new MemoryStore();
let down = false;
// Every store call fails while the store is down, as with a lost database.
const store = new Proxy(real, {
  get(target, name, receiver) {
    const value = Reflect.get(target, name, receiver);
    if (typeof value !== "function") return value;
    return (...args: unknown[]) =>
      down
        ? Promise.reject(new Error("connection to the store refused"))
        : value.apply(target, args);
  },
}) as Store;

const lines: string[] = [];
// A send of pi_0001 succeeds, so one shows in `sender.calls`.
const sender = new ScriptedSender({ pi_0001: { sends: [{ txHash: "0x01" }] } });
const relayer = createRelayer({
  store,
  sender,
  leaseMs: 1000,
  clockSkewMs: 0, // one isolate, one clock
  policy: {
    maxDeliveries: 3,
    baseMs: 1000,
    capMs: 1000,
    jitter: "none",
    stuckAfterMs: 2000,
  },
});
const handler = createQueueHandler({
  relayer,
  maxRetries: 2,
  deadLetterQueue: "outage-jobs-dlq",
  // Told 100 so that the handler builds; the check binds the dead-letter
  // consumer to 5, so that a give-up which did not back off runs out in
  // its 13 s outage.
  deadLetterMaxRetries: 100,
  log: (line) => {
    lines.push(line);
    console.log(line);
  },
});

/** Each message the handler was given: its queue, id and attempts. */
const seen: { queue: string; id: string; attempts: number }[] = [];

async function queue(batch: QueueBatch): Promise<void> {
  for (const { id, attempts } of batch.messages) {
    seen.push({ queue: batch.queue, id, attempts });
  }
  await handler(batch);
}

async function fetch(request: Request): Promise<Response> {
  const { pathname } = new URL(request.url);
  if (request.method === "POST" && pathname === "/seed") {
    await real.createIntent({
      id: "pi_0001",
      state: "authorized",
      hold: "pending",
    });
    return new Response("seeded");
  }
  if (request.method === "POST" && pathname === "/down") {
    down = true;
    return new Response("down");
  }
  if (request.method === "POST" && pathname === "/up") {
    down = false;
    return new Response("up");
  }
  if (pathname === "/state") {
    return Response.json({
      intent: await real.getIntent("pi_0001"),
      deadLetter: await real.getDeadLetter("pi_0001/settle"),
      lines,
      seen,
      sends: sender.calls.filter((call) => call.method === "send").length,
    });
  }
  return new Response("not found", { status: 404 });
}

export default { fetch, queue };
