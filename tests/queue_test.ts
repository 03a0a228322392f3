/**
 * The local Deno KV queue (DESIGN §11): `POST /v1/jobs` enqueues, the
 * consumer in the same process delivers, a retry is re-enqueued with the
 * policy's delay, and the delivery number is counted in the store.
 */
import assert from "node:assert/strict";
import { signer } from "../examples/signer_stub.ts";
import {
  KV_BACKOFF_SCHEDULE,
  LINE_PREFIX,
  openService,
  requeueUndelivered,
  type Service,
  UNDELIVERED_PREFIX,
} from "../main.ts";
import { loadConfig } from "../webhook/config.ts";
import { deadLetter } from "./store/_contract.ts";
import { timeout } from "./_timeout.ts";

const QUEUE_OPS_TOKEN = "queue-ops-token-0123456789";

/** The service with the local KV queue on a file of its own (its signer unreachable), drained after `body`. */
async function withLocalQueue(
  body: (service: Service) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_queue_" });
  const service = await openService(
    loadConfig({
      SENDER_URL: "http://127.0.0.1:9/",
      WEBHOOK_SECRET: "queue-secret-0123456789",
      OPS_TOKEN: QUEUE_OPS_TOKEN,
      KV_PATH: `${dir}/relayer.kv`,
      KV_QUEUE: "1",
    }),
    { log: () => {} },
  );
  try {
    await body(service);
  } finally {
    await service.drain(1_000);
    await Deno.remove(dir, { recursive: true });
  }
}

