/**
 * The local Deno KV queue's job lines (`webhook/_local_queue.ts`,
 * `LocalLine`) when the newer message of a job ends it while an older
 * delivery, which read the line before, is still to act.
 */
import assert from "node:assert/strict";
import { openService } from "../main.ts";
import { type Config, loadConfig } from "../webhook/config.ts";
import type { Store } from "../mod.ts";
import { signerStub } from "./_signer_stub.ts";
import { timeout } from "./_timeout.ts";
import { OPS, queueSettle } from "./_queue_line.ts";

/** The service's settings: the local queue on a file in `dir`, two deliveries 50 ms apart. */
function lineConfig(port: number, dir: string): Config {
  return loadConfig({
    SENDER_URL: `http://127.0.0.1:${port}`,
    OPS_TOKEN: OPS,
    WEBHOOK_SECRET: "queue-secret-0123456789",
    KV_PATH: `${dir}/relayer.kv`,
    KV_QUEUE: "1",
    MAX_DELIVERIES: "2",
    BASE: "50ms",
    CAP: "50ms",
    JITTER: "none",
    STUCK_AFTER: "50ms",
    CLOCK_SKEW: "0", // one process, one clock
  });
}

/** pi_0001, authorized, with one delivery of its job already counted: the next is the last. */
async function lastDeliveryAhead(store: Store): Promise<void> {
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  await store.admit({ count: "pi_0001/settle", now: Date.now() });
}

