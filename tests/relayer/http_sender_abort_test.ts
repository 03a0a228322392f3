/**
 * A receipt nobody waits for any more ends: a queue's give-up that stops
 * waiting for its receipts (past its budget, half the lease here) aborts
 * the signal it gave `HttpSender`, and the signer sees each request end
 * then, not at the Sender's own timeout (10 s here). Deno's op sanitizer,
 * on, shows nothing of them left running.
 *
 * The relayer reaches `HttpSender` through a Sender that declares no
 * timeout: with `HttpSender`'s own (10 s) declared, `createRelayer`
 * refuses a lease under 20 s, and the budget would be its longest, 5 s,
 * a wait of that long in every run.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  createRelayer,
  HttpSender,
  MemoryStore,
  type Sender,
} from "../../mod.ts";

const sanitized = { sanitizeOps: true, sanitizeResources: true } as const;

/** `sender`'s calls, signal and all, through a Sender that declares no `timeoutMs`. */
function undeclared(sender: HttpSender): Sender {
  return {
    send: (intent, options) => sender.send(intent, options),
    receipt: (txHash, options) => sender.receipt(txHash, options),
  };
}

/** A signer on 127.0.0.1 whose receipts never answer: it notes each request, and when each ends. */
function hangingSigner() {
  const seen: string[] = [];
  const ended: string[] = [];
  let allEnded = Promise.withResolvers<void>();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (request) => {
      const path = new URL(request.url).pathname;
      seen.push(path);
      return new Promise<Response>((resolve) => {
        request.signal.addEventListener("abort", () => {
          ended.push(path);
          if (ended.length === seen.length) allEnded.resolve();
          resolve(new Response(null, { status: 499 }));
        });
      });
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    seen,
    ended,
    /** Resolves once every request seen has ended; rejects past `ms`. */
    async allEnded(ms: number) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        await Promise.race([
          allEnded.promise,
          new Promise((_, reject) => {
            timer = setTimeout(
              () =>
                reject(
                  new Error(
                    `${
                      seen.length - ended.length
                    } of ${seen.length} requests still open after ${ms}ms`,
                  ),
                ),
              ms,
            );
          }),
        ]);
      } finally {
        clearTimeout(timer);
        allEnded = Promise.withResolvers<void>();
      }
    },
    shutdown: () => server.shutdown(),
  };
}

Deno.test({
  name:
    "a give-up past its receipts budget aborts HttpSender's requests: the signer sees them end at once, not at the Sender's timeout",
  ...sanitized,
  fn: async () => {
    const signer = hangingSigner();
    try {
      const store = new MemoryStore();
      await store.createIntent({
        id: "pi_1",
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        txHashes: ["0xa", "0xb"],
      });
      const relayer = createRelayer({
        store,
        sender: undeclared(
          new HttpSender({ url: signer.url, timeoutMs: 10_000 }),
        ),
        // A budget of 500 ms for the receipts: both reach the signer.
        leaseMs: 1_000,
      });
      const outcome = await relayer.giveUp(
        { intentId: "pi_1", kind: "settle" },
        { deliveries: 4, queue: { queue: "qstash", messageId: "msg_1" } },
      );
      assert.equal(outcome.action, "poison");
      assert.equal((await store.getIntent("pi_1"))?.state, "needs_review");
      await signer.allEnded(2_000);
      assert.deepEqual(signer.seen.toSorted(), [
        "/receipt/0xa",
        "/receipt/0xb",
      ]);
    } finally {
      await signer.shutdown();
    }
  },
});