/** The options every enqueue of the service carries. */
function assertUndeliveredOptions(
  options:
    | { backoffSchedule?: number[]; keysIfUndelivered?: Deno.KvKey[] }
    | undefined,
): void {
  assert.deepEqual(options?.backoffSchedule, [...KV_BACKOFF_SCHEDULE]);
  const [key, ...more] = options?.keysIfUndelivered ?? [];
  assert.deepEqual(more, []);
  assert.deepEqual(key?.slice(0, 1), [...UNDELIVERED_PREFIX]);
  assert.equal(key?.length, 2);
}

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
        CLOCK_SKEW: "0", // one process, one clock
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
      const deliveries = () => lines.filter((line) => line.startsWith("queue"));
      while (deliveries().length < 3 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const intent = await store.getIntent("pi_0001");
      assert.deepEqual([intent?.state, intent?.hold], ["settled", "captured"]);
      assert.equal(await store.deliveries("pi_0001/settle"), 3);
      assert.deepEqual(
        lines.map((line) => line.replace(/0x[0-9a-f]+/g, "0x…")),
        [
          "relayer job pi_0001/settle queued by an operator",
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

Deno.test(
  "openService() with KV_QUEUE=1 enqueues every message with Deno KV's longest redelivery schedule and a key it is kept under if that runs out",
  timeout(30_000, async () => {
    const seen: (Parameters<Deno.AtomicOperation["enqueue"]>[1])[] = [];
    const values: unknown[] = [];
    // In one commit with the job's line.
    const enqueue = Deno.AtomicOperation.prototype.enqueue;
    Deno.AtomicOperation.prototype.enqueue = function (
      this: Deno.AtomicOperation,
      value,
      options,
    ) {
      seen.push(options);
      values.push(value);
      return enqueue.call(this, value, options);
    };
    try {
      await withLocalQueue(async (service) => {
        await service.store.createIntent({ id: "pi_0001" });
        const res = await service.app.request("/v1/jobs", {
          method: "POST",
          headers: { authorization: `Bearer ${QUEUE_OPS_TOKEN}` },
          body: JSON.stringify({ intentId: "pi_0001", kind: "settle" }),
        });
        assert.equal(res.status, 202);
      });
    } finally {
      Deno.AtomicOperation.prototype.enqueue = enqueue;
    }
    assertUndeliveredOptions(seen[0]);
    // It took its job's line.
    assert.equal((values[0] as { line?: boolean }).line, true);
    // An id of its own, which Deno KV's redeliveries of it keep.
    assert.match(
      (values[0] as { id?: string }).id ?? "",
      /^[0-9a-f-]{36}$/,
    );
    assert.deepEqual(KV_BACKOFF_SCHEDULE, [
      1_000,
      60_000,
      600_000,
      3_600_000,
      3_600_000,
    ]);
  }),
);

Deno.test(
  "requeueUndelivered() puts back on the queue a message Deno KV gave up delivering, once, and it is delivered",
  timeout(30_000, async () => {
    const kv = await Deno.openKv(":memory:");
    const delivered: unknown[] = [];
    let failing = true;
    const listening = kv.listenQueue((message) => {
      if (failing) throw new Error("the same KV is failing");
      delivered.push(message);
    });
    try {
      const key = [...UNDELIVERED_PREFIX, "m-1"];
      await kv.enqueue({ job: { intentId: "pi_0001", kind: "settle" } }, {
        keysIfUndelivered: [key],
        backoffSchedule: [10],
      });
      // Deno KV gives up: the message is kept under its key.
      const deadline = Date.now() + 10_000;
      while ((await kv.get(key)).value === null && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.notEqual((await kv.get(key)).value, null);
      failing = false;
      const lines: string[] = [];
      assert.equal(await requeueUndelivered(kv, (line) => lines.push(line)), 1);
      assert.deepEqual(lines, [
        "queue   put 1 message(s) Deno KV had given up delivering back on the queue",
      ]);
      assert.equal((await kv.get(key)).value, null);
      assert.equal(await requeueUndelivered(kv, () => {}), 0);
      while (delivered.length === 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.deepEqual(delivered, [{
        job: { intentId: "pi_0001", kind: "settle" },
      }]);
    } finally {
      kv.close();
      await listening;
    }
  }),
);

Deno.test(
  "openService() with KV_QUEUE=1 redrives with the same redelivery schedule and keep-if-undelivered key, in the commit that removes the letter",
  timeout(30_000, async () => {
    const seen: (Parameters<Deno.AtomicOperation["enqueue"]>[1])[] = [];
    const enqueue = Deno.AtomicOperation.prototype.enqueue;
    Deno.AtomicOperation.prototype.enqueue = function (
      this: Deno.AtomicOperation,
      value,
      options,
    ) {
      seen.push(options);
      return enqueue.call(this, value, options);
    };
    try {
      await withLocalQueue(async (service) => {
        // A letter's intent must exist: a gone intent's letter is refused.
        await service.store.createIntent({ id: "pi_0001", state: "created" });
        await service.store.putDeadLetter(deadLetter("pi_0001/settle", 0));
        const res = await service.app.request(
          "/v1/dead-letters/pi_0001/settle/redrive",
          {
            method: "POST",
            headers: { authorization: `Bearer ${QUEUE_OPS_TOKEN}` },
          },
        );
        assert.equal(res.status, 202);
      });
    } finally {
      Deno.AtomicOperation.prototype.enqueue = enqueue;
    }
    assert.equal(seen.length, 1);
    assertUndeliveredOptions(seen[0]);
  }),
);

/**
 * The service with the local KV queue on a file of its own, its signer
 * answering every send 502 (the send may have happened), the policy's
 * window 5 × 300 ms without jitter, and STUCK_AFTER 1 s within it; the
 * lines it logs stamped with the ms since it opened.
 */
async function withFailingSigner(
  body: (
    service: Service,
    lines: [number, string][],
    sends: () => number,
    restart: () => Promise<Service>,
  ) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_queue_" });
  let sends = 0;
  const stub = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen() {} },
    (req) => {
      if (new URL(req.url).pathname !== "/send") {
        return Response.json({ status: "pending" });
      }
      sends++;
      return Response.json({ error: "rpc: connection refused" }, {
        status: 502,
      });
    },
  );
  const t0 = performance.now();
  const lines: [number, string][] = [];
  const open = () =>
    openService(
      loadConfig({
        SENDER_URL: `http://127.0.0.1:${stub.addr.port}`,
        WEBHOOK_SECRET: "queue-secret-0123456789",
        OPS_TOKEN: QUEUE_OPS_TOKEN,
        KV_PATH: `${dir}/relayer.kv`,
        KV_QUEUE: "1",
        MAX_DELIVERIES: "6",
        BASE: "300ms",
        CAP: "300ms",
        JITTER: "none",
        STUCK_AFTER: "1s",
        CLOCK_SKEW: "0", // one process, one clock
      }),
      { log: (line) => lines.push([performance.now() - t0, line]) },
    );
  let service = await open();
  try {
    await service.store.createIntent({
      id: "pi_0001",
      state: "authorized",
      hold: "pending",
    });
    // Stopped at once, as a process killed, and started again on its file.
    const restart = async () => {
      await service.drain(0);
      service = await open();
      return service;
    };
    await body(service, lines, () => sends, restart);
  } finally {
    await service.drain(1_000);
    await stub.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

/** `POST /v1/jobs` of pi_0001's settle job. */
async function queueJob(service: Service): Promise<void> {
  const res = await service.app.request("/v1/jobs", {
    method: "POST",
    headers: { authorization: `Bearer ${QUEUE_OPS_TOKEN}` },
    body: JSON.stringify({ intentId: "pi_0001", kind: "settle" }),
  });
  assert.equal(res.status, 202);
}

/** Waits for a logged line matching `pattern`, and returns it with its time. */
async function logged(
  lines: [number, string][],
  pattern: RegExp,
): Promise<[number, string]> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const found = lines.find(([, line]) => pattern.test(line));
    if (found) return found;
    assert.ok(Date.now() < deadline, `no line matching ${pattern}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

Deno.test(
  "openService() with KV_QUEUE=1: a job queued twice goes on as one line of retries, and gives up no sooner than the policy's window",
  timeout(60_000, async () => {
    await withFailingSigner(async (service, lines, sends) => {
      await queueJob(service);
      await logged(lines, /pi_0001\/settle +#1 /);
      // "A job that reaches the queue twice is harmless": queued again
      // while its retry waits, as an operator nudging it would.
      await queueJob(service);
      // Its delivery (#2) is the operator's; from there the job waits the
      // policy's delays, in one line: four of 300 ms to its sixth.
      const [nudged] = await logged(lines, /pi_0001\/settle +#2 /);
      const [poisoned] = await logged(lines, / poison /);
      assert.ok(
        poisoned - nudged >= 1_200,
        `gave up ${
          Math.round(poisoned - nudged)
        } ms after the delivery queued again, before the policy's 4 × 300 ms:\n${
          lines.map(([, line]) => line).join("\n")
        }`,
      );
      // The payment got its rescue: sent again once it was stuck.
      assert.equal(sends(), 2);
    });
  }),
);

Deno.test(
  "openService() with KV_QUEUE=1: a message Deno KV delivers again after a restart, its retry enqueued before the process was killed and its ack lost, does not start a second line of retries",
  timeout(60_000, async () => {
    // The first message as enqueued, alone or in a commit.
    const values: unknown[] = [];
    const enqueue = Deno.Kv.prototype.enqueue;
    Deno.Kv.prototype.enqueue = function (this: Deno.Kv, value, options) {
      values.push(value);
      return enqueue.call(this, value, options);
    };
    const inCommit = Deno.AtomicOperation.prototype.enqueue;
    Deno.AtomicOperation.prototype.enqueue = function (
      this: Deno.AtomicOperation,
      value,
      options,
    ) {
      values.push(value);
      return inCommit.call(this, value, options);
    };
    try {
      await withFailingSigner(async (service, lines, sends, restart) => {
        await queueJob(service);
        const [first] = await logged(lines, /pi_0001\/settle +#1 /);
        // Killed between the retry's enqueue and Deno KV's ack: on the
        // next start, Deno KV delivers the same message again (it was
        // still running), beside the retry it enqueued.
        assert.equal(
          (values[0] as { job?: { intentId?: string } }).job?.intentId,
          "pi_0001",
        );
        await enqueue.call(service.kv!, values[0]);
        await restart();
        const [poisoned] = await logged(lines, / poison /);
        assert.ok(
          poisoned - first >= 1_500,
          `gave up ${
            Math.round(poisoned - first)
          } ms after the first delivery, before the policy's window of 1500 ms:\n${
            lines.map(([, line]) => line).join("\n")
          }`,
        );
        assert.equal(sends(), 2);
      });
    } finally {
      Deno.Kv.prototype.enqueue = enqueue;
      Deno.AtomicOperation.prototype.enqueue = inCommit;
    }
  }),
);

Deno.test(
  "openService() with KV_QUEUE=1: a redriven job is delivered and retried, whatever message its line names from before",
  timeout(60_000, async () => {
    await withFailingSigner(async (service, lines) => {
      // The line of a job that gave up: it names its last message.
      await service.kv!.set([...LINE_PREFIX, "pi_0001/settle"], "gone");
      await service.store.putDeadLetter(deadLetter("pi_0001/settle", 0));
      const res = await service.app.request(
        "/v1/dead-letters/pi_0001/settle/redrive",
        {
          method: "POST",
          headers: { authorization: `Bearer ${QUEUE_OPS_TOKEN}` },
        },
      );
      assert.equal(res.status, 202, await res.text());
      // Delivered, and its retry delivered.
      await logged(lines, /pi_0001\/settle +#1 /);
      await logged(lines, /pi_0001\/settle +#2 /);
    });
  }),
);
