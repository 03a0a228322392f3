/**
 * `main.ts` stopped (SIGTERM) while another program holds a write
 * transaction open on its Deno KV file (`sqlite3` with `BEGIN IMMEDIATE`
 * left open, a backup tool). Deno KV's SQLite thread, once one of its own
 * writes (the deletion of expired keys, due at least once a minute) meets
 * that lock, waits for it with no end, and `kv.close()` waits for that
 * thread: the drain still ends the process within the 10 s a platform
 * gives, with one line that names the lock, not a process that outlives
 * SIGTERM until a SIGKILL.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import {
  assertOneLine,
  healthy,
  signedDelivery,
  startMain,
} from "./_main_process.ts";
import { timeout } from "./_timeout.ts";

const SETTINGS = {
  SENDER_URL: "http://127.0.0.1:9/",
  WEBHOOK_SECRET: "drain-locked-secret-0123456789",
};

/** How long the process may take to end after SIGTERM: a platform's usual grace. */
const STOPPED_WITHIN_MS = 10_000;

/** How long the test waits for the end before it says the process outlived SIGTERM. */
const GIVE_UP_MS = 16_000;

/**
 * A store at `path` holding keys that expire one every second for the next
 * minute: whenever a lock is taken on it, Deno KV's deletion of expired
 * keys meets it within about 2 s (a second apart, with up to 1 s of jitter).
 */
async function storeWithExpiringKeys(path: string): Promise<void> {
  const kv = await Deno.openKv(path);
  try {
    for (let i = 1; i <= 60; i++) {
      await kv.set(["test", "expires", i], i, { expireIn: i * 1_000 });
    }
  } finally {
    kv.close();
  }
}

/**
 * `main.ts` started with `env` on a Deno KV file in a new folder (made
 * first by `prepare`, if given), killed if the test is given up; `lock()`
 * takes a write transaction on the file as another program would
 * (`sqlite3 relayer.kv`, `BEGIN IMMEDIATE;` and a write, left open), and
 * `end(pending)` ends the service and `pending`, lets go of the lock and
 * removes the folder.
 */
async function onFile(
  env: Record<string, string>,
  signal: AbortSignal,
  prepare?: (path: string) => Promise<void>,
) {
  const dir = await Deno.makeTempDir({ prefix: "relayer_drain_locked_" });
  const path = `${dir}/relayer.kv`;
  await prepare?.(path);
  const service = startMain({ ...SETTINGS, ...env, KV_PATH: path }, {
    writeDir: dir,
  });
  signal.addEventListener("abort", service.kill);
  let db: DatabaseSync | undefined;
  return {
    path,
    service,
    lock() {
      db = new DatabaseSync(path);
      db.exec("BEGIN IMMEDIATE; UPDATE kv SET v = v");
    },
    async end(pending?: Promise<unknown>) {
      signal.removeEventListener("abort", service.kill);
      service.kill();
      await service.ended().catch(() => {});
      await pending;
      if (db?.isOpen) {
        db.exec("ROLLBACK");
        db.close();
      }
      await Deno.remove(dir, { recursive: true });
    },
  };
}

const CASES = [
  { name: "with no delivery in flight", env: {}, delivery: false },
  // A delivery the lock holds up: the drain waits its 8 s for it, then
  // the close's own wait, still within the 10 s.
  {
    name: "with KV_QUEUE=1 and a delivery in flight",
    env: { KV_QUEUE: "1" },
    delivery: true,
  },
];

/**
 * `main.ts` with `env` ends within 10 s of SIGTERM, in one line that names
 * the lock, while another program holds a write transaction on its file.
 */