Deno.test(
  "openService() with KV_QUEUE=1: a delivery that sends after the job's newer message dropped it (held up past the drop's lease) still follows its send up",
  timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_queue_line_" });
    const stub = signerStub("confirmed").stub;
    // The first read of the job's line returns once `release` is called: the
    // delivery that made it held up there (a VM paused, a process stopped).
    const get = Deno.Kv.prototype.get;
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    let readLine: () => void = () => {};
    const lineRead = new Promise<void>((resolve) => (readLine = resolve));
    let held = false;
    Deno.Kv.prototype.get = async function (
      this: Deno.Kv,
      key: Deno.KvKey,
      options?: { consistency?: Deno.KvConsistencyLevel },
    ) {
      const entry = await get.call(this, key, options);
      if (key[0] === "relayer_line" && !held) {
        held = true;
        readLine();
        await released;
      }
      return entry;
      // deno-lint-ignore no-explicit-any
    } as any;
    const clock = { stepMs: 0 };
    const lines: string[] = [];
    const service = await openService(
      lineConfig(stub.addr.port, dir),
      { now: () => Date.now() + clock.stepMs, log: (line) => lines.push(line) },
    );
    const queueJob = () => queueSettle(service.app);
    try {
      const { store } = service;
      await lastDeliveryAhead(store);
      await queueJob();
      await lineRead; // its delivery read the line, and is held up
      // Queued again meanwhile (an operator's nudge): that message takes the
      // line, and its delivery, the last, drops the job (nothing sent).
      await queueJob();
      const deadline = Date.now() + 10_000;
      while (!lines.some((l) => / poison /.test(l)) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.ok(lines.some((l) => / poison /.test(l)), lines.join("\n"));
      // The held delivery goes on once the drop's lease is over: its count
      // was reset with the letter, and the intent is authorized, so it sends.
      clock.stepMs = 60_000;
      release();
      const settledBy = Date.now() + 10_000;
      let intent = await store.getIntent("pi_0001");
      while (intent?.state !== "settled" && Date.now() < settledBy) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        intent = await store.getIntent("pi_0001");
      }
      // A payment sent is followed up to its end, never left settling with
      // no message of its job on the queue.
      assert.deepEqual(
        [intent?.state, intent?.hold],
        ["settled", "captured"],
        `left ${intent?.state} (hold ${intent?.hold}) after its send:\n${
          lines.join("\n")
        }`,
      );
    } finally {
      Deno.Kv.prototype.get = get;
      release();
      await service.drain(1_000);
      await stub.shutdown();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

/**
 * A job dropped by its last delivery, then its message delivered again at
 * the next start (a kill lost its ack), the drop's lease over: nothing
 * must be sent. With `cutEndedMark`, the kill also came before the line's
 * ended mark landed.
 */
async function droppedThenDeliveredAgain(cutEndedMark: boolean): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_queue_line_" });
  const signer = signerStub("confirmed");
  const stub = signer.stub;
  // The message as enqueued in its commit.
  const values: unknown[] = [];
  const inCommit = Deno.AtomicOperation.prototype.enqueue;
  Deno.AtomicOperation.prototype.enqueue = function (
    this: Deno.AtomicOperation,
    value,
    options,
  ) {
    values.push(value);
    return inCommit.call(this, value, options);
  };
  // The process is killed after the drop's letter landed, before the
  // line's ended mark: that commit never lands.
  const set = Deno.AtomicOperation.prototype.set;
  const commit = Deno.AtomicOperation.prototype.commit;
  const cut = new WeakSet<Deno.AtomicOperation>();
  if (cutEndedMark) {
    Deno.AtomicOperation.prototype.set = function (
      this: Deno.AtomicOperation,
      key,
      value,
      options,
    ) {
      if (
        key[0] === "relayer_line" &&
        typeof (value as { ended?: unknown } | null)?.ended === "string"
      ) cut.add(this);
      return set.call(this, key, value, options);
    };
    Deno.AtomicOperation.prototype.commit = function (
      this: Deno.AtomicOperation,
    ) {
      if (cut.has(this)) return Promise.reject(new Error("killed"));
      return commit.call(this);
    };
  }
  const clock = { stepMs: 0 };
  const lines: string[] = [];
  const open = () =>
    openService(lineConfig(stub.addr.port, dir), {
      now: () => Date.now() + clock.stepMs,
      log: (line) => lines.push(line),
    });
  let service = await open();
  try {
    const { store } = service;
    await lastDeliveryAhead(store);
    await queueSettle(service.app);
    const ended = cutEndedMark ? /could not be marked ended/ : / poison /;
    const deadline = Date.now() + 10_000;
    while (!lines.some((l) => ended.test(l)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.ok(lines.some((l) => / poison /.test(l)), lines.join("\n"));
    // Killed before Deno KV's ack: the next start delivers the same
    // message again, about a minute later (the drop's lease is over).
    clock.stepMs = 60_000;
    assert.equal(values.length, 1);
    await service.drain(0);
    service = await open();
    await service.kv!.enqueue(values[0]);
    const quiet = Date.now() + 1_500;
    while (signer.sends() === 0 && Date.now() < quiet) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const intent = await service.store.getIntent("pi_0001");
    assert.deepEqual(
      [signer.sends(), intent?.state],
      [0, "authorized"],
      `the dropped job sent again:\n${lines.join("\n")}`,
    );
  } finally {
    Deno.AtomicOperation.prototype.enqueue = inCommit;
    Deno.AtomicOperation.prototype.set = set;
    Deno.AtomicOperation.prototype.commit = commit;
    await service.drain(1_000);
    await stub.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test(
  "openService() with KV_QUEUE=1: the message whose delivery dropped its job, delivered again after a restart (its ack lost to a kill), sends nothing",
  timeout(60_000, () => droppedThenDeliveredAgain(false)),
);

Deno.test(
  "openService() with KV_QUEUE=1: the message whose delivery dropped its job, delivered again after a kill before its line was marked ended, sends nothing",
  timeout(60_000, () => droppedThenDeliveredAgain(true)),
);

Deno.test(
  "openService() with KV_QUEUE=1: a drop marks its message and releases the intent's lease, so a redrive right after it sends at its first delivery",
  timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_queue_line_" });
    const signer = signerStub("confirmed");
    const stub = signer.stub;
    const lines: string[] = [];
    const service = await openService(
      lineConfig(stub.addr.port, dir),
      { log: (line) => lines.push(line) },
    );
    const ops = { authorization: `Bearer ${OPS}` };
    try {
      const { store } = service;
      await lastDeliveryAhead(store);
      const res = await service.app.request("/v1/jobs", {
        method: "POST",
        headers: ops,
        body: JSON.stringify({ intentId: "pi_0001", kind: "settle" }),
      });
      assert.equal(res.status, 202);
      const deadline = Date.now() + 10_000;
      while (
        !lines.some((l) => / ended/.test(l) || / poison /.test(l)) &&
        Date.now() < deadline
      ) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.ok(lines.some((l) => / poison /.test(l)), lines.join("\n"));
      const redrive = await service.app.request(
        "/v1/dead-letters/pi_0001/settle/redrive",
        { method: "POST", headers: ops },
      );
      assert.equal(redrive.status, 202, await redrive.text());
      const settledBy = Date.now() + 5_000;
      let intent = await store.getIntent("pi_0001");
      while (intent?.state !== "settled" && Date.now() < settledBy) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        intent = await store.getIntent("pi_0001");
      }
      assert.deepEqual(
        [signer.sends(), intent?.state],
        [1, "settled"],
        `the redrive did not send at its first delivery:\n${lines.join("\n")}`,
      );
      assert.ok(
        !lines.some((l) => /busy|another delivery/.test(l)),
        lines.join("\n"),
      );
    } finally {
      await service.drain(1_000);
      await stub.shutdown();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
