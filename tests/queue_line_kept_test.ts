/**
 * How long the local Deno KV queue keeps a job's line (`main.ts`,
 * `LINE_PREFIX`): as long as an older message of the job can still come.
 * Deno KV expires a key by its own wall clock, which a test cannot move:
 * here each line's key is read as absent once the test's clock passes the
 * `expireIn` its commit asked for, as Deno KV reads it then.
 */
import assert from "node:assert/strict";
import { openService } from "../main.ts";
import { loadConfig } from "../webhook/config.ts";
import { signerStub } from "./_signer_stub.ts";
import { timeout } from "./_timeout.ts";
import { OPS, queueSettle } from "./_queue_line.ts";

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * `openService` over `env` with `KV_QUEUE=1`, on a clock the test steps
 * (`clock.stepMs`), each line's key read as absent once that clock passes
 * the `expireIn` its commit asked for; `enqueued` holds each message as
 * enqueued, with its delay. `close()` puts Deno KV's methods back.
 */
async function keptLines(env: Record<string, string>) {
  const dir = await Deno.makeTempDir({ prefix: "relayer_queue_kept_" });
  const { stub, sends } = signerStub("pending");
  const clock = { stepMs: 0 };
  const now = () => Date.now() + clock.stepMs;
  // Each line's expiry, by the test's clock, as its commit asked.
  const expiresAt = new Map<string, number>();
  const set = Deno.AtomicOperation.prototype.set;
  Deno.AtomicOperation.prototype.set = function (
    this: Deno.AtomicOperation,
    key,
    value,
    options,
  ) {
    if (key[0] === "relayer_line" && options?.expireIn !== undefined) {
      expiresAt.set(String(key[1]), now() + options.expireIn);
    }
    return set.call(this, key, value, options);
  };
  const get = Deno.Kv.prototype.get;
  Deno.Kv.prototype.get = async function (
    this: Deno.Kv,
    key: Deno.KvKey,
    options?: { consistency?: Deno.KvConsistencyLevel },
  ) {
    const entry = await get.call(this, key, options);
    const at = key[0] === "relayer_line"
      ? expiresAt.get(String(key[1]))
      : undefined;
    return at !== undefined && now() >= at
      ? { key, value: null, versionstamp: null }
      : entry;
    // deno-lint-ignore no-explicit-any
  } as any;
  // Each message as enqueued, with its delay.
  const enqueued: { value: { id?: string }; delay: number }[] = [];
  const enqueue = Deno.AtomicOperation.prototype.enqueue;
  Deno.AtomicOperation.prototype.enqueue = function (
    this: Deno.AtomicOperation,
    value,
    options,
  ) {
    enqueued.push({
      value: value as { id?: string },
      delay: options?.delay ?? 0,
    });
    return enqueue.call(this, value, options);
  };
  const restore = () => {
    Deno.AtomicOperation.prototype.set = set;
    Deno.AtomicOperation.prototype.enqueue = enqueue;
    Deno.Kv.prototype.get = get;
  };
  const lines: string[] = [];
  let service: Awaited<ReturnType<typeof openService>>;
  try {
    service = await openService(
      loadConfig({
        SENDER_URL: `http://127.0.0.1:${stub.addr.port}`,
        OPS_TOKEN: OPS,
        WEBHOOK_SECRET: "queue-secret-0123456789",
        KV_PATH: `${dir}/relayer.kv`,
        KV_QUEUE: "1",
        CLOCK_SKEW: "0", // one process, one clock
        ...env,
      }),
      { now, log: (line) => lines.push(line) },
    );
  } catch (error) {
    restore();
    await stub.shutdown();
    await Deno.remove(dir, { recursive: true });
    throw error;
  }
  const queueJob = () => queueSettle(service.app);
  const until = async (pattern: RegExp, count = 1) => {
    const deadline = Date.now() + 10_000;
    while (
      lines.filter((l) => pattern.test(l)).length < count &&
      Date.now() < deadline
    ) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok(
      lines.filter((l) => pattern.test(l)).length >= count,
      lines.join("\n"),
    );
  };
  /** Delivers a copy of `message` now, and waits for its first line. */
  const deliverCopy = async (message: { id?: string }) => {
    const before = lines.length;
    await service.kv!.enqueue(message);
    const deadline = Date.now() + 10_000;
    while (lines.length === before && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  const close = async () => {
    restore();
    await service.drain(1_000);
    await stub.shutdown();
    await Deno.remove(dir, { recursive: true });
  };
  return {
    service,
    sends,
    clock,
    now,
    enqueued,
    lines,
    queueJob,
    until,
    deliverCopy,
    close,
  };
}

Deno.test(
  "openService() with KV_QUEUE=1 and a CAP past 8 days: an older message of a dropped job, due after the drop, is acked unhandled and sends nothing",
  timeout(60_000, async () => {
    const run = await keptLines({
      MAX_DELIVERIES: "2",
      BASE: "240h",
      CAP: "240h",
      JITTER: "none",
    });
    const { service, clock, enqueued, lines, queueJob, until } = run;
    try {
      const { store } = service;
      await store.createIntent({ id: "pi_0001", state: "created" });
      // Its first delivery finds it not authorized: again in 10 days.
      await queueJob();
      await until(/ retry /);
      const older = enqueued.at(-1)!;
      assert.equal(older.delay, 10 * DAY_MS);
      // Queued again (an operator's nudge): that message takes the line,
      // and its delivery, the last, drops the job.
      await queueJob();
      await until(/ poison /);
      // The payments API authorizes the intent since.
      await store.recordHold("pi_0001");
      const created = (await store.getIntent("pi_0001"))!;
      await store.transition("pi_0001", {
        from: "created",
        to: "authorized",
        version: created.version,
        at: run.now(),
      });
      // The older message comes when due, 10 days on: the job it belongs
      // to was dropped, and it must not go on as a fresh one.
      clock.stepMs = older.delay + 1_000;
      await run.deliverCopy(older.value);
      // Its line: acked unhandled, or its delivery's outcome after the send.
      const intent = await store.getIntent("pi_0001");
      assert.deepEqual(
        [run.sends(), intent?.state],
        [0, "authorized"],
        `the dropped job's older message went on as a fresh job:\n${
          lines.join("\n")
        }`,
      );
      assert.ok(
        lines.some((l) =>
          l.includes(`acked message ${older.value.id} unhandled`)
        ),
        lines.join("\n"),
      );
    } finally {
      await run.close();
    }
  }),
);

Deno.test(
  "openService() with KV_QUEUE=1 and a LEASE past 8 days over CAP: an older message a send in flight put off by its lease, due after its job ended, is acked unhandled",
  timeout(60_000, async () => {
    // A busy delivery waits what is left of the lease that made it busy
    // (up to LEASE and CLOCK_SKEW twice), which CAP does not bound.
    const run = await keptLines({
      MAX_DELIVERIES: "2",
      BASE: "1h",
      CAP: "1h",
      JITTER: "none",
      STUCK_AFTER: "1m",
      LEASE: "240h",
    });
    const { service, clock, enqueued, lines, queueJob, until } = run;
    try {
      const { store } = service;
      // Another delivery's send is in flight, written ahead now.
      const settling = await store.createIntent({
        id: "pi_0001",
        state: "settling",
        hold: "pending",
        settlingSince: run.now(),
      });
      const ahead = await store.beginBroadcast(
        "pi_0001",
        settling.version,
        run.now(),
      );
      // This delivery finds it busy: again once that send's lease lapses.
      await queueJob();
      await until(/ retry /);
      const older = enqueued.at(-1)!;
      assert.ok(older.delay > 9 * DAY_MS, String(older.delay));
      // An operator puts the payment in review, and queues the job again:
      // that message takes the line, and its delivery ends the job.
      await store.transition("pi_0001", {
        from: "settling",
        to: "needs_review",
        version: ahead.version,
        at: run.now(),
      });
      await queueJob();
      await until(/ done /);
      // The older message comes when due, 10 days on: its job ended.
      clock.stepMs = older.delay + 1_000;
      await run.deliverCopy(older.value);
      assert.ok(
        lines.some((l) =>
          l.includes(`acked message ${older.value.id} unhandled`)
        ),
        `the ended job's older message was handled as a fresh job:\n${
          lines.join("\n")
        }`,
      );
    } finally {
      await run.close();
    }
  }),
);

Deno.test(
  "openService() with KV_QUEUE=1: a job's line is kept past its newest message's delay, so an older message that comes late after a long stop, the newest not yet delivered, is acked unhandled",
  timeout(60_000, async () => {
    const run = await keptLines({
      MAX_DELIVERIES: "3",
      BASE: "240h",
      CAP: "240h",
      JITTER: "none",
    });
    const { service, clock, enqueued, lines, queueJob, until } = run;
    try {
      await service.store.createIntent({ id: "pi_0001", state: "created" });
      // Its first delivery finds it not authorized: again in 10 days.
      await queueJob();
      await until(/ retry /);
      const older = enqueued.at(-1)!;
      // Queued again (an operator's nudge), delivered, not authorized:
      // its retry, due in 10 days too, is the newest and takes the line.
      await queueJob();
      await until(/ retry /, 2);
      assert.deepEqual(
        [older.delay, enqueued.at(-1)!.delay],
        [10 * DAY_MS, 10 * DAY_MS],
      );
      // The service stopped for 20 days: on its return the older retry
      // comes before the newest. The line, kept 8 days and CAP past the
      // newest's delay, still names the newest.
      clock.stepMs = 20 * DAY_MS;
      await run.deliverCopy(older.value);
      assert.ok(
        lines.some((l) =>
          l.includes(`acked message ${older.value.id} unhandled`)
        ),
        lines.join("\n"),
      );
      assert.equal(lines.filter((l) => / retry /.test(l)).length, 2);
    } finally {
      await run.close();
    }
  }),
);
