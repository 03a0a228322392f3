import assert from "node:assert/strict";
import { HttpSender, type NewIntent } from "../../mod.ts";
import { genericRequest, makeApp, OPS } from "./_app.ts";
import { KvStore } from "../../store/kv.ts";

// Deno's op sanitizer is off by default: this test turns it on, so that a
// timer the handling of a request leaves behind (a timeout's, outliving its
// request: it holds what its callback holds, and keeps a process up) fails
// it.

/** The app's lease: a give-up waits half of it (4.5 s) for a send here, a delay no other timer of these requests has. */
const LEASE_MS = 9_000;

const authorized = (id: string): NewIntent => ({
  id,
  state: "authorized",
  hold: "pending",
});

Deno.test({
  name:
    "the webhook leaves no timer behind a request: probes, sends answered and failed, give-ups (one while a send runs) and a resolution",
  sanitizeOps: true,
  fn: async () => {
    // The send of pi_busy waits until the test lets it go.
    const busy = Promise.withResolvers<void>();
    const busySent = Promise.withResolvers<void>();
    const signer = async (input: RequestInfo | URL, init?: RequestInit) => {
      const url = String(input);
      const id = url.endsWith("/send")
        ? (await new Response(init?.body).json() as { intentId: string })
          .intentId
        : "";
      if (id === "pi_busy") {
        busySent.resolve();
        await busy.promise;
      }
      if (id === "pi_fails") {
        return Promise.resolve(
          Response.json({ error: "nonce too low" }, { status: 500 }),
        );
      }
      if (id !== "") {
        return Promise.resolve(Response.json({ txHash: `0x${id}` }));
      }
      return Promise.resolve(Response.json({ status: "pending" }));
    };
    const { app, store } = await makeApp({
      intents: [
        authorized("pi_sends"),
        authorized("pi_fails"),
        authorized("pi_busy"),
        authorized("pi_gives_up"),
        {
          id: "pi_review",
          state: "settling",
          hold: "pending",
          settlingSince: 0,
          txHashes: ["0xpi_review"],
        },
      ],
      deps: {
        sender: new HttpSender({
          url: "https://signer.example",
          // Longer than the test: a timer of a request not cleared fails it.
          // At most half the lease, which the relayer refuses otherwise.
          timeoutMs: 4_000,
          fetch: signer,
        }),
        leaseMs: LEASE_MS,
      },
    });
    const statuses: Record<string, number> = {};
    for (const path of ["/healthz", "/readyz"]) {
      statuses[path] = (await app.request(path)).status;
    }
    const deliver = async (intentId: string, extra: object = {}) => {
      const body = JSON.stringify({
        job: { intentId, kind: "settle" },
        delivery: 1,
        messageId: `m-${intentId}`,
        ...extra,
      });
      const res = await app.request(
        "/v1/deliveries",
        await genericRequest(body),
      );
      await res.body?.cancel();
      return res.status;
    };
    for (const id of ["pi_sends", "pi_fails"]) {
      statuses[id] = await deliver(id);
    }
    const giveUp = (intentId: string) =>
      deliver(intentId, {
        delivery: undefined,
        messageId: undefined,
        gaveUp: { deliveries: 7, messageId: `m-gave-up-${intentId}` },
      });
    // Sent, then given up: the give-up reads the tx's receipt first.
    await deliver("pi_gives_up");
    statuses.pi_gives_up = await giveUp("pi_gives_up");
    // Given up while this relayer's send of it runs: it waits for the send,
    // and the send ends only once that wait's timer is set. Seen as the
    // runtime's timer of the give-up's budget (half the lease), on its
    // way: released after a fixed time, a give-up late to start found the
    // send over and set no timer, and the test passed without it.
    const sending = deliver("pi_busy");
    await busySent.promise;
    const waiting = Promise.withResolvers<void>();
    const realSetTimeout = globalThis.setTimeout;
    globalThis.setTimeout = ((...args: Parameters<typeof realSetTimeout>) => {
      if (args[1] === LEASE_MS / 2) waiting.resolve();
      return realSetTimeout(...args);
    }) as typeof realSetTimeout;
    let givingUp: Promise<number>;
    try {
      givingUp = giveUp("pi_busy");
      const answered = await Promise.race([
        waiting.promise.then(() => false),
        givingUp.then(() => true),
      ]);
      assert.equal(answered, false, "the give-up did not wait for the send");
    } finally {
      globalThis.setTimeout = realSetTimeout;
    }
    busy.resolve();
    statuses.pi_busy = await sending;
    statuses.pi_busy_gives_up = await givingUp;
    // A resolution reads the receipts of the intent's txs.
    const review = await store.getIntent("pi_review");
    await store.transition("pi_review", {
      from: "settling",
      to: "needs_review",
      version: review!.version,
      at: 1,
    });
    const headers = { authorization: `Bearer ${OPS}` };
    const read = await app.request("/v1/intents/pi_review", { headers });
    const { intent } = await read.json();
    const resolved = await app.request("/v1/intents/pi_review/resolve", {
      method: "POST",
      headers,
      body: JSON.stringify({
        to: "failed",
        nonceChecked: true,
        version: intent.version,
      }),
    });
    await resolved.body?.cancel();
    statuses.resolve = resolved.status;
    assert.deepEqual(statuses, {
      "/healthz": 200,
      "/readyz": 200,
      pi_sends: 503,
      pi_fails: 503,
      pi_gives_up: 200,
      pi_busy: 503,
      pi_busy_gives_up: 200,
      resolve: 409,
    });
  },
});

Deno.test({
  name:
    "the webhook leaves no timer, KV read or commit behind a request its store fails: probes, a delivery, a give-up and a resolution",
  sanitizeOps: true,
  sanitizeResources: true,
  fn: async () => {
    const kv = await Deno.openKv(":memory:");
    const store = new KvStore(kv);
    await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    kv.close();
    const { app } = await makeApp({
      deps: {
        store,
        sender: new HttpSender({
          url: "https://signer.example",
          timeoutMs: 60_000,
          fetch: () => Promise.resolve(Response.json({ txHash: "0x1" })),
        }),
        // Twice the Sender's timeout, the least the relayer takes with it.
        leaseMs: 120_000,
      },
    });
    const statuses: Record<string, number> = {};
    const status = async (name: string, res: Promise<Response>) => {
      const answer = await res;
      await answer.body?.cancel();
      statuses[name] = answer.status;
    };
    await status("/readyz", Promise.resolve(app.request("/readyz")));
    const job = { intentId: "pi_1", kind: "settle" };
    await status(
      "delivery",
      genericRequest(
        JSON.stringify({ job, delivery: 1, messageId: "m-1" }),
      ).then((init) => app.request("/v1/deliveries", init)),
    );
    await status(
      "give-up",
      genericRequest(
        JSON.stringify({ job, gaveUp: { deliveries: 3, messageId: "m-2" } }),
      ).then((init) => app.request("/v1/deliveries", init)),
    );
    await status(
      "resolve",
      Promise.resolve(app.request("/v1/intents/pi_1/resolve", {
        method: "POST",
        headers: { authorization: `Bearer ${OPS}` },
        body: JSON.stringify({
          to: "failed",
          nonceChecked: true,
          version: "1",
        }),
      })),
    );
    assert.deepEqual(statuses, {
      "/readyz": 503,
      delivery: 503,
      "give-up": 503,
      resolve: 503,
    });
  },
});
