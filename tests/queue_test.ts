/**
 * The local Deno KV queue (DESIGN §11): `POST /v1/jobs` enqueues, the
 * consumer in the same process delivers, a retry is re-enqueued with the
 * policy's delay, and the delivery number is counted in the store.
 */
import assert from "node:assert/strict";
import { signer } from "../examples/signer_stub.ts";
import { openService } from "../main.ts";
import { loadConfig } from "../webhook/config.ts";
import { timeout } from "./_timeout.ts";

Deno.test(
  "openService() with KV_QUEUE=1 settles an enqueued job through re-enqueued retries",
  timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_queue_" });
    const stub = Deno.serve(
      { port: 0, hostname: "127.0.0.1", onListen() {} },
      signer,
    );
    const lines: string[] = [];
    const service = await openService(
      loadConfig({
        SENDER_URL: `http://127.0.0.1:${stub.addr.port}`,
        OPS_TOKEN: "queue-ops-token-0123456789",
        RELAYER_INSECURE_DEV: "1",
        KV_PATH: `${dir}/relayer.kv`,
        KV_QUEUE: "1",
        BASE: "20ms", // keep the real-time waits of the queue short
        STUCK_AFTER: "1s",
      }),
      { log: (line) => lines.push(line) },
    );
    // Only the ops routes have their key: the start-up line says what is open.
    assert.match(service.description, /; routes: ops, local KV queue, /);
    assert.match(
      service.description,
      /INSECURE DEV MODE \(unsigned requests accepted on \/v1\/qstash and \/v1\/qstash\/failed, \/v1\/pubsub, \/v1\/pubsub\/dead-letter, \/v1\/deliveries\)/,
    );
    try {
      const { store } = service;
      await store.createIntent({
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
      const res = await service.app.request("/v1/jobs", {
        method: "POST",
        headers: { authorization: "Bearer queue-ops-token-0123456789" },
        body: JSON.stringify({ intentId: "pi_0001", kind: "settle" }),
      });
      assert.equal(res.status, 202);
      const deadline = Date.now() + 10_000;
      // Done when the consumer has logged the third delivery (the state turns
      // settled a moment before the delivery returns and logs).
      while (lines.length < 3 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const intent = await store.getIntent("pi_0001");
      assert.deepEqual([intent?.state, intent?.hold], ["settled", "captured"]);
      assert.equal(await store.deliveries("pi_0001/settle"), 3);
      assert.deepEqual(
        lines.map((line) => line.replace(/0x[0-9a-f]+/g, "0x…")),
        [
          "queue   pi_0001/settle   #1  retry        (sent 0x…, waiting for confirmation)",
          "queue   pi_0001/settle   #2  retry        (waiting for 0x… to confirm)",
          "queue   pi_0001/settle   #3  done         (0x… confirmed, intent settled)",
        ],
      );
    } finally {
      service.close();
      await stub.shutdown();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
