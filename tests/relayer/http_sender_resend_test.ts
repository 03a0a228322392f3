import assert from "node:assert/strict";
import { createRelayer, HttpSender, MemoryStore } from "../../mod.ts";
import { type RawAnswer, rawHttpServer } from "../_raw_http.ts";

/**
 * A signer on a raw loopback socket (`Deno.serve` cannot drop a connection
 * after reading a request). It answers a receipt `pending`, keeping the
 * connection alive. Its first send it signs and broadcasts, then its
 * connection dies before the answer (the signer's process restarting, a
 * proxy's idle timeout): the bytes of that answer never come. Every send
 * after it meets the signer locked, and is answered as the demo's signer
 * answers one: 503, "nothing signed", `notSent: true`, which is true of
 * that request.
 */
function lockedAfterOneBroadcast() {
  const broadcasts: string[] = [];
  const server = rawHttpServer(({ line, body }): RawAnswer => {
    if (line.startsWith("GET /receipt/")) {
      return { status: "200 OK", body: '{"status":"pending"}' };
    }
    if (broadcasts.length === 0) {
      broadcasts.push(JSON.parse(body).intentId);
      return "drop";
    }
    return {
      status: "503 Service Unavailable",
      body: '{"error":"signer is locked: nothing signed","notSent":true}',
    };
  });
  return { ...server, broadcasts };
}

Deno.test("HttpSender.send() is one request: a send the signer read before its connection died is maybe sent, never failed on the answer to a copy the runtime sent again", async () => {
  const signer = lockedAfterOneBroadcast();
  try {
    const sender = new HttpSender({ url: signer.url, timeoutMs: 5_000 });
    // A receipt read earlier leaves a kept-alive connection to the signer:
    // the send rides it.
    assert.equal(await sender.receipt("0xwarm"), "pending");
    const store = new MemoryStore();
    await store.createIntent({
      id: "pi_0001",
      state: "authorized",
      hold: "pending",
    });
    const relayer = createRelayer({
      store,
      sender,
      policy: { maxDeliveries: 2, jitter: "none" },
      now: () => 0,
      random: () => 0.5,
    });
    const job = { intentId: "pi_0001", kind: "settle" } as const;
    const first = await relayer.deliver(job, 1);
    assert.equal(first.action, "retry");
    assert.deepEqual(signer.broadcasts, ["pi_0001"], "the signer broadcast");
    const sends = signer.read.filter((r) => r.line.startsWith("POST"));
    // Deno's fetch sends a request again, on a new connection, when a
    // kept-alive one dies after carrying it whole: the signer reads the
    // send twice, and its answer to the copy ("nothing signed") says
    // nothing of the first, which broadcast.
    assert.equal(sends.length, 1, JSON.stringify(signer.read));
    assert.equal(
      (await store.getIntent("pi_0001"))?.lastBroadcast?.outcome,
      "unknown",
    );
    // The last delivery: the payment goes to review, its hold pending,
    // never failed with its tx out there.
    const last = await relayer.deliver(job, 2);
    assert.equal(last.action, "poison");
    const stored = await store.getIntent("pi_0001");
    assert.equal(stored?.state, "needs_review");
    assert.equal(stored?.hold, "pending");
  } finally {
    await signer.close();
  }
});
