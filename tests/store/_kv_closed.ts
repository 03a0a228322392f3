/**
 * `KvStore` on a Deno KV handle closed under it, on any runtime: Deno's own
 * (`tests/store/kv_closed_handle_test.ts`) and `@deno/kv` on Node
 * (`tests/node/kv_contract_node.ts`), whose closed handle throws other
 * errors than Deno's. A call on the closed handle says so and what follows
 * (a write: nothing was written, marked so; a read: nothing was read,
 * marked so), and a commit in flight as the handle closed is worded too,
 * marked as nothing written only where it did not land.
 *
 * @module
 */

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type KvLike, KvStore } from "../../store/kv.ts";
import { closedKv } from "../../store/_closed_kv.ts";
import { isNotRead, isNotWritten } from "../../store/_not_written.ts";
import type { RegisterTest } from "./_contract.ts";

/** A Deno KV handle as `Deno.openKv` and `@deno/kv`'s `openKv` give it. */
type Opened = KvLike & { close(): void };

export const LEASE = { owner: "d-1", ttlMs: 30_000, now: 1 } as const;

/**
 * Each write of a store, on what `seed` made: a settling `pi_1` at
 * `version` with the lease of `LEASE.owner`, an authorized `pi_2` and the
 * dead letter of `pi_2/settle` at `letter`.
 */
export const WRITES: Record<
  string,
  (store: KvStore, at: { version: string; letter: string }) => Promise<unknown>
> = {
  createIntent: (store) => store.createIntent({ id: "pi_3" }),
  transition: (store, { version }) =>
    store.transition("pi_1", {
      from: "settling",
      to: "needs_review",
      version,
      at: 2,
    }),
  beginBroadcast: (store, { version }) =>
    store.beginBroadcast("pi_1", version, 2, { lease: LEASE }),
  recordBroadcast: (store, { version }) =>
    store.recordBroadcast("pi_1", version, {
      outcome: "sent",
      txHash: "0xabc",
      at: 2,
    }),
  recordHold: (store) => store.recordHold("pi_3_none"),
  voidHold: (store) => store.voidHold("pi_2"),
  captureHold: (store) => store.captureHold("pi_1"),
  admit: (store) => store.admit({ count: "pi_2/settle", now: 2 }),
  putDeadLetter: (store) =>
    store.putDeadLetter({
      jobId: "pi_1/settle",
      intentId: "pi_1",
      deliveries: 3,
      cause: "exhausted",
      reason: "no luck after 3 deliveries",
      resolution: "last broadcast unknown, needs review",
      lastError: "rpc timeout",
      poisonedAt: 2,
    }),
  releaseLease: (store) => store.releaseLease("pi_1", LEASE.owner),
  redrive: (store, { letter }) => store.redrive("pi_2/settle", letter),
};

/** Makes what {@linkcode WRITES} write on, through `store`. */
export async function seed(store: KvStore) {
  const settling = await store.createIntent({
    id: "pi_1",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
  });
  // Written ahead of a send, its lease kept across it.
  const leased = await store.beginBroadcast("pi_1", settling.version, 1, {
    lease: { ...LEASE, keep: true },
  });
  await store.createIntent({
    id: "pi_2",
    state: "authorized",
    hold: "pending",
  });
  await store.putDeadLetter({
    jobId: "pi_2/settle",
    intentId: "pi_2",
    deliveries: 3,
    cause: "exhausted",
    reason: "no luck after 3 deliveries",
    resolution: "job dropped, intent still authorized",
    lastError: "not authorized yet",
    poisonedAt: 1,
  });
  const letter = await store.getDeadLetter("pi_2/settle");
  return { version: leased.version, letter: letter!.version };
}

/** A write's error on a closed handle, after the runtime's own words. */
const CLOSED_WRITE =
  /^Cannot write to Deno KV as its handle is closed \((?:Deno|@deno\/kv): "[^"\n]+"\): nothing was written\. The service closes it as it stops; a running instance takes the queue's next delivery\.$/;

/** A read's error on a closed handle. */
const CLOSED_READ =
  /^Cannot read Deno KV as its handle is closed \((?:Deno|@deno\/kv): "[^"\n]+"\): nothing was read\./;

/** A commit's error as the handle closed under it. */
const CLOSED_UNDER =
  /^Cannot finish the write as Deno KV was closed under it \((?:Deno|@deno\/kv): "Database is closed\."\): it may have landed or not\./;

/**
 * Registers the tests for `KvStore` over the handles `open` gives.
 *
 * @param name What the tests' names start with.
 * @param open Opens the database at `path` (`":memory:"` or a file).
 * @param test Registers one test (`Deno.test`, or Node's runner).
 * @param cutShort The runtime's words for a commit cut short as the handle
 * closed, each of which a commit must meet (in 50 rounds at most).
 */
