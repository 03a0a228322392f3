/**
 * A Worker for `deno task worker-check`'s outage step: the queue handler
 * over a store that the check can take down and bring back, so that real
 * Cloudflare Queues (workerd, through Miniflare) run out the jobs queue's
 * `max_retries`, move the message to the dead-letter queue by their own
 * rules, and retry the give-up there until the store is back.
 *
 * Routes (the check's only; nothing here is for production):
 * - `POST /seed` creates `pi_0001`, authorized with a pending hold;
 * - `POST /down` and `POST /up` take the store down and bring it back;
 * - `GET /state` answers the intent, its dead letter and the log lines.
 *
 * The policy is the seed's with 1 s delays, and the queue's `max_retries`
 * is 2 (`tools/_worker_check.mjs` binds the queues to match).
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
import { createQueueHandler } from "../cloudflare/queue_handler.ts";

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
const relayer = createRelayer({
  store,
  sender: new ScriptedSender({}),
  policy: {
    maxDeliveries: 3,
    baseMs: 1000,
    capMs: 1000,
    jitter: "none",
    stuckAfterMs: 2000,
  },
});
const queue = createQueueHandler({
  relayer,
  maxRetries: 2,
  deadLetterQueue: "outage-jobs-dlq",
  log: (line) => {
    lines.push(line);
    console.log(line);
  },
});

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
    });
  }
  return new Response("not found", { status: 404 });
}

export default { fetch, queue };