async function endsUnderLock(
  { env, delivery }: (typeof CASES)[number],
  signal: AbortSignal,
): Promise<void> {
  const { path, service, lock, end } = await onFile(
    env,
    signal,
    storeWithExpiringKeys,
  );
  let timer: ReturnType<typeof setTimeout> | undefined;
  let answer: Promise<unknown> | undefined;
  try {
    const base = await service.base();
    assert.ok(base, "main.ts ended before it served");
    await healthy(base);
    lock();
    // Deno KV's deletion of the next expired key now waits on the lock.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    if (delivery) {
      answer = signedDelivery(base, SETTINGS.WEBHOOK_SECRET, "pi_locked")
        .then(
          (res) => res.body?.cancel(),
          () => {},
        );
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    const sentAt = performance.now();
    service.child.kill("SIGTERM");
    const ended = await Promise.race([
      service.ended(),
      new Promise<null>((resolve) => {
        timer = setTimeout(() => resolve(null), GIVE_UP_MS);
      }),
    ]);
    const tookMs = Math.round(performance.now() - sentAt);
    assert.ok(
      ended !== null,
      `main.ts still ran ${GIVE_UP_MS / 1000} s after SIGTERM`,
    );
    const { code, stdout, stderr } = ended;
    assert.ok(
      tookMs < STOPPED_WITHIN_MS,
      `ended ${tookMs} ms after SIGTERM\n${stdout}\n${stderr}`,
    );
    assert.equal(code, 1, `${stdout}\n${stderr}`);
    assert.match(stdout, /relayer: SIGTERM: draining \(at most 8s\)/);
    assert.doesNotMatch(stdout, /KV closed/);
    assertOneLine(
      stderr,
      new RegExp(
        `^relayer: KV_PATH: ${path} stayed locked by another handle through the drain: a program holds it in a write transaction \\(sqlite3, a backup tool\\), and closing KV would wait for it with no end\\. Exiting without closing it, as a kill would \\(the store is built for that\\)${
          delivery
            ? "; 1 delivery still running was cut short \\(their leases expire and the queue redelivers\\)"
            : ""
        }; end that transaction before the next start\\.$`,
      ),
    );
  } finally {
    clearTimeout(timer);
    await end(answer);
  }
}

// Each case waits out the drain's 8 s on the lock: the two run at once,
// each on a file and a process of its own, where they waited one after the
// other.
Deno.test(
  `main.ts ends within 10 s of SIGTERM, in one line that names the lock, while another program holds a write transaction on its Deno KV file: ${
    CASES.map(({ name }) => name).join("; ")
  }`,
  timeout(30_000, async (_t, signal) => {
    const results = await Promise.allSettled(
      CASES.map((one) => endsUnderLock(one, signal)),
    );
    const failed = results.flatMap((result, i) =>
      result.status === "rejected"
        ? [`${CASES[i]!.name}: ${String(result.reason)}`]
        : []
    );
    assert.deepEqual(failed, []);
  }),
);

Deno.test(
  "main.ts drains as ever, exit 0 and KV closed, under a lock that Deno KV's own upkeep has not met: its delivery finishes (the write refused as locked)",
  timeout(30_000, async (_t, signal) => {
    // No key expires: Deno KV's next deletion of expired keys is a minute away.
    const { service, lock, end } = await onFile({}, signal);
    let answer: Promise<number | null> | undefined;
    try {
      const base = await service.base();
      assert.ok(base, "main.ts ended before it served");
      await healthy(base);
      lock();
      answer = signedDelivery(base, SETTINGS.WEBHOOK_SECRET, "pi_free").then(
        async (res) => {
          await res.body?.cancel();
          return res.status;
        },
        () => null,
      );
      // Time for the delivery to be in flight, its write waiting on the
      // lock, before SIGTERM (one that came after would be refused as
      // draining): this costs the test nothing, as it ends when that
      // write is refused, 5 s after it began, whenever SIGTERM came.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const sentAt = performance.now();
      service.child.kill("SIGTERM");
      const { code, stdout, stderr } = await service.ended();
      const tookMs = Math.round(performance.now() - sentAt);
      assert.equal(code, 0, `${stdout}\n${stderr}`);
      assert.match(stdout, /relayer: drained; KV closed/);
      assert.equal(stderr, "");
      // The delivery's write waited its 5 s on the lock, was refused, and
      // the delivery answered before the exit: the queue retries it.
      assert.equal(await answer, 503);
      assert.ok(
        tookMs >= 3_000 && tookMs < STOPPED_WITHIN_MS,
        `ended ${tookMs} ms after SIGTERM, not once the delivery ended`,
      );
    } finally {
      await end(answer);
    }
  }),
);