export function kvClosedTests(
  name: string,
  open: (path: string) => Promise<Opened>,
  test: RegisterTest,
  cutShort: readonly string[],
): void {
  test({
    name:
      `${name}: every write on a handle closed under the store says nothing was written and is marked so, on a store that saw the intent or another; every read says nothing was read and is marked so`,
    ignore: false,
  }, async () => {
    for (const [write, call] of Object.entries(WRITES)) {
      for (const saw of [true, false]) {
        const kv = await open(":memory:");
        const at = await seed(new KvStore(kv));
        const store = new KvStore(kv);
        if (saw) {
          for (const id of ["pi_1", "pi_2"]) await store.getIntent(id);
        }
        kv.close();
        const thrown = await call(store, at).then(() => null, (e) => e);
        const which = `${write} (${saw ? "seen" : "unseen"}): ${
          (thrown as Error | null)?.message
        }`;
        assert.match(
          (thrown as Error | null)?.message ?? "",
          CLOSED_WRITE,
          which,
        );
        assert.equal(isNotWritten(thrown), true, which);
        assert.equal(isNotRead(thrown), false, which);
      }
    }
    const kv = await open(":memory:");
    const store = new KvStore(kv);
    await seed(store);
    kv.close();
    for (
      const [read, call] of Object.entries({
        getIntent: () => store.getIntent("pi_1"),
        listDeadLetters: () => store.listDeadLetters({}),
        getDeadLetter: () => store.getDeadLetter("pi_2/settle"),
        deliveries: () => store.deliveries("pi_2/settle"),
        "deliveries (a job's count and its attempt's)": () =>
          store.deliveries("pi_2/settle", 2),
      })
    ) {
      const thrown = await call().then(() => null, (e) => e);
      const which = `${read}: ${(thrown as Error | null)?.message}`;
      assert.match((thrown as Error | null)?.message ?? "", CLOSED_READ, which);
      assert.equal(isNotRead(thrown), true, which);
      assert.equal(isNotWritten(thrown), false, which);
    }
  });

  test({
    name:
      `${name}: a read in flight as the handle closes says nothing was read, in the runtime's words without a backtrace, and is marked so`,
    ignore: false,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "relayer_kv_closed_"));
    try {
      // Reads in flight as the handle closes, until one is cut short as
      // the database closes under it (Deno's and @deno/kv's "Database is
      // closed.", not the closed handle's refusal before the call), or 50
      // rounds.
      const seen = new Set<string>();
      for (
        let round = 1;
        !seen.has("Database is closed.") && round <= 50;
        round++
      ) {
        const kv = await open(join(dir, `${round}.kv`));
        const store = new KvStore(kv);
        await seed(store);
        const calls = [
          () => store.getIntent("pi_1"),
          () => store.getDeadLetter("pi_2/settle"),
          () => store.deliveries("pi_2/settle"),
          () => store.listDeadLetters({}),
        ];
        const reads = Array.from(
          { length: 60 },
          (_, i) => calls[i % 4]!().then(() => null, (error) => error),
        );
        // Closed 0 to 4 ms after the reads began, or, every other round,
        // once the first read was answered: the others are then in the
        // back-end, where a timer on a loaded machine may fire before any
        // read reached it, or after every one was answered.
        if (round % 2 === 0) await Promise.race(reads);
        else await new Promise((resolve) => setTimeout(resolve, round % 5));
        kv.close();
        for (const error of await Promise.all(reads)) {
          if (error === null) continue;
          const which = String((error as Error).message);
          seen.add(
            ((error as Error).cause as Error | undefined)?.message?.split(
              "\n",
            )[0] ?? which,
          );
          assert.match(which, CLOSED_READ, which);
          assert.doesNotMatch(which, /\n|backtrace/i, which);
          assert.equal(isNotRead(error), true, which);
          assert.equal(isNotWritten(error), false, which);
        }
      }
      assert.ok(
        seen.has("Database is closed."),
        `in 50 rounds, no read was cut short as the database closed: ${
          [...seen].join(", ")
        }`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test({
    name:
      `${name}: a write in flight as the handle closes is worded, and marked as nothing written only if it did not land`,
    ignore: false,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "relayer_kv_closed_"));
    try {
      // Writes in flight as the handle closes, until some are cut short
      // before they reach the file and some as they reach it, in each of
      // the runtime's words (or 50 rounds): the file, opened again, says
      // which landed.
      const seen = new Set<string>();
      const all = ["not written", "may have landed", ...cutShort];
      for (
        let round = 1;
        !all.every((k) => seen.has(k)) && round <= 50;
        round++
      ) {
        const path = join(dir, `${round}.kv`);
        const kv = await open(path);
        const store = new KvStore(kv);
        const ids = Array.from({ length: 10 }, (_, i) => `pi_${i}`);
        // Reads ahead of them, so that on Node some commits reach
        // `@deno/kv`'s addon only as the handle closes (its "db not
        // found"), and others as the database closes under them.
        const reads = Array.from(
          { length: 20 },
          (_, i) => kv.getMany([["read", i]]).catch(() => null),
        );
        const answers = [
          // Straight to a commit, and through the store (a read, then one).
          ...ids.map((id) =>
            kv.atomic().set(["raw", id], 1).commit().then(
              () => null,
              (error) => closedKv(error, "write") ?? error,
            )
          ),
          ...ids.map((id) =>
            store.createIntent({ id }).then(() => null, (error) => error)
          ),
        ];
        kv.close();
        await Promise.all(reads);
        const settled = await Promise.all(answers);
        const again = await open(path);
        try {
          for (const [i, error] of settled.entries()) {
            if (error === null) continue;
            const id = ids[i % 10]!;
            const key = i < 10 ? ["raw", id] : ["relayer", "intent", id];
            const which = `${i < 10 ? "a commit" : "createIntent"} of ${id}: ${
              (error as Error).message
            }`;
            const [entry] = await again.getMany([key]);
            if (i < 10) {
              // The runtime's words, without a backtrace after them.
              const own = ((error as Error).cause ?? error) as Error;
              seen.add(own.message.split("\n")[0]!);
            }
            if (isNotWritten(error)) {
              seen.add("not written");
              assert.match((error as Error).message, CLOSED_WRITE, which);
              assert.equal(
                entry!.versionstamp,
                null,
                `${which}, yet it landed`,
              );
            } else {
              seen.add("may have landed");
              assert.match((error as Error).message, CLOSED_UNDER, which);
            }
          }
        } finally {
          again.close();
        }
      }
      assert.deepEqual(
        all.filter((k) => !seen.has(k)),
        [],
        `in 50 rounds, no write was cut short so: ${[...seen].join(", ")}`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
