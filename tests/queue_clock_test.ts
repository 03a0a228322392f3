/**
 * The local Deno KV queue when the wall clock steps forward mid-send. Deno
 * KV keeps a message whose handler runs under a deadline 5 s after it was
 * due, by the wall clock and never renewed (denokv's `queue_running`
 * table); once the clock steps past it (a VM resumed, NTP stepped the
 * clock), Deno KV puts the message back and delivers it again, 1 s later
 * by our redelivery schedule, while the first handler still runs (seen with Deno 2.9.6 and
 * a clock stepped 10 minutes through `LD_PRELOAD`). Here the step is the
 * service's injected clock, and the redelivery an enqueue of the same
 * message on the same SQLite file.
 */
import assert from "node:assert/strict";
import { openService } from "../main.ts";
import { loadConfig } from "../webhook/config.ts";
import { timeout } from "./_timeout.ts";

/**
 * The service over a KV file with `KV_QUEUE=1`, its clock steppable, and a
 * signer whose sends hold until `release`; `pi_0001` authorized.
 */
async function heldService() {
  const dir = await Deno.makeTempDir({ prefix: "relayer_queue_clock_" });
  const sends = { count: 0, inFlight: 0, maxInFlight: 0 };
  let started: () => void = () => {};
  const firstStarted = new Promise<void>((resolve) => (started = resolve));
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const stub = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen() {} },
    async (request) => {
      if (new URL(request.url).pathname !== "/send") {
        return Response.json({ status: "pending" });
      }
      await request.body?.cancel();
      const n = ++sends.count;
      sends.inFlight++;
      sends.maxInFlight = Math.max(sends.maxInFlight, sends.inFlight);
      started();
      await released;
      sends.inFlight--;
      return Response.json({ txHash: `0x${n}` });
    },
  );
  const clock = { stepMs: 0 };
  const lines: string[] = [];
  const service = await openService(
    loadConfig({
      SENDER_URL: `http://127.0.0.1:${stub.addr.port}`,
      OPS_TOKEN: "queue-ops-token-0123456789",
      RELAYER_INSECURE_DEV: "1",
      KV_PATH: `${dir}/relayer.kv`,
      KV_QUEUE: "1",
    }),
    { now: () => Date.now() + clock.stepMs, log: (line) => lines.push(line) },
  );
  await service.store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  return {
    service,
    clock,
    lines,
    sends,
    firstStarted,
    release: () => release(),
    async close() {
      release();
      await service.drain(2_000);
      await stub.shutdown();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

const job = { intentId: "pi_0001", kind: "settle" } as const;

Deno.test(
  "openService() with KV_QUEUE=1 sends once when the clock steps 6 minutes forward mid-send and Deno KV delivers the message again",
  timeout(60_000, async () => {
    const held = await heldService();
    const { service, clock, lines, sends } = held;
    try {
      await service.kv!.enqueue({ job });
      await held.firstStarted; // the first delivery's send is in flight
      clock.stepMs = 6 * 60_000; // past LEASE (30 s) and STUCK_AFTER (5 min)
      await service.kv!.enqueue({ job }); // Deno KV's redelivery of it
      const copy = (line: string) =>
        /^queue {3}pi_0001\/settle {3}#2 /.test(line);
      const deadline = Date.now() + 10_000;
      while (!lines.some(copy) && sends.count < 2 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      held.release();
      assert.equal(
        sends.maxInFlight,
        1,
        `two sends at once: ${lines.join("\n")}`,
      );
      assert.equal(sends.count, 1);
      assert.match(lines.find(copy) ?? "", /busy with another delivery/);
    } finally {
      await held.close();
    }
  }),
);

Deno.test(
  "openService() with KV_QUEUE=1 sends once when the clock steps 6 minutes forward mid-send and the webhook delivers the same job",
  timeout(60_000, async () => {
    const held = await heldService();
    const { service, clock, lines, sends } = held;
    try {
      // The local queue's delivery sends...
      await service.kv!.enqueue({ job, id: "m1" });
      await held.firstStarted;
      clock.stepMs = 6 * 60_000; // past LEASE (30 s) and STUCK_AFTER (5 min)
      // ...and a copy of the job reaches the webhook (a bridge, an
      // operator's retry) while that send is in flight.
      const answer = await service.fetch(
        new Request("http://localhost/v1/deliveries", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ job, delivery: 2 }),
        }),
      );
      const body = await answer.json();
      held.release();
      assert.equal(
        sends.maxInFlight,
        1,
        `two sends at once: ${lines.join("\n")}`,
      );
      assert.equal(sends.count, 1);
      assert.equal(answer.status, 503, JSON.stringify(body));
      assert.match(body.reason, /busy with another delivery/);
    } finally {
      await held.close();
    }
  }),
);
