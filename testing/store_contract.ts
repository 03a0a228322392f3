/**
 * The contract every {@linkcode Store} keeps, as a test suite: the one
 * `MemoryStore`, `KvStore` and `PostgresStore` pass. A store of your own (a
 * database this package does not ship) runs it too, from a three-line test
 * file; a store that gets a rule wrong (a lease, a version, `BusyError`
 * against `ConflictError`) type-checks, and only this suite tells.
 *
 * ```ts ignore
 * import { storeContract } from "@relayer/poison/testing";
 * storeContract("MyStore", () => Promise.resolve({ store: new MyStore(), close: () => {} }), { test: Deno.test });
 * ```
 *
 * The suite registers its tests with the function its caller hands it
 * (`Deno.test`; on Node and Bun an adapter of their own runner, as
 * docs/stores.md shows for `node:test`) and names `Deno` nowhere,
 * so on Node and Bun a store that needs a global `Deno` fails there as it
 * would in production.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type Broadcast,
  BusyError,
  ConflictError,
  type HoldState,
  INTENT_STATES,
  type IntentState,
  type Marks,
  type NewIntent,
  ReplayError,
  type Store,
  TRANSITIONS,
} from "../mod.ts";
import { deadLetter } from "./_fixtures.ts";
import { assertOptionNames } from "../policy/_validate.ts";

/**
 * An open store and how to close it.
 *
 * @example A fresh MemoryStore, which holds nothing to release
 * ```ts
 * import { MemoryStore } from "@relayer/poison";
 * import type { OpenStore } from "@relayer/poison/testing";
 * import assert from "node:assert/strict";
 *
 * const opened: OpenStore = { store: new MemoryStore(), close: () => {} };
 * assert.equal(await opened.store.getIntent("pi_0001"), null);
 * await opened.close();
 * ```
 */
export interface OpenStore {
  /** The store under test, fresh and empty. */
  readonly store: Store;
  /** Releases what `store` holds (a connection, a KV handle); called after each test. */
  close(): void | Promise<void>;
  /**
   * For stores whose writes read, then commit (Deno KV): runs `write` once,
   * right before the next commit, on `other`, another instance over the
   * same database (another process, as it were), so a test can land a
   * write between a method's read and its commit. Absent where a write
   * has no such gap.
   */
  readonly beforeNextCommit?: (
    write: (other: Store) => Promise<unknown>,
  ) => void;
}

/**
 * Opens a fresh, empty store.
 *
 * @example Each call a store of its own
 * ```ts
 * import { MemoryStore } from "@relayer/poison";
 * import type { OpenStoreFn } from "@relayer/poison/testing";
 * import assert from "node:assert/strict";
 *
 * const open: OpenStoreFn = () => Promise.resolve({ store: new MemoryStore(), close: () => {} });
 * const [a, b] = [await open(), await open()];
 * await a.store.createIntent({ id: "pi_0001", state: "created" });
 * assert.equal(await b.store.getIntent("pi_0001"), null);
 * ```
 */
export type OpenStoreFn = () => Promise<OpenStore>;

/**
 * What the contract uses of a test's context: Deno's `t.step`.
 *
 * @example A stand-in that runs each step at once
 * ```ts
 * import type { StepContext } from "@relayer/poison/testing";
 * import assert from "node:assert/strict";
 *
 * const ran: string[] = [];
 * const t: StepContext = {
 *   step: async (name, fn) => {
 *     await fn();
 *     ran.push(name);
 *   },
 * };
 * await t.step("one", () => {});
 * assert.deepEqual(ran, ["one"]);
 * ```
 */
export interface StepContext {
  /** Runs `fn` as a named step of the test: its failure fails the test. */
  step(name: string, fn: () => Promise<void> | void): Promise<unknown>;
}

/**
 * Registers one test, as `Deno.test({ name, ignore }, fn)` does: a test
 * whose `ignore` is true is reported skipped.
 *
 * @example Run the contract's tests on a runner of one's own
 * ```ts
 * import { MemoryStore } from "@relayer/poison";
 * import { type RegisterTest, storeContract } from "@relayer/poison/testing";
 * import assert from "node:assert/strict";
 *
 * const tests: (() => Promise<void>)[] = [];
 * const test: RegisterTest = ({ ignore }, fn) => {
 *   if (!ignore) tests.push(() => fn({ step: async (_name, step) => void await step() }));
 * };
 * storeContract("MemoryStore", () => Promise.resolve({ store: new MemoryStore(), close: () => {} }), { test });
 * assert.ok(tests.length > 50);
 * await tests[0]!(); // it throws if the store breaks the contract
 * ```
 */
export type RegisterTest = (
  definition: { name: string; ignore: boolean },
  fn: (t: StepContext) => Promise<void>,
) => void;

/**
 * How {@linkcode storeContract} runs.
 *
 * @example Deno's runner, for a store with no gap between a read and its commit
 * ```ts
 * import type { StoreContractOptions } from "@relayer/poison/testing";
 * import assert from "node:assert/strict";
 *
 * const names: string[] = [];
 * const options: StoreContractOptions = {
 *   test: ({ name }) => void names.push(name), // `Deno.test` in a test file
 *   commitGap: false,
 * };
 * assert.equal(options.commitGap, false);
 * ```
 */
export interface StoreContractOptions {
  /**
   * Registers each test: `Deno.test`, or an adapter of Node's or Bun's
   * runner (docs/stores.md, "A store of your own", shows `node:test`'s).
   * No default: the suite never reaches
   * for a global `Deno`, which would mask a store that needs one.
   */
  readonly test: RegisterTest;
  /**
   * Whether its writes read, then commit, so that `open` gives
   * `beforeNextCommit` and the test of that gap runs: a write landed in
   * it, or a give-up's mark a write's `unlessCounted` names, must fail the
   * commit (MemoryStore has no gap; PostgresStore's, between a write's
   * read and its flight, is closed by the flight's compare-and-set and its
   * `NOT EXISTS` on the marks, and raced in `postgres_sql_test.ts` and
   * `postgres_faults_test.ts`).
   *
   * @default {false}
   */
  readonly commitGap?: boolean;
}

/** The hold each state needs for the store to accept entering it. */
function holdFor(state: IntentState): HoldState | null {
  switch (state) {
    case "created":
      return null;
    case "settled":
      return "captured";
    case "failed":
      return "voided";
    default:
      return "pending";
  }
}

/**
 * `assert.rejects`'s check that an error is a `cls`, by `instanceof`: the
 * package's errors answer it for every copy of the package (a store built
 * against another version throws its own), where Deno's `node:assert`,
 * handed the class, compares prototypes and refuses them.
 */
function instanceOf(
  cls: typeof BusyError | typeof ConflictError | typeof ReplayError,
): (error: unknown) => boolean {
  return (error) => error instanceof cls;
}

/** A last broadcast the Sender declared `not_sent`: the chain is clean. */
const NOT_SENT = { outcome: "not_sent", at: 0 } as const;
/** A last broadcast the node accepted. */
const SENT = { outcome: "sent", txHash: "0xabc", at: 0 } as const;

/**
 * Refuses a store that `open` gave already in use: the same store, schema
 * or prefix given to each test, where every test after the first failed
 * on what the one before wrote ("Cannot create intent pi_1 as it exists"),
 * which did not say that `open` was the cause.
 */
async function assertFresh(name: string, store: Store): Promise<void> {
  if (await store.getIntent("pi_1") === null) return;
  throw new Error(
    `${name}: open() gave a store that is not empty (it holds intent pi_1): give each call a fresh, empty store (a new schema, database or key prefix), as every test of the contract writes the same ids`,
  );
}

/**
 * Registers the contract tests for a store.
 *
 * @example Run the contract against a store
 * ```ts
 * import { MemoryStore } from "@relayer/poison";
 * import { storeContract } from "@relayer/poison/testing";
 * import assert from "node:assert/strict";
 *
 * // In a test file, pass `Deno.test`; here the tests are only listed.
 * const names: string[] = [];
 * storeContract(
 *   "MemoryStore",
 *   () => Promise.resolve({ store: new MemoryStore(), close: () => {} }),
 *   { test: ({ name }) => void names.push(name) },
 * );
 * assert.ok(names.includes("MemoryStore keeps the ledger rules: authorize needs a hold, fail a void, settle a capture"));
 * ```
 *
 * @param name The store's name, prefixed to every test name.
 * @param open Opens a fresh, empty store.
 * @param options `test`, the function that registers each test, and
 * `commitGap`.
 * @throws {TypeError} If `open` or `options.test` is not a function, or
 * the options are not an object or name an option it does not read (a
 * misspelt `commitGap` would leave the test of the gap skipped).
 */
export function storeContract(
  name: string,
  open: OpenStoreFn,
  options: StoreContractOptions,
): void {
  // A misspelt `commitGap` would leave the test of the gap skipped, and a
  // missing `test` fail with the engine's words, in the first file a store
  // of one's own runs.
  assertOptionNames("run the store contract", options, ["test", "commitGap"], {
    example: "{ test: Deno.test }",
  });
  if (typeof options.test !== "function") {
    throw new TypeError(
      `Cannot run the store contract as 'test' must be the function that registers a test, such as Deno.test (on Node or Bun, an adapter of their runner): current value is ${typeof options
        .test}`,
    );
  }
  if (typeof open !== "function") {
    throw new TypeError(
      `Cannot run the store contract as 'open' must be a function that opens a fresh, empty store: current value is ${typeof open}`,
    );
  }
  const { test: register, commitGap = false } = options;
  const test = (title: string, body: (store: Store) => Promise<void>) =>
    register({ name: `${name} ${title}`, ignore: false }, async () => {
      const { store, close } = await open();
      try {
        await assertFresh(name, store);
        await body(store);
      } finally {
        await close();
      }
    });

  // Every method that writes an intent, with a write that lands between its
  // read and its commit: the commit itself must check what was read.
  register({
    name: `${name} checks at commit time what every write read`,
    ignore: !commitGap,
  }, async (t) => {
    const opened = await open();
    const { store } = opened;
    const { beforeNextCommit } = opened;
    try {
      await assertFresh(name, store);
      if (beforeNextCommit === undefined) {
        throw new Error(
          `${name}: commitGap is set, but open() gives no beforeNextCommit`,
        );
      }
      let n = 0;
      const settling = async () => {
        const id = `pi_race_${n++}`;
        const intent = await store.createIntent({
          id,
          state: "settling",
          hold: "pending",
          settlingSince: 0,
          mayHaveSent: false, // nothing left yet: every write may run
        });
        return { id, intent };
      };
      // The interloper: another delivery records a send meanwhile (state kept).
      const interlope = (id: string) =>
        beforeNextCommit(async (other) => {
          const now = (await other.getIntent(id))!;
          await other.recordBroadcast(id, now.version, {
            outcome: "sent",
            txHash: "0xother",
            at: 1,
          });
        });
      const cases: Record<
        string,
        (id: string, version: string) => Promise<unknown>
      > = {
        transition: (id, version) =>
          store.transition(id, {
            from: "settling",
            to: "needs_review",
            version,
            at: 2,
          }),
        beginBroadcast: (id, version) => store.beginBroadcast(id, version, 2),
        recordBroadcast: (id, version) =>
          store.recordBroadcast(id, version, { outcome: "not_sent", at: 2 }),
        voidHold: (id) => store.voidHold(id),
      };
      for (const [method, write] of Object.entries(cases)) {
        await t.step(method, async () => {
          const { id, intent } = await settling();
          interlope(id);
          await assert.rejects(
            write(id, intent.version),
            instanceOf(ConflictError),
          );
          const after = (await store.getIntent(id))!;
          assert.equal(
            after.lastBroadcast?.txHash,
            "0xother",
            "the interloper's write stands",
          );
          assert.equal(
            after.hold,
            "pending",
            "and nothing of the refused write",
          );
        });
      }
      await t.step(
        "recordBroadcast of a send that outlived its settling, lost to others' records: decided again",
        async () => {
          const { id, intent } = await settling();
          const ahead = await store.beginBroadcast(id, intent.version, 1);
          await store.transition(id, {
            from: "settling",
            to: "needs_review",
            version: ahead.version,
            at: 2,
          });
          // Two other late sends' records land before this one's commits
          // (its first may be one on what it saw at the send's version).
          const late = (other: Store, txHash: string) =>
            other.recordBroadcast(id, ahead.version, {
              outcome: "sent",
              txHash,
              at: 3,
            });
          beforeNextCommit(async (other) => {
            await late(other, "0xother1");
            beforeNextCommit((again) => late(again, "0xother2"));
          });
          const kept = await store.recordBroadcast(id, ahead.version, {
            outcome: "sent",
            txHash: "0xmine",
            at: 4,
          });
          assert.deepEqual(kept, await store.getIntent(id));
          assert.equal(kept.state, "needs_review");
          for (const txHash of ["0xother1", "0xmine"]) {
            assert.ok(kept.txHashes.includes(txHash), txHash);
          }
        },
      );
      await t.step("transition with unlessCounted", async () => {
        const id = `pi_race_${n++}`;
        const intent = await store.createIntent({
          id,
          state: "authorized",
          hold: "pending",
        });
        // A give-up marks the message meanwhile: the write ahead of the
        // send must not land behind it (a refusal, or a race lost: the
        // caller's fresh look then meets the mark).
        const mark = `gaveup/qstash/message/${id}`;
        beforeNextCommit((other) =>
          other.admit({ count: mark, now: 5, ttlMs: 1000 })
        );
        await assert.rejects(
          store.transition(id, {
            from: "authorized",
            to: "settling",
            version: intent.version,
            at: 10,
          }, {
            lease: { owner: "d1", ttlMs: 100, now: 10, keep: true },
            unlessCounted: [mark],
          }),
          instanceOf(ConflictError),
        );
        const after = (await store.getIntent(id))!;
        assert.deepEqual([after.state, after.version], [
          "authorized",
          intent.version,
        ]);
      });
      await t.step("captureHold", async () => {
        // Capturable: its tx was sent and nothing else is in flight.
        const id = `pi_race_${n++}`;
        await store.createIntent({
          id,
          state: "settling",
          hold: "pending",
          settlingSince: 0,
          lastBroadcast: SENT,
        });
        // Another delivery starts a send meanwhile: no capture may land
        // while one is in flight. The store decides again on what won
        // (holds are idempotent) and refuses it by the rules.
        beforeNextCommit(async (other) => {
          const now = (await other.getIntent(id))!;
          await other.beginBroadcast(id, now.version, 1);
        });
        await assert.rejects(
          store.captureHold(id),
          (error) =>
            error instanceof ConflictError &&
            /with a broadcast in flight/.test(error.message),
        );
        const after = (await store.getIntent(id))!;
        assert.deepEqual([after.broadcasting, after.hold], [1, "pending"]);
      });
      await t.step(
        "voidHold, lost to a send and a give-up's move to review",
        async () => {
          // Voidable when read (authorized); meanwhile the first send's
          // write-ahead and a give-up's move to review. The store decides
          // again on the payment in review, which a void alone must not
          // release: a tx of it may have left.
          const id = `pi_race_${n++}`;
          const intent = await store.createIntent({
            id,
            state: "authorized",
            hold: "pending",
          });
          beforeNextCommit(async (other) => {
            const settling = await other.transition(id, {
              from: "authorized",
              to: "settling",
              version: intent.version,
              at: 1,
            });
            await other.transition(id, {
              from: "settling",
              to: "needs_review",
              version: settling.version,
              at: 2,
            });
          });
          await assert.rejects(
            store.voidHold(id),
            (error) =>
              error instanceof ConflictError && error.refused &&
              /money may have moved/.test(error.message),
          );
          const after = (await store.getIntent(id))!;
          assert.deepEqual([after.state, after.hold], [
            "needs_review",
            "pending",
          ]);
        },
      );
      await t.step("voidHold, lost to a capture of the hold", async () => {
        // A payment in review whose one broadcast was declared not_sent:
        // its hold may be voided alone, or captured. Another operator
        // captures it meanwhile (the payee was paid): the void is decided
        // again on the captured hold, and refused, though the intent's own
        // record did not change.
        const id = `pi_race_${n++}`;
        await store.createIntent({
          id,
          state: "needs_review",
          hold: "pending",
          mayHaveSent: false,
        });
        beforeNextCommit((other) => other.captureHold(id));
        await assert.rejects(
          store.voidHold(id),
          (error) =>
            error instanceof ConflictError && error.refused &&
            /as it is captured/.test(error.message),
        );
        assert.equal((await store.getIntent(id))?.hold, "captured");
      });
      await t.step("putDeadLetter", async () => {
        beforeNextCommit((other) =>
          other.putDeadLetter(deadLetter("pi_x/settle", 5))
        );
        await assert.rejects(
          store.putDeadLetter(deadLetter("pi_x/settle", 4)),
          instanceOf(ConflictError),
        );
        assert.equal((await store.getDeadLetter("pi_x/settle"))?.poisonedAt, 5);
      });
      await t.step("putDeadLetter on the intent's version", async () => {
        const { id, intent } = await settling();
        interlope(id);
        await assert.rejects(
          store.putDeadLetter(
            { ...deadLetter(`${id}/settle`, 6), intentId: id },
            { intentVersion: intent.version },
          ),
          instanceOf(ConflictError),
        );
        assert.equal(await store.getDeadLetter(`${id}/settle`), null);
      });
      await t.step("putDeadLetter with marks", async () => {
        const { id, intent } = await settling();
        const mark = `givingup/qstash/message/${id}`;
        const letter = { ...deadLetter(`${id}/settle`, 6), intentId: id };
        const marks = { keys: [mark], now: 6 };
        // Lost to another write: neither the letter nor its mark lands.
        interlope(id);
        await assert.rejects(
          store.putDeadLetter(letter, { intentVersion: intent.version, marks }),
          instanceOf(ConflictError),
        );
        assert.equal(await store.getDeadLetter(`${id}/settle`), null);
        assert.equal(await store.deliveries(mark, 6), 0);
        // A count of the mark meanwhile is never lost: landed beside it,
        // or the letter's write refused with nothing written.
        beforeNextCommit((other) => other.admit({ count: mark, now: 6 }));
        const landed = await store.putDeadLetter(letter, { marks }).then(
          () => true,
          (error) => {
            if (!(error instanceof ConflictError)) throw error;
            return false;
          },
        );
        assert.equal(await store.deliveries(mark, 6), landed ? 2 : 1);
        assert.equal(
          (await store.getDeadLetter(`${id}/settle`))?.poisonedAt,
          landed ? 6 : undefined,
        );
      });
      await t.step("redrive", async () => {
        await store.putDeadLetter(deadLetter("pi_y/settle", 1));
        const read = (await store.getDeadLetter("pi_y/settle"))!;
        beforeNextCommit((other) =>
          other.putDeadLetter(deadLetter("pi_y/settle", 2))
        );
        await assert.rejects(
          store.redrive("pi_y/settle", read.version),
          instanceOf(ConflictError),
        );
        assert.equal((await store.getDeadLetter("pi_y/settle"))?.poisonedAt, 2);
      });
      // An authorized intent whose job a drop's letter left holding its
      // lease, owned by "drop", from 10 for `ttlMs`.
      const dropped = async (ttlMs: number) => {
        const id = `pi_race_${n++}`;
        const read = await store.createIntent({
          id,
          state: "authorized",
          hold: "pending",
        });
        await store.putDeadLetter({
          ...deadLetter(`${id}/settle`, 10),
          intentId: id,
        }, {
          intentVersion: read.version,
          lease: { owner: "drop", ttlMs, now: 10, keep: true },
        });
        return { id, held: (await store.getIntent(id))! };
      };
      await t.step(
        "releaseLease, lost to another owner's take of the lapsed lease",
        async () => {
          if (store.releaseLease === undefined) return;
          const { id, held } = await dropped(100);
          // The drop's lease lapsed; another delivery takes it meanwhile.
          beforeNextCommit((other) =>
            other.transition(id, {
              from: "authorized",
              to: "settling",
              version: held.version,
              at: 500,
            }, { lease: { owner: "next", ttlMs: 1000, now: 500, keep: true } })
          );
          await store.releaseLease(id, "drop");
          const settling = (await store.getIntent(id))!;
          assert.equal(settling.state, "settling");
          // The new owner's lease stands: a third owner is busy.
          await assert.rejects(
            store.recordBroadcast(id, settling.version, {
              outcome: "not_sent",
              at: 600,
            }, { lease: { owner: "third", ttlMs: 1000, now: 600 } }),
            instanceOf(BusyError),
          );
        },
      );
      await t.step(
        "releaseLease, lost to a give-up's letter that takes the lapsed lease",
        async () => {
          if (store.releaseLease === undefined) return;
          const { id, held } = await dropped(100);
          // A letter's write takes the lease without writing the intent.
          beforeNextCommit((other) =>
            other.putDeadLetter({
              ...deadLetter(`${id}/settle`, 500),
              intentId: id,
            }, {
              intentVersion: held.version,
              lease: { owner: "give-up", ttlMs: 1000, now: 500, keep: true },
            })
          );
          await store.releaseLease(id, "drop");
          assert.equal(
            (await store.getDeadLetter(`${id}/settle`))?.poisonedAt,
            500,
          );
          // The give-up's lease stands: another owner is busy.
          const after = (await store.getIntent(id))!;
          await assert.rejects(
            store.transition(id, {
              from: "authorized",
              to: "settling",
              version: after.version,
              at: 600,
            }, { lease: { owner: "next", ttlMs: 1000, now: 600 } }),
            instanceOf(BusyError),
          );
        },
      );
      await t.step(
        "releaseLease, beside a write of the intent that leaves its lease",
        async () => {
          if (store.releaseLease === undefined) return;
          const { id, held } = await dropped(1000);
          // A write that names no lease lands meanwhile: the release must
          // not write the intent back as it read it.
          beforeNextCommit((other) =>
            other.transition(id, {
              from: "authorized",
              to: "settling",
              version: held.version,
              at: 20,
            })
          );
          await store.releaseLease(id, "drop");
          const after = (await store.getIntent(id))!;
          assert.equal(after.state, "settling", "the other write stands");
          assert.equal(after.settlingSince, 20);
          // And the drop's lease is released: another owner writes.
          await store.recordBroadcast(id, after.version, {
            outcome: "not_sent",
            at: 30,
          }, { lease: { owner: "next", ttlMs: 1000, now: 30 } });
        },
      );
      await t.step("admit (a count retries, never loses one)", async () => {
        beforeNextCommit((other) =>
          other.admit({ count: "pi_z/settle", now: 0 })
        );
        assert.equal(await store.admit({ count: "pi_z/settle", now: 0 }), 2);
        assert.equal(await store.deliveries("pi_z/settle"), 2);
      });
    } finally {
      await opened.close();
    }
  });

  test("creates an intent and reads it back with its hold and no broadcast", async (store) => {
    const created = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    const read = await store.getIntent("pi_1");
    assert.deepEqual(read, created);
    assert.equal(read?.state, "authorized");
    assert.equal(read?.hold, "pending");
    assert.equal(read?.lastBroadcast, null);
    assert.equal(read?.broadcasting, null);
    assert.equal(read?.mayHaveSent, false);
    assert.equal(read?.settlingSince, null);
    assert.equal(typeof read?.version, "string");
    assert.equal(await store.getIntent("pi_missing"), null);
  });

  test("refuses to create an intent twice, or with a bad id or state, or a field it does not take", async (store) => {
    await store.createIntent({ id: "pi_1" });
    await assert.rejects(
      store.createIntent({ id: "pi_1" }),
      instanceOf(ConflictError),
    );
    await assert.rejects(store.createIntent({ id: "" }), TypeError);
    for (const id of ["pi 1", ".", "..", "p".repeat(129)]) {
      await assert.rejects(
        store.createIntent({ id }),
        /'id' must be 1-128 characters/,
        id,
      );
    }
    assert.equal(
      (await store.createIntent({ id: "p".repeat(128) })).state,
      "created",
    );
    await assert.rejects(
      store.createIntent({ id: "pi_4", hold: "held" as "pending" }),
      /'hold' must be "pending", "voided", "captured" or null/,
    );
    await assert.rejects(
      store.createIntent({ id: "pi_2", state: "paid" as IntentState }),
      TypeError,
    );
    await assert.rejects(
      store.createIntent({ id: "pi_3", state: "settling" }),
      /without a finite 'settlingSince'/,
    );
    // A misspelt field (an import script's typo) would create the intent
    // with its default: `satte` a created intent, `hld` one with no hold.
    // Named, never its value, with the fields taken; nothing is written.
    for (
      const [intent, field] of [
        [{ id: "pi_5", satte: "authorized" }, "satte"],
        [{ id: "pi_5", state: "authorized", hld: "voided" }, "hld"],
        [{
          id: "pi_5",
          state: "settling",
          settlingSince: 0,
          mayHavesent: false,
        }, "mayHavesent"],
        [{ id: "pi_5", ["x".repeat(50)]: "secret" }, "x".repeat(40)],
      ] as const
    ) {
      await assert.rejects(
        store.createIntent(intent as never),
        (error: Error) => {
          assert.ok(error instanceof TypeError, String(error));
          assert.equal(
            error.message,
            `Cannot create intent pi_5 as "${field}" is not a field of a new intent (id, state, hold, lastBroadcast, broadcasting, mayHaveSent, txHashes, settlingSince; the version of an intent read is ignored): check its spelling`,
          );
          return true;
        },
      );
    }
    assert.equal(await store.getIntent("pi_5"), null);
    // An intent as read, passed back (a copy to another store) is taken:
    // its version is the read's, and the new intent has its own.
    const read = await store.createIntent({
      id: "pi_6",
      state: "authorized",
      hold: "pending",
    });
    const copy = await store.createIntent({ ...read, id: "pi_7" });
    assert.deepEqual(
      [copy.state, copy.hold, copy.mayHaveSent, typeof copy.version],
      ["authorized", "pending", false, "string"],
    );
  });

  test("accepts every move of the transition table and rejects every other one", async (store) => {
    let n = 0;
    for (const from of INTENT_STATES) {
      for (const to of INTENT_STATES) {
        const id = `pi_${n++}`;
        const intent = await store.createIntent({
          id,
          state: from,
          // A terminal intent keeps its own hold: no store holds a failed
          // one with its hold pending or captured, nor a settled one with
          // its hold voided (I2, I6).
          hold: from === "settled" || from === "failed"
            ? holdFor(from)
            : holdFor(to) ?? holdFor(from),
          ...(from === "settling"
            ? {
              settlingSince: 0,
              // Only a payment whose broadcast stayed home can fail.
              lastBroadcast: to === "failed" ? NOT_SENT : SENT,
            }
            : {}),
        });
        const move = store.transition(id, {
          from,
          to,
          version: intent.version,
          at: 7,
        });
        if (TRANSITIONS[from].includes(to)) {
          const moved = await move;
          assert.equal(moved.state, to, `${from} → ${to}`);
          assert.notEqual(moved.version, intent.version);
        } else {
          // By rule (refused: true): the relayer retries only a race.
          await assert.rejects(
            move,
            (error) => error instanceof ConflictError && error.refused,
            `${from} → ${to} must be refused, by rule`,
          );
          assert.equal((await store.getIntent(id))?.state, from);
        }
      }
    }
  });

  test("records settlingSince and a write-ahead when an intent enters settling", async (store) => {
    const intent = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    const settling = await store.transition("pi_1", {
      from: "authorized",
      to: "settling",
      version: intent.version,
      at: 42,
    });
    assert.equal(settling.settlingSince, 42);
    assert.equal(settling.broadcasting, 42);
  });

  test("refuses a write to an intent that does not exist (refused: true): no retry can help it", async (store) => {
    const writes = [
      () =>
        store.transition("pi_missing", {
          from: "authorized",
          to: "settling",
          version: "1",
          at: 1,
        }),
      () => store.beginBroadcast("pi_missing", "1", 1),
      () =>
        store.recordBroadcast("pi_missing", "1", { outcome: "unknown", at: 1 }),
    ];
    for (const write of writes) {
      await assert.rejects(
        write(),
        (error) => error instanceof ConflictError && error.refused,
      );
    }
  });

  test("rejects a transition on a stale version or from the wrong state", async (store) => {
    const v1 = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    const v2 = await store.transition("pi_1", {
      from: "authorized",
      to: "settling",
      version: v1.version,
      at: 1,
    });
    await assert.rejects(
      store.transition("pi_1", {
        from: "authorized",
        to: "settling",
        version: v1.version,
        at: 2,
      }),
      instanceOf(ConflictError),
    );
    await assert.rejects(
      store.transition("pi_1", {
        from: "authorized",
        to: "settling",
        version: v2.version,
        at: 2,
      }),
      (error) =>
        error instanceof ConflictError && error.refused &&
        /as it is settling/.test(error.message),
    );
    await assert.rejects(
      store.transition("pi_missing", {
        from: "created",
        to: "authorized",
        version: "x",
        at: 2,
      }),
      instanceOf(ConflictError),
    );
  });

  test("sees a hold change as a new version of the intent", async (store) => {
    const v1 = await store.createIntent({ id: "pi_1", state: "created" });
    await store.recordHold("pi_1");
    await assert.rejects(
      store.transition("pi_1", {
        from: "created",
        to: "authorized",
        version: v1.version,
        at: 1,
      }),
      instanceOf(ConflictError),
    );
    const v2 = await store.getIntent("pi_1");
    const authorized = await store.transition("pi_1", {
      from: "created",
      to: "authorized",
      version: v2!.version,
      at: 1,
    });
    assert.equal(authorized.state, "authorized");
  });

  test("fails a settling intent only when every broadcast stayed home (I1), and broadcasts only behind a pending hold (I6)", async (store) => {
    // Each of these may have moved money, so the move to failed (with its
    // void) is refused, whoever asks: the store is the last line.
    const doubtful = {
      "a sent last broadcast": { lastBroadcast: SENT },
      "an unknown last broadcast": {
        lastBroadcast: { outcome: "unknown", error: "timeout", at: 0 },
      },
      "no broadcast on record": {},
      "a broadcast in flight": { lastBroadcast: NOT_SENT, broadcasting: 3 },
      // As the store's own write-ahead leaves it: nothing else may have left.
      "a broadcast in flight, imported as unsent": {
        lastBroadcast: NOT_SENT,
        broadcasting: 3,
        mayHaveSent: false,
      },
      "an earlier broadcast that may have left": {
        lastBroadcast: NOT_SENT,
        mayHaveSent: true,
      },
      "no broadcast on record, imported as unsent": { mayHaveSent: false },
    } as const;
    let n = 0;
    for (const [why, fields] of Object.entries(doubtful)) {
      const id = `pi_${n++}`;
      const intent = await store.createIntent({
        id,
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        ...fields,
      });
      await assert.rejects(
        store.transition(id, {
          from: "settling",
          to: "failed",
          version: intent.version,
          at: 1,
          ledger: "void",
          deadLetter: deadLetter(`${id}/settle`, 1),
        }),
        // By rule (refused: true): the relayer sends it to review at once.
        (error) => error instanceof ConflictError && error.refused,
        why,
      );
      const after = (await store.getIntent(id))!;
      assert.deepEqual([after.state, after.hold], ["settling", "pending"], why);
      assert.equal(await store.getDeadLetter(`${id}/settle`), null, why);
      // With the hold already voided (a resolution interrupted after its
      // void), no void rule stands in front: I1 alone refuses the move.
      const voidedId = `pi_${n++}`;
      const voidedFirst = await store.createIntent({
        id: voidedId,
        state: "settling",
        hold: "voided",
        settlingSince: 0,
        ...fields,
      });
      await assert.rejects(
        store.transition(voidedId, {
          from: "settling",
          to: "failed",
          version: voidedFirst.version,
          at: 1,
        }),
        /Cannot fail pi_\d+ unless its last broadcast was declared not_sent/,
        `${why}, hold voided`,
      );
      assert.equal((await store.getIntent(voidedId))!.state, "settling", why);
    }
    // A voided hold (an interrupted resolution) admits no new send.
    const voided = await store.createIntent({
      id: "pi_v",
      state: "settling",
      hold: "voided",
      settlingSince: 0,
      lastBroadcast: NOT_SENT,
    });
    await assert.rejects(
      store.beginBroadcast("pi_v", voided.version, 2),
      (error) =>
        error instanceof ConflictError && error.refused &&
        /nothing may be broadcast without reserved funds/.test(error.message),
    );
    assert.equal((await store.getIntent("pi_v"))?.broadcasting, null);
  });

  test("neither voids nor fails while a send is in flight, though nothing is on record as sent yet", async (store) => {
    // Reached by the store's own writes, as the relayer reaches them: the
    // move to settling (the first send's write-ahead), and a write-ahead
    // after a send declared not_sent. Each leaves `mayHaveSent` false and a
    // send in flight (`broadcasting`), which may be leaving right now.
    const authorized = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    const first = await store.transition("pi_1", {
      from: "authorized",
      to: "settling",
      version: authorized.version,
      at: 1,
    });
    const clean = await store.createIntent({
      id: "pi_2",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      lastBroadcast: NOT_SENT,
    });
    const rescue = await store.beginBroadcast("pi_2", clean.version, 1);
    for (const intent of [first, rescue]) {
      assert.deepEqual(
        [intent.mayHaveSent, intent.broadcasting],
        [false, 1],
        intent.id,
      );
      await assert.rejects(
        store.voidHold(intent.id),
        /money may have moved/,
        intent.id,
      );
      await assert.rejects(
        store.transition(intent.id, {
          from: "settling",
          to: "failed",
          version: intent.version,
          at: 2,
          ledger: "void",
        }),
        (error) => error instanceof ConflictError && error.refused,
        intent.id,
      );
      assert.deepEqual(await store.getIntent(intent.id), intent, intent.id);
    }
  });

  test("voids the hold of a payment in review that may have sent only in its move to failed, never alone", async (store) => {
    // Sent 0xa, then to review: a void alone skips the resolution's checks
    // of the chain, and 0xa confirming after it would leave the payee paid,
    // the payer's funds released, and a payment that can never settle.
    const refusedAlone = async (id: string, why: string) => {
      const before = (await store.getIntent(id))!;
      await assert.rejects(
        store.voidHold(id),
        (error) =>
          error instanceof ConflictError && error.refused &&
          /money may have moved/.test(error.message) &&
          /resolve/.test(error.message) &&
          /ledger "void"/.test(error.message),
        why,
      );
      assert.deepEqual(await store.getIntent(id), before, why);
    };
    const toReview = async (id: string, fields: Partial<NewIntent>) => {
      const settling = await store.createIntent({
        id,
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        ...fields,
      });
      return await store.transition(id, {
        from: "settling",
        to: "needs_review",
        version: settling.version,
        at: 2,
      });
    };
    const sent = { outcome: "sent", txHash: "0xa", at: 1 } as const;
    await toReview("pi_sent", { lastBroadcast: sent });
    await refusedAlone("pi_sent", "a sent tx on record");
    // A send in flight when it went to review may be leaving, even with
    // nothing on record as sent yet.
    await toReview("pi_flight", {
      lastBroadcast: NOT_SENT,
      broadcasting: 1,
      mayHaveSent: false,
    });
    await refusedAlone("pi_flight", "a broadcast in flight");
    // Imported in review with nothing on record (a caller's own migration):
    // it is there because money may have moved, and nothing says it did not.
    await store.createIntent({
      id: "pi_imported",
      state: "needs_review",
      hold: "pending",
    });
    await refusedAlone("pi_imported", "imported in review, nothing on record");
    // Failed without the void, it is refused with the way that works:
    // "void the hold first" would send a script to the void refused above.
    const unvoided = (await store.getIntent("pi_sent"))!;
    await assert.rejects(
      store.transition("pi_sent", {
        from: "needs_review",
        to: "failed",
        version: unvoided.version,
        at: 3,
      }),
      (error) =>
        error instanceof ConflictError && error.refused &&
        /ledger "void"/.test(error.message) &&
        !/void the hold first/.test(error.message),
    );
    assert.deepEqual(await store.getIntent("pi_sent"), unvoided);
    // 0xa confirmed: the hold is still there to capture.
    const paid = (await store.getIntent("pi_sent"))!;
    const settled = await store.transition("pi_sent", {
      from: "needs_review",
      to: "settled",
      version: paid.version,
      at: 3,
      ledger: "capture",
    });
    assert.deepEqual([settled.state, settled.hold], ["settled", "captured"]);
    // The chain shows none can land: failed with its hold voided, in one
    // write (what the resolve route does once it checked).
    const read = (await store.getIntent("pi_flight"))!;
    const failed = await store.transition("pi_flight", {
      from: "needs_review",
      to: "failed",
      version: read.version,
      at: 3,
      ledger: "void",
    });
    assert.deepEqual([failed.state, failed.hold], ["failed", "voided"]);
    assert.equal(await store.voidHold("pi_flight"), "voided", "idempotent");
    // In review with nothing that may have left, a void alone is allowed,
    // as on a settling intent.
    await store.createIntent({
      id: "pi_clean",
      state: "needs_review",
      hold: "pending",
      mayHaveSent: false,
    });
    assert.equal(await store.voidHold("pi_clean"), "voided");
  });

  test("refuses the move to settling, the first send's write-ahead, unless the hold is pending (I6)", async (store) => {
    // The payments API released an authorized intent's funds.
    await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    assert.equal(await store.voidHold("pi_1"), "voided");
    const voided = (await store.getIntent("pi_1"))!;
    await assert.rejects(
      store.transition("pi_1", {
        from: "authorized",
        to: "settling",
        version: voided.version,
        at: 1,
      }),
      (error) =>
        error instanceof ConflictError && error.refused &&
        /nothing may be broadcast without reserved funds/.test(error.message),
    );
    assert.deepEqual(await store.getIntent("pi_1"), voided);
  });

  test("answers a write on a stale version as a lost race (refused: false), even one the rules would refuse on what the writer read", async (store) => {
    // The writer read `created` with no hold; meanwhile the hold is recorded.
    await store.createIntent({ id: "pi_1", state: "created" });
    const read = (await store.getIntent("pi_1"))!;
    await store.recordHold("pi_1");
    const stale = store.transition("pi_1", {
      from: "created",
      to: "authorized",
      version: read.version,
      at: 1,
    });
    await assert.rejects(
      stale,
      (error) => error instanceof ConflictError && !error.refused,
    );
    // On its own version, the rule's refusal is marked as one.
    const fresh = await store.createIntent({ id: "pi_2", state: "created" });
    await assert.rejects(
      store.transition("pi_2", {
        from: "created",
        to: "authorized",
        version: fresh.version,
        at: 1,
      }),
      (error) => error instanceof ConflictError && error.refused,
    );
  });

  test("keeps every tx hash a send returned, so a rescue on record does not erase the tx that may confirm", async (store) => {
    const imported = await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      lastBroadcast: SENT,
    });
    assert.deepEqual(imported.txHashes, ["0xabc"]); // from the last broadcast
    assert.deepEqual(
      (await store.createIntent({ id: "pi_2" })).txHashes,
      [],
    );
    let intent = await store.beginBroadcast("pi_1", imported.version, 1);
    intent = await store.recordBroadcast("pi_1", intent.version, {
      outcome: "unknown",
      error: "timeout",
      at: 2,
    });
    intent = await store.beginBroadcast("pi_1", intent.version, 3);
    intent = await store.recordBroadcast("pi_1", intent.version, {
      outcome: "sent",
      txHash: "0xdef",
      at: 4,
    });
    intent = await store.beginBroadcast("pi_1", intent.version, 5);
    intent = await store.recordBroadcast("pi_1", intent.version, {
      outcome: "not_sent",
      error: "nonce too low",
      at: 6,
    });
    assert.deepEqual(intent.txHashes, ["0xabc", "0xdef"]);
    assert.deepEqual((await store.getIntent("pi_1"))?.txHashes, [
      "0xabc",
      "0xdef",
    ]);
    // The last broadcast stayed home, but an earlier tx may be the one that
    // confirmed: its hold can be captured.
    assert.equal(await store.captureHold("pi_1"), "captured");
  });

  test("keeps the newest 32 tx hashes, oldest first", async (store) => {
    const hashes = Array.from({ length: 40 }, (_, i) => `0x${i}`);
    let intent = await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      txHashes: hashes.slice(0, 35),
    });
    assert.deepEqual(intent.txHashes, hashes.slice(3, 35));
    for (const txHash of hashes.slice(35)) {
      intent = await store.beginBroadcast("pi_1", intent.version, 1);
      intent = await store.recordBroadcast("pi_1", intent.version, {
        outcome: "sent",
        txHash,
        at: 2,
      });
    }
    assert.deepEqual(intent.txHashes, hashes.slice(8));
    assert.deepEqual(
      (await store.getIntent("pi_1"))?.txHashes,
      hashes.slice(8),
    );
  });

  test("keeps the ledger rules: authorize needs a hold, fail a void, settle a capture", async (store) => {
    const created = await store.createIntent({ id: "pi_1", state: "created" });
    await assert.rejects(
      store.transition("pi_1", {
        from: "created",
        to: "authorized",
        version: created.version,
        at: 1,
      }),
      /before its hold is recorded/,
    );
    const base = {
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      lastBroadcast: NOT_SENT,
    } as const;
    const a = await store.createIntent({ id: "pi_2", ...base });
    await assert.rejects(
      store.transition("pi_2", {
        from: "settling",
        to: "failed",
        version: a.version,
        at: 1,
      }),
      /void the hold first/,
    );
    await assert.rejects(
      store.transition("pi_2", {
        from: "settling",
        to: "settled",
        version: a.version,
        at: 1,
      }),
      /capture the hold first/,
    );
    const failed = await store.transition("pi_2", {
      from: "settling",
      to: "failed",
      version: a.version,
      at: 1,
      ledger: "void",
    });
    assert.deepEqual([failed.state, failed.hold], ["failed", "voided"]);

    const b = await store.createIntent({
      id: "pi_3",
      ...base,
      lastBroadcast: SENT,
    });
    const settled = await store.transition("pi_3", {
      from: "settling",
      to: "settled",
      version: b.version,
      at: 1,
      ledger: "capture",
    });
    assert.deepEqual([settled.state, settled.hold], ["settled", "captured"]);

    // A voided hold can never be captured: nothing is settled behind it (I6).
    const c = await store.createIntent({
      id: "pi_4",
      state: "settling",
      hold: "voided",
      settlingSince: 0,
    });
    await assert.rejects(
      store.transition("pi_4", {
        from: "settling",
        to: "settled",
        version: c.version,
        at: 1,
        ledger: "capture",
      }),
      instanceOf(ConflictError),
    );
    assert.deepEqual([
      (await store.getIntent("pi_4"))?.state,
      (await store.getIntent("pi_4"))?.hold,
    ], ["settling", "voided"]);
  });

  test("takes a ledger change that rides in a move by the direct change's rules: no capture of a settling hold without a sent tx or with a send in flight, and no failure behind a capture", async (store) => {
    const capture = async (fields: Partial<NewIntent>, why: string) => {
      const id = `pi_${why.length}_${Object.keys(fields).length}`;
      const intent = await store.createIntent({
        id,
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        ...fields,
      });
      await assert.rejects(
        store.transition(id, {
          from: "settling",
          to: "settled",
          version: intent.version,
          at: 1,
          ledger: "capture",
        }),
        (error) => error instanceof ConflictError && error.refused,
        why,
      );
      assert.deepEqual(await store.getIntent(id), intent, why);
    };
    await capture({ lastBroadcast: NOT_SENT }, "every send stayed home");
    await capture({ lastBroadcast: SENT, broadcasting: 2 }, "a send in flight");
    // The money moved: the payment cannot fail, by rule.
    const captured = await store.createIntent({
      id: "pi_c",
      state: "needs_review",
      hold: "captured",
    });
    await assert.rejects(
      store.transition("pi_c", {
        from: "needs_review",
        to: "failed",
        version: captured.version,
        at: 1,
      }),
      /as its hold is captured/,
    );
    assert.deepEqual(await store.getIntent("pi_c"), captured);
  });

  test("settles a settling intent with a send in flight only in a move that names a tx on record as confirmed, and clears the write-ahead in the same write", async (store) => {
    const inFlight = {
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      lastBroadcast: SENT,
      txHashes: ["0x9", SENT.txHash],
      broadcasting: 2,
    } as const;
    const settle = (id: string, version: string, confirmed?: string) =>
      store.transition(id, {
        from: "settling",
        to: "settled",
        version,
        at: 3,
        ledger: "capture",
        ...(confirmed === undefined ? {} : { confirmed }),
      });
    const refused = async (
      fields: Partial<NewIntent>,
      confirmed: string | undefined,
      why: string,
    ) => {
      const id = `pi_r${why.length}`;
      const intent = await store.createIntent({ id, ...inFlight, ...fields });
      await assert.rejects(
        settle(id, intent.version, confirmed),
        (error) =>
          error instanceof ConflictError && error.refused &&
          /with a broadcast in flight/.test(error.message),
        why,
      );
      assert.deepEqual(await store.getIntent(id), intent, why);
    };
    await refused({}, undefined, "no tx named as confirmed");
    await refused({}, "0xnot-on-record", "a tx that is not on record");
    const read = await store.createIntent({ id: "pi_1", ...inFlight });
    const settled = await settle("pi_1", read.version, "0x9");
    assert.deepEqual(
      [settled.state, settled.hold, settled.broadcasting, settled.mayHaveSent],
      ["settled", "captured", null, true],
    );
    assert.deepEqual(settled.txHashes, inFlight.txHashes);
    assert.deepEqual(settled.lastBroadcast, SENT);
    assert.deepEqual(await store.getIntent("pi_1"), settled);
    // The capture alone still waits for the send: only the move that
    // settles on a confirmed tx clears it.
    const alone = await store.createIntent({ id: "pi_2", ...inFlight });
    await assert.rejects(
      store.captureHold("pi_2"),
      /with a broadcast in flight/,
    );
    assert.deepEqual(await store.getIntent("pi_2"), alone);
    // With nothing in flight, the move settles as it always did.
    const quiet = await store.createIntent({
      id: "pi_3",
      ...inFlight,
      broadcasting: null,
    });
    const done = await settle("pi_3", quiet.version, SENT.txHash);
    assert.deepEqual([done.state, done.hold], ["settled", "captured"]);
  });

  test("records and voids a hold idempotently when two callers do it at once", async (store) => {
    await store.createIntent({ id: "pi_1", state: "created" });
    assert.deepEqual(
      await Promise.all([store.recordHold("pi_1"), store.recordHold("pi_1")]),
      ["pending", "pending"],
    );
    assert.deepEqual(
      await Promise.all([store.voidHold("pi_1"), store.voidHold("pi_1")]),
      ["voided", "voided"],
    );
    assert.equal((await store.getIntent("pi_1"))!.hold, "voided");
  });

  test("refuses a time that is not a whole number of milliseconds, and an imported broadcast that is not one, with a TypeError before writing", async (store) => {
    const refused = (write: () => Promise<unknown>, name: string) =>
      assert.rejects(
        write(),
        (error) => error instanceof TypeError && error.message.includes(name),
        name,
      );
    const imported: [Partial<NewIntent>, string][] = [
      [
        { lastBroadcast: { outcome: "bogus" as "sent", at: 0 } },
        "'lastBroadcast.outcome'",
      ],
      [
        { lastBroadcast: { outcome: "unknown" } as Broadcast },
        "'lastBroadcast.at'",
      ],
      [{ settlingSince: 1.5 }, "'settlingSince'"],
      [{ broadcasting: 1.5 }, "'broadcasting'"],
      [
        { lastBroadcast: { outcome: "sent", at: 0 } as Broadcast },
        "'lastBroadcast.txHash'",
      ],
    ];
    for (const [fields, name] of imported) {
      await refused(
        () =>
          store.createIntent({
            id: "pi_1",
            state: "settling",
            hold: "pending",
            settlingSince: 0,
            ...fields,
          }),
        name,
      );
    }
    assert.equal(await store.getIntent("pi_1"), null);
    const created = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    const change = {
      from: "authorized",
      to: "settling",
      version: created.version,
    } as const;
    await refused(
      () => store.transition("pi_1", { ...change, at: 1000.5 }),
      "'settlingSince'",
    );
    await refused(
      () =>
        store.transition("pi_1", { ...change, at: 1000 }, {
          lease: { owner: "a", ttlMs: 1.5, now: 0, keep: true },
        }),
      "'lease.ttlMs'",
    );
    await refused(
      () =>
        store.transition("pi_1", { ...change, at: 1000 }, {
          claim: { key: "k", now: 0, expiresAt: 1000.5 },
        }),
      "'claim.expiresAt'",
    );
    assert.equal((await store.getIntent("pi_1"))!.version, created.version);
    await refused(
      () => store.admit({ count: "pi_1/settle", now: 1.5 }),
      "'now'",
    );
    assert.equal(await store.deliveries("pi_1/settle"), 0);
    await refused(
      () => store.putDeadLetter(deadLetter("pi_1/settle", 1.5)),
      "'poisonedAt'",
    );
    await refused(
      () => store.putDeadLetter(deadLetter("pi_1/settle", 1e300)),
      "'poisonedAt'",
    );
    await refused(
      () =>
        store.putDeadLetter({
          ...deadLetter("pi_1/settle", 1000),
          cause: "bogus" as "declared",
        }),
      "'cause'",
    );
    assert.equal(await store.getDeadLetter("pi_1/settle"), null);
  });

  test("refuses U+0000 or a lone surrogate in a key or id, and keeps free text holding either as U+FFFD", async (store) => {
    // PostgreSQL text holds no U+0000 and UTF-8 no lone surrogate: a key
    // kept with U+FFFD in its place would be another id's. Refused, with
    // nothing written; free text reads back as PostgreSQL keeps it.
    const typeError = (error: unknown) =>
      error instanceof Error && error.name === "TypeError";
    for (const key of ["pi_1\0/settle", "pi_1\uD800/settle"]) {
      await assert.rejects(store.admit({ count: key, now: 1 }), typeError, key);
      await assert.rejects(
        store.putDeadLetter(deadLetter(key, 1)),
        typeError,
        key,
      );
    }
    assert.equal(await store.deliveries("pi_1\uFFFD/settle"), 0);
    assert.deepEqual((await store.listDeadLetters()).items, []);
    const odd = "a\0b\uD83Dc\uDE00d\u{1F600}";
    const kept = "a\uFFFDb\uFFFDc\uFFFDd\u{1F600}";
    await store.putDeadLetter({
      ...deadLetter("pi_1/settle", 1),
      reason: odd,
      resolution: odd,
      lastError: odd,
    });
    const letter = await store.getDeadLetter("pi_1/settle");
    assert.deepEqual(
      [letter?.reason, letter?.resolution, letter?.lastError],
      [kept, kept, kept],
    );
  });

  test("lists dead letters of the same time by their job ids' code points", async (store) => {
    await store.putDeadLetter(deadLetter("\u{1F600}/settle", 10));
    await store.putDeadLetter(deadLetter("\uFF01/settle", 10));
    assert.deepEqual(
      (await store.listDeadLetters()).items.map((d) => d.jobId),
      ["\uFF01/settle", "\u{1F600}/settle"],
    );
    const first = await store.listDeadLetters({ limit: 1 });
    const rest = await store.listDeadLetters({ cursor: first.cursor });
    assert.deepEqual(rest.items.map((d) => d.jobId), ["\u{1F600}/settle"]);
    // A job id before every longer one it begins.
    await store.putDeadLetter(deadLetter("pi_1/settle/2", 5));
    await store.putDeadLetter(deadLetter("pi_1/settle", 5));
    assert.deepEqual(
      (await store.listDeadLetters()).items.slice(2).map((d) => d.jobId),
      ["pi_1/settle", "pi_1/settle/2"],
    );
  });

  test("voids, captures and records holds idempotently, and refuses to reverse them", async (store) => {
    await store.createIntent({ id: "pi_1", state: "created" });
    assert.equal(await store.recordHold("pi_1"), "pending");
    const v = (await store.getIntent("pi_1"))!.version;
    assert.equal(await store.recordHold("pi_1"), "pending");
    assert.equal(
      (await store.getIntent("pi_1"))!.version,
      v,
      "an idempotent write writes nothing",
    );
    assert.equal(await store.voidHold("pi_1"), "voided");
    assert.equal(await store.voidHold("pi_1"), "voided");
    await assert.rejects(
      store.captureHold("pi_1"),
      /Cannot capture the hold of pi_1 as it is voided/,
    );
    await assert.rejects(store.recordHold("pi_1"), instanceOf(ConflictError));

    await store.createIntent({
      id: "pi_2",
      state: "needs_review",
      hold: "pending",
    });
    assert.equal(await store.captureHold("pi_2"), "captured");
    assert.equal(await store.captureHold("pi_2"), "captured");
    await assert.rejects(store.voidHold("pi_2"), /as it is captured/);

    await store.createIntent({ id: "pi_3", state: "created" });
    await assert.rejects(store.voidHold("pi_3"), /as it is not recorded/);

    // A hold is recorded before authorization, never behind a terminal intent.
    await store.createIntent({
      id: "pi_4",
      state: "settling",
      settlingSince: 0,
    });
    await assert.rejects(
      store.recordHold("pi_4"),
      /holds are recorded before authorization/,
    );
    await assert.rejects(
      store.voidHold("pi_missing"),
      instanceOf(ConflictError),
    );
  });

  test("creates an intent that may have sent unless told otherwise: with a tx hash on record, settling with no broadcast on record (a crash may have hidden one), or in review (it is there because money may have moved)", async (store) => {
    const cases: [string, NewIntent, boolean][] = [
      ["authorized", { id: "pi_m1", state: "authorized" }, false],
      [
        "settling, nothing on record",
        { id: "pi_m2", state: "settling", settlingSince: 0 },
        true,
      ],
      [
        "settling, declared not sent, a tx hash on record",
        {
          id: "pi_m3",
          state: "settling",
          settlingSince: 0,
          lastBroadcast: { outcome: "not_sent", at: 1 },
          txHashes: ["0xold"],
        },
        true,
      ],
      [
        "settling, declared not sent, no tx hash",
        {
          id: "pi_m4",
          state: "settling",
          settlingSince: 0,
          lastBroadcast: { outcome: "not_sent", at: 1 },
        },
        false,
      ],
      [
        "settling, declared not sent, a broadcast in flight since",
        {
          id: "pi_m6",
          state: "settling",
          settlingSince: 0,
          lastBroadcast: { outcome: "not_sent", at: 1 },
          broadcasting: 2,
        },
        true,
      ],
      [
        "settling, nothing on record, told nothing left",
        {
          id: "pi_m5",
          state: "settling",
          settlingSince: 0,
          mayHaveSent: false,
        },
        false,
      ],
      [
        "needs_review, nothing on record",
        { id: "pi_m7", state: "needs_review", hold: "pending" },
        true,
      ],
      [
        "needs_review, declared not sent, no tx hash",
        {
          id: "pi_m8",
          state: "needs_review",
          hold: "pending",
          lastBroadcast: { outcome: "not_sent", at: 1 },
        },
        true,
      ],
      [
        "needs_review, nothing on record, told nothing left",
        {
          id: "pi_m9",
          state: "needs_review",
          hold: "pending",
          mayHaveSent: false,
        },
        false,
      ],
    ];
    for (const [name, intent, mayHaveSent] of cases) {
      assert.equal(
        (await store.createIntent(intent)).mayHaveSent,
        mayHaveSent,
        name,
      );
      assert.equal(
        (await store.getIntent(intent.id))?.mayHaveSent,
        mayHaveSent,
        name,
      );
    }
  });

  test("refuses an import told nothing may have left beside a send on record, and a created one with a send, with a TypeError that writes nothing", async (store) => {
    // Each record says a send may have left, and the caller that it did
    // not: the relayer reads mayHaveSent: false as a fresh nonce (an
    // authorized intent's first send, a send after one declared not_sent),
    // and the void and fail rules as a clean chain, so either pays twice or
    // releases the payer's funds while that send may still land.
    const UNKNOWN = { outcome: "unknown", error: "timeout", at: 0 } as const;
    const contradictory: [string, Omit<NewIntent, "id">, RegExp][] = [
      [
        "authorized, a send in flight",
        { state: "authorized", hold: "pending", broadcasting: 1 },
        /authorized with a broadcast in flight/,
      ],
      [
        "authorized, a tx hash",
        { state: "authorized", hold: "pending", txHashes: ["0xold"] },
        /a tx hash on record/,
      ],
      [
        "authorized, sent",
        { state: "authorized", hold: "pending", lastBroadcast: SENT },
        /its last broadcast is sent/,
      ],
      [
        "authorized, unknown",
        { state: "authorized", hold: "pending", lastBroadcast: UNKNOWN },
        /its last broadcast is unknown/,
      ],
      [
        "settling, sent",
        { state: "settling", settlingSince: 0, lastBroadcast: SENT },
        /its last broadcast is sent/,
      ],
      [
        "settling, unknown",
        { state: "settling", settlingSince: 0, lastBroadcast: UNKNOWN },
        /its last broadcast is unknown/,
      ],
      [
        "settling, declared not sent, a tx hash",
        {
          state: "settling",
          settlingSince: 0,
          lastBroadcast: NOT_SENT,
          txHashes: ["0xold"],
        },
        /a tx hash on record/,
      ],
      [
        "needs_review, sent",
        { state: "needs_review", lastBroadcast: SENT },
        /its last broadcast is sent/,
      ],
    ];
    let n = 0;
    for (const [why, fields, names] of contradictory) {
      const id = `pi_c${n++}`;
      await assert.rejects(
        store.createIntent({
          id,
          hold: "pending",
          ...fields,
          mayHaveSent: false,
        }),
        (error) =>
          error instanceof TypeError && names.test(error.message) &&
          /'mayHaveSent' false/.test(error.message) &&
          /Leave 'mayHaveSent' out/.test(error.message),
        why,
      );
      assert.equal(await store.getIntent(id), null, why);
      // What the refusal asks for: the record counts the send.
      const imported = await store.createIntent({
        id,
        hold: "pending",
        ...fields,
      });
      assert.equal(imported.mayHaveSent, true, why);
    }
    // A created intent has sent nothing: its first send follows its
    // authorization, and its void is not guarded as an authorized one's.
    const created: [string, Omit<NewIntent, "id">][] = [
      ["sent", { lastBroadcast: SENT }],
      ["unknown", { lastBroadcast: UNKNOWN }],
      ["a tx hash", { txHashes: ["0xold"] }],
      ["a send in flight", { broadcasting: 1 }],
      ["told it may have sent", { mayHaveSent: true }],
      ["a send in flight, told nothing left", {
        broadcasting: 1,
        mayHaveSent: false,
      }],
    ];
    for (const [why, fields] of created) {
      const id = `pi_c${n++}`;
      await assert.rejects(
        store.createIntent({
          id,
          state: "created",
          hold: "pending",
          ...fields,
        }),
        (error) =>
          error instanceof TypeError &&
          /as created with a send that may have left/.test(error.message) &&
          /Import it as authorized/.test(error.message),
        `created, ${why}`,
      );
      assert.equal(await store.getIntent(id), null, `created, ${why}`);
    }
    // As the store's own writes leave them: a first send in flight with
    // nothing before it, and one every send of which stayed home.
    const clean: [string, NewIntent][] = [
      ["settling, a first send in flight", {
        id: "pi_ok1",
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        broadcasting: 1,
        mayHaveSent: false,
      }],
      ["needs_review, a send in flight", {
        id: "pi_ok2",
        state: "needs_review",
        hold: "pending",
        broadcasting: 1,
        mayHaveSent: false,
      }],
      ["authorized, declared not sent", {
        id: "pi_ok3",
        state: "authorized",
        hold: "pending",
        lastBroadcast: NOT_SENT,
        mayHaveSent: false,
      }],
      ["created, declared not sent", {
        id: "pi_ok4",
        state: "created",
        lastBroadcast: NOT_SENT,
      }],
    ];
    for (const [why, intent] of clean) {
      assert.equal((await store.createIntent(intent)).mayHaveSent, false, why);
    }
  });

  test("records broadcasts as compare-and-set, and remembers a send that may have left", async (store) => {
    const i0 = await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      mayHaveSent: false,
    });
    const i1 = await store.beginBroadcast("pi_1", i0.version, 5);
    assert.deepEqual([i1.broadcasting, i1.mayHaveSent], [5, false]);
    const i2 = await store.recordBroadcast("pi_1", i1.version, {
      outcome: "not_sent",
      at: 6,
      error: "nonce",
    });
    assert.deepEqual(i2.lastBroadcast, {
      outcome: "not_sent",
      at: 6,
      error: "nonce",
    });
    assert.deepEqual([i2.broadcasting, i2.mayHaveSent], [null, false]);
    await assert.rejects(
      store.recordBroadcast("pi_1", i1.version, {
        outcome: "sent",
        txHash: "0x1",
        at: 7,
      }),
      instanceOf(ConflictError),
    );
    // A write-ahead over an unrecorded one: the earlier send may have left.
    const i3 = await store.beginBroadcast("pi_1", i2.version, 8);
    const i4 = await store.beginBroadcast("pi_1", i3.version, 9);
    assert.equal(i4.mayHaveSent, true);
    const i5 = await store.recordBroadcast("pi_1", i4.version, {
      outcome: "not_sent",
      at: 10,
    });
    assert.equal(i5.mayHaveSent, true, "a later not-sent does not unsend");
    // An unknown outcome may have left too, and a later not-sent does not
    // unsend it: the payment can no longer fail.
    const u0 = await store.createIntent({
      id: "pi_u",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      mayHaveSent: false,
    });
    let u = await store.recordBroadcast("pi_u", u0.version, {
      outcome: "unknown",
      error: "timeout",
      at: 1,
    });
    assert.equal(u.mayHaveSent, true, "an unknown outcome may have left");
    u = await store.beginBroadcast("pi_u", u.version, 2);
    u = await store.recordBroadcast("pi_u", u.version, {
      outcome: "not_sent",
      at: 3,
    });
    assert.equal(u.mayHaveSent, true, "a not-sent after an unknown");
    await assert.rejects(
      store.transition("pi_u", {
        from: "settling",
        to: "failed",
        version: u.version,
        at: 4,
        ledger: "void",
      }),
      (error) => error instanceof ConflictError && error.refused,
    );

    const j0 = await store.createIntent({
      id: "pi_2",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    const j1 = await store.recordBroadcast("pi_2", j0.version, {
      outcome: "sent",
      txHash: "0xa",
      at: 1,
    });
    assert.equal(j1.mayHaveSent, true);
    await assert.rejects(
      store.recordBroadcast(
        "pi_2",
        j1.version,
        { outcome: "sent", at: 2 } as never,
      ),
      /without its 'txHash'/,
    );

    const k0 = await store.createIntent({
      id: "pi_3",
      state: "authorized",
      hold: "pending",
    });
    await assert.rejects(
      store.beginBroadcast("pi_3", k0.version, 1),
      /not settling/,
    );
    await assert.rejects(
      store.recordBroadcast("pi_3", k0.version, { outcome: "unknown", at: 1 }),
      /not settling/,
    );
  });

  test("keeps the tx of a send that outlived its settling: its record on a payment in review, on the version the send read, takes the tx and moves the version, whatever lease is held, and changes no state or hold", async (store) => {
    // Refused or a race lost, as before this rule: nothing written.
    const refused = instanceOf(ConflictError);
    const created = await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      lastBroadcast: NOT_SENT,
      mayHaveSent: false,
    });
    // The send's write-ahead, under a lease that lapses while it runs.
    const ahead = await store.beginBroadcast("pi_1", created.version, 1, {
      lease: { owner: "send", ttlMs: 100, now: 1, keep: true },
    });
    // A give-up puts it in review, holding a lease of its own.
    const review = await store.transition("pi_1", {
      from: "settling",
      to: "needs_review",
      version: ahead.version,
      at: 500,
    }, { lease: { owner: "give-up", ttlMs: 1000, now: 500, keep: true } });
    // The move to review keeps the send's write-ahead: every instance's
    // resolve route reads it, and waits out a send that may still run.
    assert.equal(review.broadcasting, 1);
    const send = { lease: { owner: "send", ttlMs: 100, now: 600 } };
    // Declared not sent: nothing to keep, refused as before.
    await assert.rejects(
      store.recordBroadcast("pi_1", ahead.version, {
        outcome: "not_sent",
        at: 600,
      }, send),
      refused,
    );
    assert.deepEqual(await store.getIntent("pi_1"), review);
    // The send returns its tx: kept, though another's lease is live.
    const late = await store.recordBroadcast("pi_1", ahead.version, {
      outcome: "sent",
      txHash: "0xT",
      at: 600,
    }, send);
    assert.deepEqual(
      [late.state, late.hold, late.txHashes, late.mayHaveSent],
      ["needs_review", "pending", ["0xT"], true],
    );
    assert.equal(late.broadcasting, null);
    assert.deepEqual(late.lastBroadcast, {
      outcome: "sent",
      txHash: "0xT",
      at: 600,
    });
    assert.notEqual(late.version, review.version);
    assert.deepEqual(await store.getIntent("pi_1"), late);
    // An operator's fail read before it is a race lost: re-read, see 0xT.
    await assert.rejects(
      store.transition("pi_1", {
        from: "needs_review",
        to: "failed",
        version: review.version,
        at: 700,
        ledger: "void",
      }),
      (error) => error instanceof ConflictError && !error.refused,
    );
    // The give-up's lease stands: another owner is still busy.
    await assert.rejects(
      store.transition("pi_1", {
        from: "needs_review",
        to: "failed",
        version: late.version,
        at: 700,
        ledger: "void",
      }, { lease: { owner: "other", ttlMs: 1000, now: 700 } }),
      instanceOf(BusyError),
    );
    // The same tx again is kept once; an unknown outcome moves the version.
    const again = await store.recordBroadcast("pi_1", ahead.version, {
      outcome: "sent",
      txHash: "0xT",
      at: 650,
    });
    assert.deepEqual(again.txHashes, ["0xT"]);
    const unknown = await store.recordBroadcast("pi_1", review.version, {
      outcome: "unknown",
      at: 660,
      error: "timeout",
    });
    assert.deepEqual(
      [unknown.state, unknown.hold, unknown.txHashes, unknown.mayHaveSent],
      ["needs_review", "pending", ["0xT"], true],
    );
    assert.equal(unknown.lastBroadcast?.outcome, "unknown");
    assert.notEqual(unknown.version, again.version);
    // A send's version is never the review's own: that one is refused.
    await assert.rejects(
      store.recordBroadcast("pi_1", unknown.version, {
        outcome: "sent",
        txHash: "0xU",
        at: 670,
      }),
      refused,
    );
    // Resolved, the intent takes no record of any version.
    const settled = await store.transition("pi_1", {
      from: "needs_review",
      to: "settled",
      version: unknown.version,
      at: 800,
      ledger: "capture",
    });
    for (const version of [ahead.version, settled.version]) {
      await assert.rejects(
        store.recordBroadcast("pi_1", version, {
          outcome: "sent",
          txHash: "0xV",
          at: 900,
        }),
        refused,
      );
    }
    assert.deepEqual(await store.getIntent("pi_1"), settled);
    // Settling, a record on a stale version is a race lost, as before.
    const s0 = await store.createIntent({
      id: "pi_2",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    const s1 = await store.beginBroadcast("pi_2", s0.version, 1);
    const s2 = await store.beginBroadcast("pi_2", s1.version, 2);
    await assert.rejects(
      store.recordBroadcast("pi_2", s1.version, {
        outcome: "sent",
        txHash: "0xW",
        at: 3,
      }),
      (error) => error instanceof ConflictError && !error.refused,
    );
    assert.deepEqual(await store.getIntent("pi_2"), s2);
  });

  test("answers a version it never made as a race lost that writes nothing, the late record of a payment in review included: only a version the intent had is its past", async (store) => {
    const created = await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    const ahead = await store.beginBroadcast("pi_1", created.version, 1);
    const review = await store.transition("pi_1", {
      from: "settling",
      to: "needs_review",
      version: ahead.version,
      at: 2,
    });
    // Another intent, written after pi_1 and more often: its version was
    // never pi_1's.
    let other = await store.createIntent({
      id: "pi_2",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    for (let at = 1; at <= 6; at++) {
      other = await store.beginBroadcast("pi_2", other.version, at);
    }
    const never: Record<string, unknown> = {
      "garbage": "garbage",
      "empty": "",
      "v-1": "v-1",
      "a long one": "9".repeat(4096),
      "a large number": "999999",
      "the send's, misspelt": `0${ahead.version}`,
      "another intent's": other.version,
      "a number (a JavaScript caller)": Number(ahead.version),
      "undefined (a JavaScript caller)": undefined,
    };
    for (const [what, version] of Object.entries(never)) {
      // A send's tx, on a version no send of pi_1 read: a caller's bug (a
      // store of one's own, a tool), not a send that outlived its
      // settling. Written, it would move the version and put a tx on
      // record that no send of pi_1 returned.
      await assert.rejects(
        store.recordBroadcast("pi_1", version as string, {
          outcome: "sent",
          txHash: "0xNEVER",
          at: 3,
        }),
        (error) => error instanceof ConflictError && !error.refused,
        what,
      );
      assert.deepEqual(await store.getIntent("pi_1"), review, what);
    }
    // The send's own version, as read, is the intent's past: kept.
    const late = await store.recordBroadcast("pi_1", ahead.version, {
      outcome: "sent",
      txHash: "0xT",
      at: 3,
    });
    assert.deepEqual(late.txHashes, ["0xT"]);
    // The version read, misspelt, is not it either, nor is a number past
    // any a store keeps: a dead letter on the intent's version, or a
    // redrive of the letter read, writes nothing.
    await store.putDeadLetter(deadLetter("pi_2/settle", 5));
    const letter = (await store.getDeadLetter("pi_2/settle"))!;
    const huge = "9999999999999999999";
    const wrong = [
      ["misspelt", `0${late.version}`, `0${letter.version}`],
      ["a number past any kept", huge, huge],
    ] as const;
    for (const [what, intentVersion, letterVersion] of wrong) {
      await assert.rejects(
        store.putDeadLetter(deadLetter("pi_1/settle", 4), { intentVersion }),
        (error) => error instanceof ConflictError && !error.refused,
        `putDeadLetter, ${what}`,
      );
      await assert.rejects(
        store.redrive("pi_2/settle", letterVersion),
        instanceOf(ConflictError),
        `redrive, ${what}`,
      );
    }
    assert.equal(await store.getDeadLetter("pi_1/settle"), null);
    assert.deepEqual(await store.getDeadLetter("pi_2/settle"), letter);
    assert.deepEqual(await store.getIntent("pi_1"), late);
  });

  test("never forgets that a send may have left: the move to review keeps mayHaveSent, so the hold is not voided alone", async (store) => {
    // Each may have sent, by the store's own writes: an unknown outcome,
    // and a write-ahead over one never recorded (a crash mid-send).
    const unknown = await store.createIntent({
      id: "pi_unknown",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      mayHaveSent: false,
    });
    const timedOut = await store.recordBroadcast(
      "pi_unknown",
      unknown.version,
      {
        outcome: "unknown",
        error: "timeout",
        at: 1,
      },
    );
    const crashed = await store.createIntent({
      id: "pi_crashed",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      lastBroadcast: NOT_SENT,
    });
    const first = await store.beginBroadcast("pi_crashed", crashed.version, 1);
    const again = await store.beginBroadcast("pi_crashed", first.version, 2);
    const declared = await store.recordBroadcast("pi_crashed", again.version, {
      outcome: "not_sent",
      at: 3,
    });
    for (const intent of [timedOut, declared]) {
      assert.equal(intent.mayHaveSent, true, intent.id);
      const reviewed = await store.transition(intent.id, {
        from: "settling",
        to: "needs_review",
        version: intent.version,
        at: 4,
      });
      assert.equal(reviewed.mayHaveSent, true, intent.id);
      assert.equal(
        (await store.getIntent(intent.id))?.mayHaveSent,
        true,
        intent.id,
      );
      await assert.rejects(
        store.voidHold(intent.id),
        (error) =>
          error instanceof ConflictError && error.refused &&
          /money may have moved/.test(error.message),
        intent.id,
      );
      assert.equal((await store.getIntent(intent.id))?.hold, "pending");
    }
  });

  test("counts deliveries atomically, also under concurrent calls", async (store) => {
    const count = (jobId: string, now = 0) =>
      store.admit({ count: jobId, now });
    assert.equal(await store.deliveries("pi_1/settle"), 0);
    assert.equal(await count("pi_1/settle"), 1);
    assert.equal(await count("pi_1/settle"), 2);
    const concurrent = await Promise.all(
      Array.from({ length: 12 }, () => count("pi_2/settle")),
    );
    assert.deepEqual(
      [...concurrent].sort((a, b) => a! - b!),
      Array.from({ length: 12 }, (_, i) => i + 1),
    );
    assert.equal(await store.deliveries("pi_2/settle"), 12);
    assert.equal(await store.deliveries("pi_1/settle"), 2);
    assert.equal(await store.admit({ now: 0 }), null, "nothing to count");
  });

  test("forgets a delivery count 8 days after its last write", async (store) => {
    const day = 24 * 60 * 60 * 1000;
    assert.equal(await store.admit({ count: "pi_1/settle", now: 0 }), 1);
    assert.equal(await store.admit({ count: "pi_1/settle", now: 7 * day }), 2);
    // Counted from the last write: still alive just before 15 days.
    assert.equal(
      await store.admit({ count: "pi_1/settle", now: 15 * day - 1 }),
      3,
    );
    assert.equal(
      await store.admit({ count: "pi_1/settle", now: 23 * day }),
      1,
      "expired: counting starts again",
    );
  });

  test("counts from 1 again at the very instant a count lapses, when deliveries() reads it as 0", async (store) => {
    const day = 24 * 60 * 60 * 1000;
    assert.equal(await store.admit({ count: "pi_1/settle", now: 0 }), 1);
    assert.equal(await store.admit({ count: "pi_1/settle", now: 0 }), 2);
    assert.equal(await store.deliveries("pi_1/settle", 8 * day), 0);
    assert.equal(
      await store.admit({ count: "pi_1/settle", now: 8 * day }),
      1,
      "lapsed at its expiry: counting starts again",
    );
    assert.equal(await store.admit({ count: "pi_2/settle", now: 0 }), 1);
    assert.equal(
      await store.admit({ count: "pi_2/settle", now: 8 * day - 1 }),
      2,
      "alive a millisecond before",
    );
  });

  test("keeps intents, dead letters and counts apart by their whole id: case, every part, and the end of a long key", async (store) => {
    // Intent ids are case-sensitive (two payments), and so are queue
    // message ids. A give-up writes `givingup/…` before its drop and
    // `gaveup/…` once resolved: one read for the other is a repeated
    // give-up taken as resolved, and a job dropped with no letter. A
    // Pub/Sub source mark is long, and shares all but its end with the
    // marks of its subscription's other messages.
    const source = `gaveup/pubsub/source/projects/p/subscriptions/${
      "s".repeat(900)
    }@1700000000000#`;
    const keys = [
      "pi_A/settle",
      "pi_a/settle",
      "givingup/qstash/message/msg_1",
      "gaveup/qstash/message/msg_1",
      "gaveup/qstash/message/msg_A",
      "gaveup/qstash/message/msg_a",
      "gaveup/pubsub/message/msg_1",
      "gaveup/qstash/dlq/msg_1",
      `${source}pi_1`,
      `${source}pi_2`,
    ];
    for (const [n, key] of keys.entries()) {
      for (let k = 0; k <= n; k++) await store.admit({ count: key, now: 0 });
    }
    for (const [n, key] of keys.entries()) {
      assert.equal(await store.deliveries(key, 0), n + 1, key.slice(0, 40));
    }
    const upper = await store.createIntent({
      id: "pi_A",
      state: "authorized",
      hold: "pending",
    });
    const lower = await store.createIntent({ id: "pi_a" });
    assert.deepEqual(
      [(await store.getIntent("pi_A"))?.state, upper.state],
      ["authorized", "authorized"],
    );
    assert.equal((await store.getIntent("pi_a"))?.version, lower.version);
    await store.putDeadLetter(deadLetter("pi_A/settle", 1));
    await store.putDeadLetter(deadLetter("pi_a/settle", 2));
    assert.equal((await store.getDeadLetter("pi_A/settle"))?.poisonedAt, 1);
    assert.equal((await store.getDeadLetter("pi_a/settle"))?.poisonedAt, 2);
    // Each letter reset its own job's count only.
    assert.deepEqual(
      [
        await store.deliveries("pi_A/settle", 0),
        await store.deliveries("pi_a/settle", 0),
        await store.deliveries("givingup/qstash/message/msg_1", 0),
      ],
      [0, 0, 3],
    );
    assert.equal((await store.listDeadLetters()).items.length, 2);
  });

  test("resets, with a dead letter, the job's count and the one named resetCount, in putDeadLetter and in a transition", async (store) => {
    const count = (key: string) => store.admit({ count: key, now: 0 });
    for (const key of ["pi_1/settle", "pubsub/m-1", "pubsub/m-2"]) {
      await count(key);
      await count(key);
    }
    await store.putDeadLetter(deadLetter("pi_1/settle", 1), {
      resetCount: "pubsub/m-1",
    });
    assert.deepEqual(
      [
        await store.deliveries("pi_1/settle"),
        await store.deliveries("pubsub/m-1"),
        await store.deliveries("pubsub/m-2"),
      ],
      [0, 0, 2],
    );
    const i = await store.createIntent({
      id: "pi_2",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    await count("pi_2/settle");
    await store.transition("pi_2", {
      from: "settling",
      to: "needs_review",
      version: i.version,
      at: 2,
      deadLetter: { ...deadLetter("pi_2/settle", 2), intentId: "pi_2" },
    }, { resetCount: "pubsub/m-2" });
    assert.equal(await store.deliveries("pi_2/settle"), 0);
    assert.equal(await store.deliveries("pubsub/m-2"), 0);
    // Only a string names a count; nothing is written otherwise.
    await count("pubsub/m-3");
    await assert.rejects(
      store.putDeadLetter(deadLetter("pi_3/settle", 3), {
        resetCount: 7 as unknown as string,
      }),
      (error) =>
        error instanceof TypeError && error.message.includes("'resetCount'"),
    );
    assert.equal(await store.getDeadLetter("pi_3/settle"), null);
    assert.equal(await store.deliveries("pubsub/m-3"), 1);
  });

  test("keeps a count as long as its admission's ttlMs says, and refuses a ttlMs below 1 ms", async (store) => {
    const day = 24 * 60 * 60 * 1000;
    assert.equal(
      await store.admit({
        count: "gaveup/q/message/m1",
        now: 0,
        ttlMs: 32 * day,
      }),
      1,
    );
    assert.equal(await store.admit({ count: "pi_1/settle", now: 0 }), 1);
    // Past the default 8 days, only the one with its own ttlMs lives.
    assert.equal(await store.deliveries("pi_1/settle", 8 * day), 0);
    assert.equal(await store.deliveries("gaveup/q/message/m1", 8 * day), 1);
    assert.equal(
      await store.deliveries("gaveup/q/message/m1", 32 * day - 1),
      1,
    );
    assert.equal(await store.deliveries("gaveup/q/message/m1", 32 * day), 0);
    for (const ttlMs of [0, -1, 1.5]) {
      await assert.rejects(
        store.admit({ count: "pi_2/settle", now: 0, ttlMs }),
        TypeError,
      );
    }
    assert.equal(await store.deliveries("pi_2/settle", 0), 0);
  });

  test("reads a delivery count as 0 once it has lapsed, when given the time, swept or not", async (store) => {
    const day = 24 * 60 * 60 * 1000;
    await store.admit({ count: "gaveup/qstash/message/m1", now: 0 });
    await store.admit({ count: "gaveup/qstash/message/m1", now: day });
    // Lapses 8 days after its last write.
    assert.equal(
      await store.deliveries("gaveup/qstash/message/m1", 9 * day - 1),
      2,
    );
    assert.equal(
      await store.deliveries("gaveup/qstash/message/m1", 9 * day),
      0,
    );
    assert.equal(
      await store.deliveries("gaveup/qstash/message/m1", 20 * day),
      0,
    );
    // Without a time, what is on record (as before).
    assert.equal(await store.deliveries("gaveup/qstash/message/m1"), 2);
    assert.equal(await store.deliveries("nothing/settle", 0), 0);
    await assert.rejects(
      store.deliveries("gaveup/qstash/message/m1", 1.5),
      (error) => error instanceof TypeError && error.message.includes("'now'"),
    );
  });

  test("refuses a write whose unlessCounted names a count on record, and writes nothing", async (store) => {
    const i = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    const mark = "gaveup/qstash/message/m1";
    await store.admit({ count: mark, now: 0, ttlMs: 1000 });
    // Read first, as a delivery looks before it writes.
    assert.equal((await store.getIntent("pi_1"))?.version, i.version);
    const lease = { owner: "d1", ttlMs: 100, now: 10, keep: true };
    const move = {
      from: "authorized",
      to: "settling",
      version: i.version,
      at: 10,
    } as const;
    await assert.rejects(
      store.transition("pi_1", move, {
        lease,
        unlessCounted: ["gaveup/qstash/message/m0", mark],
      }),
      (error) => error instanceof ConflictError && error.refused,
    );
    // Any one key on record refuses it, first in the list or last.
    await assert.rejects(
      store.transition("pi_1", move, {
        lease,
        unlessCounted: [mark, "gaveup/qstash/message/m0"],
      }),
      (error) => error instanceof ConflictError && error.refused,
    );
    assert.equal((await store.getIntent("pi_1"))?.version, i.version);
    // Another message's marks do not refuse it, nor does a lapsed mark.
    const moved = await store.transition("pi_1", { ...move, at: 1000 }, {
      lease: { ...lease, now: 1000 },
      unlessCounted: [mark, "gaveup/qstash/message/m2"],
    });
    assert.equal(moved.state, "settling");
    // A rescue's write ahead of its send is refused alike.
    await store.admit({
      count: "gaveup/qstash/message/m3",
      now: 1000,
      ttlMs: 1000,
    });
    await assert.rejects(
      store.beginBroadcast("pi_1", moved.version, 1001, {
        lease: { ...lease, now: 1001 },
        unlessCounted: ["gaveup/qstash/message/m3"],
      }),
      (error) => error instanceof ConflictError && error.refused,
    );
    assert.equal((await store.getIntent("pi_1"))?.version, moved.version);
    // Nothing written means no lease taken and no replay record used: the
    // job published since, delivered now, writes ahead at once, and the
    // late copy's signature is still unclaimed.
    const j = await store.createIntent({
      id: "pi_2",
      state: "authorized",
      hold: "pending",
    });
    const m4 = "gaveup/qstash/message/m4";
    await store.admit({ count: m4, now: 2000, ttlMs: 1000 });
    const late = { key: "sig-late", now: 2000, expiresAt: 3000 };
    const ahead = { from: "authorized", to: "settling", at: 2000 } as const;
    await assert.rejects(
      store.transition("pi_2", { ...ahead, version: j.version }, {
        lease: { owner: "late", ttlMs: 1000, now: 2000, keep: true },
        claim: late,
        unlessCounted: [m4],
      }),
      (error) => error instanceof ConflictError && error.refused,
    );
    // Without a lease (admin), a mark on record refuses the write too.
    await assert.rejects(
      store.transition("pi_2", { ...ahead, version: j.version }, {
        unlessCounted: [m4],
      }),
      (error) => error instanceof ConflictError && error.refused,
    );
    assert.equal(await store.admit({ claim: late, now: 2000 }), null);
    const published = await store.transition("pi_2", {
      ...ahead,
      version: j.version,
    }, { lease: { owner: "d2", ttlMs: 1000, now: 2000, keep: true } });
    assert.equal(published.state, "settling");
  });

  test("refuses a replayed claim until it expires, in admit and in every write", async (store) => {
    const claim = { key: "sig-1", now: 0, expiresAt: 1000 };
    assert.equal(await store.admit({ claim, now: 0 }), null);
    await assert.rejects(
      store.admit({ claim: { ...claim, now: 999 }, now: 999 }),
      instanceOf(ReplayError),
    );
    // A refused admission counts nothing.
    await assert.rejects(
      store.admit({
        count: "pi_1/settle",
        claim: { ...claim, now: 1 },
        now: 1,
      }),
      instanceOf(ReplayError),
    );
    assert.equal(await store.deliveries("pi_1/settle"), 0);
    // Expired: the key may be claimed again (its signature is refused by age by then).
    assert.equal(
      await store.admit({
        claim: { ...claim, now: 1000, expiresAt: 2000 },
        now: 1000,
      }),
      null,
    );
    const i = await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    const used = { key: "sig-2", now: 0, expiresAt: 1000 };
    await store.admit({ claim: used, now: 0 });
    await assert.rejects(
      store.beginBroadcast("pi_1", i.version, 1, { claim: used }),
      instanceOf(ReplayError),
    );
    await assert.rejects(
      store.recordBroadcast("pi_1", i.version, { outcome: "unknown", at: 1 }, {
        claim: used,
      }),
      instanceOf(ReplayError),
    );
    await assert.rejects(
      store.transition("pi_1", {
        from: "settling",
        to: "needs_review",
        version: i.version,
        at: 1,
      }, { claim: used }),
      instanceOf(ReplayError),
    );
    await assert.rejects(
      store.putDeadLetter(deadLetter("pi_1/settle", 1), { claim: used }),
      instanceOf(ReplayError),
    );
    assert.deepEqual(await store.getIntent("pi_1"), i, "nothing written");
    assert.equal(await store.getDeadLetter("pi_1/settle"), null);
    // A claim rides in the write it was given to: once, and only if the write lands.
    const fresh = { key: "sig-3", now: 0, expiresAt: 1000 };
    await assert.rejects(
      store.beginBroadcast("pi_1", "stale", 1, { claim: fresh }),
      instanceOf(ConflictError),
    );
    const begun = await store.beginBroadcast("pi_1", i.version, 1, {
      claim: fresh,
    });
    assert.equal(begun.broadcasting, 1);
    await assert.rejects(
      store.admit({ claim: fresh, now: 2 }),
      instanceOf(ReplayError),
    );
    // A dead letter kept with a claim uses it up too.
    const kept = { key: "sig-4", now: 0, expiresAt: 1000 };
    await store.putDeadLetter(deadLetter("pi_2/settle", 1), { claim: kept });
    await assert.rejects(
      store.admit({ claim: kept, now: 2 }),
      instanceOf(ReplayError),
    );
    // A write refused for its replayed claim takes no lease either.
    await assert.rejects(
      store.recordBroadcast("pi_1", begun.version, {
        outcome: "unknown",
        at: 2,
      }, {
        claim: used,
        lease: { owner: "a", ttlMs: 60_000, now: 2, keep: true },
      }),
      instanceOf(ReplayError),
    );
    const other = await store.recordBroadcast("pi_1", begun.version, {
      outcome: "unknown",
      at: 2,
    }, { lease: { owner: "b", ttlMs: 60_000, now: 2, keep: false } });
    assert.equal(other.broadcasting, null);
  });

  test("accepts one of concurrent uses of a replay record, in admit and in writes", async (store) => {
    // A replay sent alongside the genuine request: a store that reads the
    // record, then writes it, in two steps admits both.
    const claim = { key: "sig-1", now: 0, expiresAt: 60_000 };
    const admits = await Promise.allSettled(
      Array.from(
        { length: 4 },
        () => store.admit({ count: "pi_1/settle", claim, now: 0 }),
      ),
    );
    assert.equal(admits.filter((r) => r.status === "fulfilled").length, 1);
    for (const r of admits) {
      if (r.status === "rejected") {
        assert.ok(r.reason instanceof ReplayError, String(r.reason));
      }
    }
    assert.equal(await store.deliveries("pi_1/settle"), 1);
    // The same record in writes to two intents: one lands.
    const ids = ["pi_a", "pi_b", "pi_c"];
    const created = await Promise.all(
      ids.map((id) =>
        store.createIntent({ id, state: "authorized", hold: "pending" })
      ),
    );
    const twice = { key: "sig-2", now: 0, expiresAt: 60_000 };
    const writes = await Promise.allSettled(
      ids.map((id, n) =>
        store.transition(id, {
          from: "authorized",
          to: "settling",
          version: created[n]!.version,
          at: 1,
        }, {
          lease: { owner: `d${n}`, ttlMs: 1000, now: 0, keep: true },
          claim: twice,
        })
      ),
    );
    // The others: a replay, or a race lost (the caller's fresh read then
    // meets the record), with nothing written.
    assert.equal(writes.filter((r) => r.status === "fulfilled").length, 1);
    for (const [n, r] of writes.entries()) {
      if (r.status === "fulfilled") continue;
      assert.ok(
        r.reason instanceof ReplayError ||
          (r.reason instanceof ConflictError && !r.reason.refused),
        String(r.reason),
      );
      assert.equal((await store.getIntent(ids[n]!))?.state, "authorized");
    }
  });

  test("a write that carries a lease refuses another owner's live lease, and keeps or releases its own", async (store) => {
    const i = await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    const a = { owner: "a", ttlMs: 1000, now: 0 };
    const ahead = await store.beginBroadcast("pi_1", i.version, 0, {
      lease: { ...a, keep: true },
    });
    const sent = { outcome: "unknown", at: 500 } as const;
    await assert.rejects(
      store.recordBroadcast("pi_1", ahead.version, sent, {
        lease: { owner: "b", ttlMs: 1000, now: 999 },
      }),
      instanceOf(BusyError),
    );
    // Per intent: another intent's writes are free.
    const other = await store.createIntent({
      id: "pi_2",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    await store.beginBroadcast("pi_2", other.version, 0, {
      lease: { owner: "b", ttlMs: 1000, now: 999 },
    });
    // The owner writes, and releases.
    const recorded = await store.recordBroadcast("pi_1", ahead.version, sent, {
      lease: { ...a, now: 500 },
    });
    // Released: b may write at once.
    const b1 = await store.beginBroadcast("pi_1", recorded.version, 600, {
      lease: { owner: "b", ttlMs: 1000, now: 600, keep: true },
    });
    // b's lease (to 1600) is live at 1599 and lapses at 1600.
    await assert.rejects(
      store.recordBroadcast("pi_1", b1.version, sent, {
        lease: { owner: "c", ttlMs: 1000, now: 1599 },
      }),
      instanceOf(BusyError),
    );
    const c1 = await store.recordBroadcast("pi_1", b1.version, sent, {
      lease: { owner: "c", ttlMs: 1000, now: 1600, keep: true },
    });
    // c renewed (kept) it: b, whose lease lapsed, is now the one refused.
    await assert.rejects(
      store.transition("pi_1", {
        from: "settling",
        to: "needs_review",
        version: c1.version,
        at: 1700,
      }, { lease: { owner: "b", ttlMs: 1000, now: 1700 } }),
      instanceOf(BusyError),
    );
    // A write without a lease (admin) ignores leases.
    const reviewed = await store.transition("pi_1", {
      from: "settling",
      to: "needs_review",
      version: c1.version,
      at: 1700,
    });
    assert.equal(reviewed.state, "needs_review");
  });

  test("gives a contested write-ahead to exactly one of many concurrent deliveries", async (store) => {
    const i = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    const results = await Promise.allSettled(
      Array.from(
        { length: 8 },
        (_, n) =>
          store.transition("pi_1", {
            from: "authorized",
            to: "settling",
            version: i.version,
            at: n,
          }, { lease: { owner: `o${n}`, ttlMs: 1000, now: 0, keep: true } }),
      ),
    );
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
    for (const r of results) {
      if (r.status === "rejected") {
        assert.ok(
          r.reason instanceof ConflictError || r.reason instanceof BusyError,
        );
      }
    }
  });

  test("lands concurrent write-aheads on many intents, each with its lease and replay record", async (store) => {
    // Enough at once to be grouped into one commit where a store groups,
    // with more checks than the strictest Deno KV back-end allows in one.
    const ids = Array.from({ length: 12 }, (_, n) => `pi_${n}`);
    const created = await Promise.all(
      ids.map((id) =>
        store.createIntent({ id, state: "authorized", hold: "pending" })
      ),
    );
    const results = await Promise.allSettled(
      ids.map((id, n) =>
        store.transition(id, {
          from: "authorized",
          to: "settling",
          version: created[n]!.version,
          at: 1,
        }, {
          lease: { owner: `d${n}`, ttlMs: 1000, now: 0, keep: true },
          claim: { key: `sig_${n}`, now: 0, expiresAt: 60_000 },
        })
      ),
    );
    const failed = results.find((r) => r.status === "rejected");
    assert.equal(failed, undefined, String(failed?.reason));
    for (const id of ids) {
      assert.equal((await store.getIntent(id))?.state, "settling");
    }
  });

  test("holds: voids and captures only where the intent's state allows", async (store) => {
    await store.createIntent({
      id: "pi_a",
      state: "authorized",
      hold: "pending",
    });
    await assert.rejects(
      store.captureHold("pi_a"),
      /only a settling or needs_review/,
    );
    assert.equal(
      await store.voidHold("pi_a"),
      "voided",
      "the payments API may release an authorized hold",
    );
    // A settling intent with nothing that may have left may be voided...
    await store.createIntent({
      id: "pi_b",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      broadcasting: null,
      mayHaveSent: false,
    });
    assert.equal(await store.voidHold("pi_b"), "voided");
    // ...but not once a broadcast may have left, or is under way.
    await store.createIntent({
      id: "pi_c",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      lastBroadcast: { outcome: "sent", txHash: "0xc", at: 1 },
    });
    await assert.rejects(store.voidHold("pi_c"), /money may have moved/);
    await store.createIntent({
      id: "pi_d",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      txHashes: ["0xd"],
      broadcasting: 5,
    });
    await assert.rejects(store.voidHold("pi_d"), /money may have moved/);
    // Nor once it settled, whatever its hold says.
    await store.createIntent({
      id: "pi_s",
      state: "settled",
      hold: "pending",
      mayHaveSent: false,
    });
    await assert.rejects(store.voidHold("pi_s"), /money may have moved/);
    // A settling hold is captured only behind a sent tx, with none in flight:
    // not while a send is under way, nor when every send stayed home.
    await assert.rejects(
      store.captureHold("pi_d"),
      /with a broadcast in flight/,
    );
    await store.createIntent({
      id: "pi_f",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      lastBroadcast: NOT_SENT,
    });
    await assert.rejects(
      store.captureHold("pi_f"),
      /without a sent broadcast on record/,
    );
    assert.equal(await store.captureHold("pi_c"), "captured");
    await store.createIntent({
      id: "pi_e",
      state: "needs_review",
      hold: "pending",
    });
    assert.equal(await store.captureHold("pi_e"), "captured");
    await assert.rejects(
      store.captureHold("pi_missing"),
      instanceOf(ConflictError),
    );
    await assert.rejects(
      store.voidHold("pi_missing"),
      instanceOf(ConflictError),
    );
    // Idempotent where the ledger already says so.
    assert.equal(await store.captureHold("pi_e"), "captured");
    assert.equal(await store.voidHold("pi_a"), "voided");
  });

  test("refuses voidHold on an authorized intent imported with a send that may have left, and voids a clean one", async (store) => {
    // Its tx on record may still land, and would pay the payee with the
    // payer's funds released: its job sends again on that nonce, and the
    // payment settles or goes to review, whose resolution voids the hold.
    const imported: Omit<NewIntent, "id">[] = [
      { lastBroadcast: { outcome: "sent", txHash: "0xold", at: 1 } },
      { lastBroadcast: { outcome: "unknown", at: 1, error: "timeout" } },
      { mayHaveSent: true },
      { txHashes: ["0xold"] },
      { broadcasting: 1 },
    ];
    for (const [n, fields] of imported.entries()) {
      const id = `pi_${n}`;
      await store.createIntent({
        id,
        state: "authorized",
        hold: "pending",
        ...fields,
      });
      await assert.rejects(
        store.voidHold(id),
        (error) =>
          error instanceof ConflictError && error.refused &&
          /money may have moved/.test(error.message),
        JSON.stringify(fields),
      );
      const after = (await store.getIntent(id))!;
      assert.equal(after.hold, "pending", JSON.stringify(fields));
      assert.equal(after.state, "authorized", JSON.stringify(fields));
    }
    // Declared unsent, or with no record at all: the payment is cancelled.
    for (const fields of [{}, { mayHaveSent: false }]) {
      const id = `pi_clean_${Object.keys(fields).length}`;
      await store.createIntent({
        id,
        state: "authorized",
        hold: "pending",
        ...fields,
      });
      assert.equal(await store.voidHold(id), "voided", JSON.stringify(fields));
    }
  });

  test("keeps dead letters, replaces one per job, and lists them newest first in pages", async (store) => {
    for (let i = 0; i < 7; i++) {
      await store.putDeadLetter(deadLetter(`pi_${i}/settle`, 1000 + i));
    }
    await store.putDeadLetter(deadLetter("pi_0/settle", 5000)); // poisoned again, later
    assert.equal((await store.getDeadLetter("pi_0/settle"))?.poisonedAt, 5000);
    assert.equal(await store.getDeadLetter("pi_9/settle"), null);

    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Awaited<ReturnType<Store["listDeadLetters"]>> = await store
        .listDeadLetters({ limit: 3, cursor });
      assert.ok(page.items.length <= 3);
      seen.push(...page.items.map((d) => d.jobId));
      cursor = page.cursor;
    } while (cursor !== null);
    assert.deepEqual(seen, [
      "pi_0/settle",
      "pi_6/settle",
      "pi_5/settle",
      "pi_4/settle",
      "pi_3/settle",
      "pi_2/settle",
      "pi_1/settle",
    ]);
    await assert.rejects(store.listDeadLetters({ limit: 0 }), RangeError);
    await assert.rejects(store.listDeadLetters({ limit: 1001 }), RangeError);
    assert.equal(
      (await store.listDeadLetters({ limit: 1000 })).items.length,
      7,
    );
  });

  test("keeps what it stored whatever a caller does to what it passed or read", async (store) => {
    const broadcast = { outcome: "sent" as const, txHash: "0xabc", at: 1 };
    await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      lastBroadcast: broadcast,
    });
    const letter = {
      ...deadLetter("pi_1/settle", 9),
      queue: { queue: "qstash", messageId: "msg_1" },
    };
    await store.putDeadLetter(letter);
    // Changed where they can be (a store may hand out frozen objects).
    const change = (object: object, field: string, value: unknown) => {
      try {
        (object as Record<string, unknown>)[field] = value;
      } catch {
        // Frozen: nothing to change.
      }
    };
    change(broadcast, "txHash", "0xchanged");
    change(letter, "reason", "changed");
    change(letter.queue, "messageId", "changed");
    const read = (await store.getIntent("pi_1"))!;
    change(read.lastBroadcast!, "txHash", "0xchanged");
    const stored = (await store.getDeadLetter("pi_1/settle"))!;
    change(stored, "reason", "changed");
    change(stored.queue!, "messageId", "changed");
    const [listed] = (await store.listDeadLetters()).items;
    change(listed!, "lastError", "changed");
    assert.equal(
      (await store.getIntent("pi_1"))!.lastBroadcast?.txHash,
      "0xabc",
    );
    const again = (await store.getDeadLetter("pi_1/settle"))!;
    assert.equal(again.reason, deadLetter("pi_1/settle", 9).reason);
    assert.equal(again.lastError, deadLetter("pi_1/settle", 9).lastError);
    assert.equal(again.queue?.messageId, "msg_1");
    // Nor does the next write, which a store may build on what it read.
    const moved = await store.transition("pi_1", {
      from: "settling",
      to: "needs_review",
      version: read.version,
      at: 2,
    });
    change(moved.lastBroadcast!, "txHash", "0xchanged");
    change(moved.txHashes, "0", "0xchanged");
    assert.equal(moved.lastBroadcast?.txHash, "0xabc");
    const after = (await store.getIntent("pi_1"))!;
    assert.equal(after.lastBroadcast?.txHash, "0xabc");
    assert.deepEqual(after.txHashes, ["0xabc"]);
  });

  test("ends the pages with a null cursor when the last page is full, and pages never repeat a letter", async (store) => {
    for (let i = 0; i < 4; i++) {
      await store.putDeadLetter(deadLetter(`pi_${i}/settle`, 1000 + i));
    }
    const first = await store.listDeadLetters({ limit: 2 });
    assert.deepEqual(first.items.map((d) => d.jobId), [
      "pi_3/settle",
      "pi_2/settle",
    ]);
    assert.notEqual(first.cursor, null);
    const last = await store.listDeadLetters({
      limit: 2,
      cursor: first.cursor,
    });
    assert.deepEqual(last.items.map((d) => d.jobId), [
      "pi_1/settle",
      "pi_0/settle",
    ]);
    assert.equal(last.cursor, null);
    const all = await store.listDeadLetters({ limit: 4 });
    assert.equal(all.items.length, 4);
    assert.equal(all.cursor, null);
  });

  test("refuses a cursor it did not return with a TypeError naming 'cursor', on an empty store too", async (store) => {
    const bad = [
      "🙂",
      "null",
      "W10=",
      "12",
      "1000|",
      "|pi_1/settle",
      "1e3|pi_1/settle",
      "9007199254740993|pi_1/settle",
      "1000|pi_1\0/settle",
    ];
    for (const cursor of bad) {
      await assert.rejects(
        store.listDeadLetters({ cursor }),
        (error) =>
          error instanceof TypeError && error.message.includes("'cursor'"),
        cursor.slice(0, 20),
      );
    }
    await store.putDeadLetter(deadLetter("pi_1/settle", 1000));
    for (const cursor of bad) {
      await assert.rejects(store.listDeadLetters({ cursor }), TypeError);
    }
  });

  test("goes on from a cursor whose letter is gone, and lists the letters after it once", async (store) => {
    for (let i = 0; i < 4; i++) {
      await store.putDeadLetter(deadLetter(`pi_${i}/settle`, 1000 + i));
    }
    // Two letters at the same time: the job id orders them.
    await store.putDeadLetter(deadLetter("pi_2b/settle", 1002));
    const first = await store.listDeadLetters({ limit: 2 });
    assert.deepEqual(first.items.map((d) => d.jobId), [
      "pi_3/settle",
      "pi_2/settle",
    ]);
    const gone = await store.getDeadLetter("pi_2/settle");
    await store.redrive("pi_2/settle", gone!.version);
    const rest = await store.listDeadLetters({ cursor: first.cursor });
    assert.deepEqual(rest.items.map((d) => d.jobId), [
      "pi_2b/settle",
      "pi_1/settle",
      "pi_0/settle",
    ]);
    assert.equal(rest.cursor, null);
  });

  test("keeps a dead letter only while its intent is at the version given, and writes nothing of it otherwise", async (store) => {
    const read = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    await store.admit({ count: "pi_1/settle", now: 0 });
    // Another delivery moves the intent on after this one read it.
    await store.transition("pi_1", {
      from: "authorized",
      to: "settling",
      version: read.version,
      at: 1,
    });
    const claim = { key: "sig-1", now: 0, expiresAt: 1000 };
    await assert.rejects(
      store.putDeadLetter(deadLetter("pi_1/settle", 2), {
        intentVersion: read.version,
        claim,
      }),
      (error) => error instanceof ConflictError && !error.refused,
    );
    assert.equal(await store.getDeadLetter("pi_1/settle"), null);
    assert.equal(await store.deliveries("pi_1/settle"), 1, "count kept");
    assert.equal(await store.admit({ claim, now: 0 }), null, "claim not used");
    // Nor with a lease, which it takes only if the letter is kept.
    await assert.rejects(
      store.putDeadLetter(deadLetter("pi_1/settle", 2), {
        intentVersion: read.version,
        lease: { owner: "give-up", ttlMs: 1000, now: 0, keep: true },
      }),
      (error) => error instanceof ConflictError && !error.refused,
    );
    assert.equal(await store.getDeadLetter("pi_1/settle"), null);
    // Nor with the version alone (a delivery without a replay record).
    await assert.rejects(
      store.putDeadLetter(deadLetter("pi_1/settle", 2), {
        intentVersion: read.version,
      }),
      (error) => error instanceof ConflictError && !error.refused,
    );
    assert.equal(await store.getDeadLetter("pi_1/settle"), null);
    assert.equal(await store.deliveries("pi_1/settle"), 1, "count kept");
    // No lease taken: the delivery that moved it writes on at once.
    const moved = (await store.getIntent("pi_1"))!;
    const now = await store.beginBroadcast("pi_1", moved.version, 1, {
      lease: { owner: "delivery", ttlMs: 1000, now: 1 },
    });
    // At the version read now, it is kept.
    await store.putDeadLetter(deadLetter("pi_1/settle", 3), {
      intentVersion: now.version,
    });
    assert.equal((await store.getDeadLetter("pi_1/settle"))?.poisonedAt, 3);
    assert.equal(await store.deliveries("pi_1/settle"), 0);
  });

  test("keeps a dead letter with a lease: held, it refuses another's write-ahead; another's live lease refuses the letter", async (store) => {
    const read = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    const giveUp = { owner: "give-up", ttlMs: 1000, now: 10, keep: true };
    await store.putDeadLetter(deadLetter("pi_1/settle", 10), {
      intentVersion: read.version,
      lease: giveUp,
    });
    assert.equal((await store.getDeadLetter("pi_1/settle"))?.poisonedAt, 10);
    // A delivery that read the intent before the letter: no write-ahead
    // while the lease is held, from the version it read or a fresh one.
    const fresh = (await store.getIntent("pi_1"))!;
    for (const version of new Set([read.version, fresh.version])) {
      await assert.rejects(
        store.transition("pi_1", {
          from: "authorized",
          to: "settling",
          version,
          at: 20,
        }, { lease: { owner: "delivery", ttlMs: 1000, now: 20, keep: true } }),
        (error) =>
          error instanceof BusyError ||
          (error instanceof ConflictError && !error.refused),
      );
    }
    assert.equal((await store.getIntent("pi_1"))?.state, "authorized");
    // Held until now + ttlMs, as a delivery's own lease is: a store that
    // lets it lapse sooner opens the window the drop's lease closes.
    const later = (await store.getIntent("pi_1"))!;
    const ahead = (now: number) =>
      store.transition("pi_1", {
        from: "authorized",
        to: "settling",
        version: later.version,
        at: now,
      }, { lease: { owner: "delivery", ttlMs: 1000, now, keep: true } });
    await assert.rejects(ahead(1009), instanceOf(BusyError));
    // Once it lapses, a delivery acts.
    await ahead(1010);
    // Another's live lease refuses a letter that carries one: nothing kept,
    // its replay record unused (the give-up, answered busy, is retried).
    const settling = (await store.getIntent("pi_1"))!;
    const claim = { key: "sig-give-up-2", now: 1020, expiresAt: 60_000 };
    await assert.rejects(
      store.putDeadLetter(deadLetter("pi_1/settle", 1020), {
        intentVersion: settling.version,
        lease: { owner: "give-up-2", ttlMs: 1000, now: 1020, keep: true },
        claim,
      }),
      instanceOf(BusyError),
    );
    assert.equal((await store.getDeadLetter("pi_1/settle"))?.poisonedAt, 10);
    assert.equal(await store.admit({ claim, now: 1020 }), null);
    // A lease needs the version read, and an intent that exists.
    await assert.rejects(
      store.putDeadLetter(deadLetter("pi_1/settle", 1030), {
        lease: { owner: "give-up-2", ttlMs: 1000, now: 1030, keep: true },
      }),
      TypeError,
    );
    await assert.rejects(
      store.putDeadLetter(deadLetter("pi_9/settle", 5), {
        intentVersion: settling.version,
        lease: { owner: "give-up", ttlMs: 1000, now: 5, keep: true },
      }),
      instanceOf(ConflictError),
    );
    assert.equal(await store.getDeadLetter("pi_9/settle"), null);
    assert.equal((await store.getDeadLetter("pi_1/settle"))?.poisonedAt, 10);
  });

  test("releases a lease only for its owner, live or after another's write, and moves the intent's version, nothing else", async (store) => {
    // Optional: a store without it holds a drop's lease until it lapses.
    if (store.releaseLease === undefined) return;
    const read = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    await store.putDeadLetter(deadLetter("pi_1/settle", 10), {
      intentVersion: read.version,
      lease: { owner: "drop", ttlMs: 1000, now: 10, keep: true },
    });
    const held = (await store.getIntent("pi_1"))!;
    const ahead = (owner: string, now: number, version: string) =>
      store.transition("pi_1", {
        from: "authorized",
        to: "settling",
        version,
        at: now,
      }, { lease: { owner, ttlMs: 1000, now, keep: true } });
    // Another owner's release leaves the lease held, and the version.
    await store.releaseLease("pi_1", "delivery");
    assert.equal((await store.getIntent("pi_1"))?.version, held.version);
    await assert.rejects(
      ahead("delivery", 20, held.version),
      instanceOf(BusyError),
    );
    // Its owner's frees it at once and moves the intent's version: a write
    // decided on a read from before the release (a copy of a dropped
    // message, its marks not yet landed when it looked) is a race lost,
    // decided again on a fresh read. Nothing else of the intent changes.
    await store.releaseLease("pi_1", "drop");
    const released = (await store.getIntent("pi_1"))!;
    assert.notEqual(released.version, held.version);
    assert.deepEqual(
      { ...released, version: "" },
      { ...held, version: "" },
    );
    await assert.rejects(
      ahead("delivery", 20, held.version),
      (error) => error instanceof ConflictError && !error.refused,
    );
    await assert.rejects(
      store.putDeadLetter(deadLetter("pi_1/settle", 20), {
        intentVersion: held.version,
        lease: { owner: "copy", ttlMs: 1000, now: 20, keep: true },
      }),
      (error) => error instanceof ConflictError && !error.refused,
    );
    assert.equal((await store.getDeadLetter("pi_1/settle"))?.poisonedAt, 10);
    const settling = await ahead("delivery", 20, released.version);
    // A repeat by the old owner leaves the new holder's lease as it is.
    await store.releaseLease("pi_1", "drop");
    assert.equal((await store.getIntent("pi_1"))?.version, settling.version);
    const record = (owner: string, version: string) =>
      store.recordBroadcast("pi_1", version, {
        outcome: "not_sent",
        at: 30,
      }, { lease: { owner, ttlMs: 1000, now: 30 } });
    await assert.rejects(
      record("other", settling.version),
      instanceOf(BusyError),
    );
    await store.releaseLease("pi_1", "delivery");
    await record("other", (await store.getIntent("pi_1"))!.version);
    // No lease, or no intent: nothing to release.
    await store.releaseLease("pi_1", "delivery");
    await store.releaseLease("pi_9", "drop");
    // Nor an id or owner no write could have stored (a NUL).
    await store.releaseLease("pi_1\u0000", "drop");
    await store.releaseLease("pi_1", "delivery\u0000");
    for (const [id, owner] of [["", "drop"], ["pi_1", ""]] as const) {
      await assert.rejects(store.releaseLease(id, owner), TypeError);
    }
    await assert.rejects(
      store.releaseLease("pi_1", undefined as unknown as string),
      TypeError,
    );
  });

  test("counts a dead letter's marks in the letter's own commit, and none when the letter is refused", async (store) => {
    const read = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    const [m1, m2] = ["givingup/qstash/message/m1", "givingup/qstash/dlq/d1"];
    await store.admit({ count: m2, now: 0 });
    // Each refusal writes nothing: neither the letter nor a mark.
    await store.admit({
      claim: { key: "sig-1", now: 0, expiresAt: 1000 },
      now: 0,
    });
    const refused: [string, () => Promise<void>, (e: unknown) => boolean][] = [
      [
        "a version read before another write",
        () =>
          store.putDeadLetter(deadLetter("pi_1/settle", 10), {
            intentVersion: "not-the-version",
            marks: { keys: [m1, m2], now: 10 },
          }),
        instanceOf(ConflictError),
      ],
      [
        "a claim used before",
        () =>
          store.putDeadLetter(deadLetter("pi_1/settle", 10), {
            claim: { key: "sig-1", now: 10, expiresAt: 1000 },
            marks: { keys: [m1, m2], now: 10 },
          }),
        instanceOf(ReplayError),
      ],
      [
        "another owner's live lease",
        async () => {
          // Another job's letter holds the intent's lease until 100.
          await store.putDeadLetter({
            ...deadLetter("pi_1/other", 0),
            intentId: "pi_1",
          }, {
            intentVersion: read.version,
            lease: { owner: "other", ttlMs: 100, now: 0, keep: true },
          });
          await store.putDeadLetter(deadLetter("pi_1/settle", 10), {
            intentVersion: (await store.getIntent("pi_1"))!.version,
            lease: { owner: "drop", ttlMs: 1000, now: 10, keep: true },
            marks: { keys: [m1, m2], now: 10 },
          });
        },
        instanceOf(BusyError),
      ],
    ];
    for (const [why, write, refusal] of refused) {
      await assert.rejects(write(), refusal, why);
      assert.equal(await store.getDeadLetter("pi_1/settle"), null, why);
      assert.deepEqual(
        [
          await store.deliveries(m1, 10),
          await store.deliveries(m2, 10),
        ],
        [0, 1],
        why,
      );
    }
    // Landed: the letter, the lease, and each mark counted once more, each
    // living its ttlMs from the marks' now (not the letter's poisonedAt).
    await store.putDeadLetter(deadLetter("pi_1/settle", 10), {
      intentVersion: (await store.getIntent("pi_1"))!.version,
      lease: { owner: "drop", ttlMs: 1000, now: 200, keep: true },
      marks: { keys: [m1, m2], now: 20, ttlMs: 5000 },
    });
    assert.equal((await store.getDeadLetter("pi_1/settle"))?.poisonedAt, 10);
    assert.deepEqual([
      await store.deliveries(m1, 5019),
      await store.deliveries(m2, 5019),
      await store.deliveries(m1, 5020),
    ], [1, 2, 0]);
    // What the marks are for: a write ahead of a send that names one is
    // refused once the lease lapsed, as it is behind a give-up's mark.
    const held = (await store.getIntent("pi_1"))!;
    await assert.rejects(
      store.transition("pi_1", {
        from: "authorized",
        to: "settling",
        version: held.version,
        at: 2000,
      }, {
        lease: { owner: "copy", ttlMs: 1000, now: 2000, keep: true },
        unlessCounted: [m1],
      }),
      (error) => error instanceof ConflictError && error.refused,
    );
    assert.equal((await store.getIntent("pi_1"))?.state, "authorized");
  });

  test("refuses marks it cannot count with the letter, with a TypeError, and writes nothing", async (store) => {
    const letter = deadLetter("pi_1/settle", 10);
    const bad: [string, unknown][] = [
      ["more than 5", { keys: ["a", "b", "c", "d", "e", "f"], now: 0 }],
      ["a key twice", { keys: ["a", "a"], now: 0 }],
      ["an empty key", { keys: [""], now: 0 }],
      ["not a list", { keys: "a", now: 0 }],
      ["the job's count", { keys: ["pi_1/settle"], now: 0 }],
      ["the count reset", { keys: ["m1"], now: 0 }],
      ["no time", { keys: ["a"] }],
      ["a time not whole", { keys: ["a"], now: 1.5 }],
      ["no keys, a time not whole", { keys: [], now: 1.5 }],
      ["a life of 0", { keys: ["a"], now: 0, ttlMs: 0 }],
    ];
    const claim = { key: "sig-1", now: 0, expiresAt: 1000 };
    for (const [why, marks] of bad) {
      await assert.rejects(
        store.putDeadLetter(letter, {
          claim,
          resetCount: "m1",
          marks: marks as Marks,
        }),
        (error) =>
          error instanceof TypeError && /'marks\.|'ttlMs'/.test(error.message),
        why,
      );
    }
    assert.equal(await store.getDeadLetter("pi_1/settle"), null);
    assert.equal(await store.deliveries("a"), 0);
    // Its claim too is still unused.
    assert.equal(await store.admit({ claim, now: 0 }), null);
    // No marks at all is a letter alone.
    await store.putDeadLetter(letter, { marks: { keys: [], now: 0 } });
    assert.equal((await store.getDeadLetter("pi_1/settle"))?.poisonedAt, 10);
    // Five, the most, with nothing else to check (no claim, version nor
    // lease): each counted with the letter.
    const five = ["a", "b", "c", "d", "e"];
    await store.putDeadLetter(deadLetter("pi_2/settle", 10), {
      marks: { keys: five, now: 10 },
    });
    assert.equal((await store.getDeadLetter("pi_2/settle"))?.poisonedAt, 10);
    assert.deepEqual(
      await Promise.all(five.map((key) => store.deliveries(key, 10))),
      [1, 1, 1, 1, 1],
    );
  });

  test("keeps the dead letter of a poison resolution in the same write as the move", async (store) => {
    const i = await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      lastBroadcast: NOT_SENT,
    });
    const letter = {
      ...deadLetter("pi_1/settle", 9),
      resolution: "nothing was sent, so the intent failed",
    };
    await store.transition("pi_1", {
      from: "settling",
      to: "failed",
      version: i.version,
      at: 9,
      ledger: "void",
      deadLetter: letter,
    });
    const { version: _, ...kept } = (await store.getDeadLetter("pi_1/settle"))!;
    assert.deepEqual(kept, letter);
    // A refused move keeps no dead letter, and resets no count.
    await store.admit({ count: "pi_2/settle", now: 0 });
    await store.admit({ count: "pubsub/m-2", now: 0 });
    const j = await store.createIntent({
      id: "pi_2",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    await assert.rejects(
      store.transition("pi_2", {
        from: "settling",
        to: "failed",
        version: j.version,
        at: 9,
        deadLetter: deadLetter("pi_2/settle", 9),
      }, { resetCount: "pubsub/m-2" }),
      instanceOf(ConflictError),
    );
    assert.equal(await store.getDeadLetter("pi_2/settle"), null);
    assert.deepEqual([
      await store.deliveries("pi_2/settle"),
      await store.deliveries("pubsub/m-2"),
    ], [1, 1]);
  });

  test("keeps a dead letter's queue ids as given, in putDeadLetter and in a move: a repeated give-up is known by them", async (store) => {
    // Pub/Sub may dead-letter a message more than once, each copy with a
    // messageId of its own: only dlqId (its source) names every copy.
    const letter = (jobId: string, messageId: string) => ({
      ...deadLetter(jobId, 9),
      queue: {
        queue: "pubsub",
        messageId,
        dlqId: `projects/p/subscriptions/s@1700000000000#${jobId}`,
      },
    });
    const dropped = letter("pi_1/settle", "m-1");
    await store.putDeadLetter(dropped);
    const i = await store.createIntent({
      id: "pi_2",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    const reviewed = letter("pi_2/settle", "m-2");
    await store.transition("pi_2", {
      from: "settling",
      to: "needs_review",
      version: i.version,
      at: 9,
      deadLetter: reviewed,
    });
    for (const given of [dropped, reviewed]) {
      const { version: _, ...kept } = (await store.getDeadLetter(given.jobId))!;
      assert.deepEqual(kept, given, given.jobId);
    }
    assert.deepEqual(
      (await store.listDeadLetters()).items.map((d) => d.queue),
      [dropped.queue, reviewed.queue],
    );
  });

  test("a dead letter resets its job's delivery count in the same write, alone or with a poison move; other jobs keep theirs", async (store) => {
    for (let n = 0; n < 3; n++) {
      await store.admit({ count: "pi_1/settle", now: 0 });
      await store.admit({ count: "pi_2/settle", now: 0 });
      await store.admit({ count: "pi_3/settle", now: 0 });
    }
    await store.putDeadLetter(deadLetter("pi_1/settle", 1));
    assert.equal(await store.deliveries("pi_1/settle"), 0);
    assert.equal(await store.admit({ count: "pi_1/settle", now: 1 }), 1);
    const i = await store.createIntent({
      id: "pi_2",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
      lastBroadcast: NOT_SENT,
    });
    await store.transition("pi_2", {
      from: "settling",
      to: "failed",
      version: i.version,
      at: 2,
      ledger: "void",
      deadLetter: deadLetter("pi_2/settle", 2),
    });
    assert.equal(await store.deliveries("pi_2/settle"), 0);
    assert.equal(await store.deliveries("pi_3/settle"), 3);
  });

  test("redrives exactly the dead letter read: removes it and resets the delivery count in one write", async (store) => {
    await store.putDeadLetter(deadLetter("pi_1/settle", 1));
    await store.putDeadLetter(deadLetter("pi_2/settle", 2));
    // Duplicates of the poisoned job, delivered after its letter.
    await store.admit({ count: "pi_1/settle", now: 0 });
    await store.admit({ count: "pi_1/settle", now: 0 });
    // Counts that are not its job's: another job's, and a give-up's mark.
    const mark = "gaveup/qstash/message/m1";
    await store.admit({ count: "pi_2/settle", now: 0 });
    await store.admit({ count: mark, now: 0, ttlMs: 32 * 24 * 3_600_000 });
    const read = (await store.getDeadLetter("pi_1/settle"))!;
    assert.equal(typeof read.version, "string");
    assert.equal(
      (await store.redrive("pi_1/settle", read.version)).jobId,
      "pi_1/settle",
    );
    assert.equal(await store.getDeadLetter("pi_1/settle"), null);
    assert.equal(await store.deliveries("pi_1/settle"), 0);
    // Only its job's: a mark reset here would let a late copy of a message
    // the queue gave up on send again.
    assert.deepEqual(
      [await store.deliveries("pi_2/settle"), await store.deliveries(mark, 0)],
      [1, 1],
    );
    assert.equal(await store.admit({ count: "pi_1/settle", now: 0 }), 1);
    assert.deepEqual(
      (await store.listDeadLetters()).items.map((d) => d.jobId),
      ["pi_2/settle"],
    );
    await assert.rejects(
      store.redrive("pi_1/settle", read.version),
      instanceOf(ConflictError),
      "gone",
    );
    // A letter replaced since it was read is not the one to remove.
    const old = (await store.getDeadLetter("pi_2/settle"))!;
    await store.putDeadLetter(deadLetter("pi_2/settle", 3));
    await assert.rejects(
      store.redrive("pi_2/settle", old.version),
      instanceOf(ConflictError),
    );
    assert.equal((await store.getDeadLetter("pi_2/settle"))?.poisonedAt, 3);
  });

  test("removes a dead letter and keeps its job's delivery count with keepCount", async (store) => {
    await store.putDeadLetter(deadLetter("pi_1/settle", 1));
    // A job delivered twice since the letter was written.
    await store.admit({ count: "pi_1/settle", now: 0 });
    await store.admit({ count: "pi_1/settle", now: 0 });
    const read = (await store.getDeadLetter("pi_1/settle"))!;
    const removed = await store.redrive("pi_1/settle", read.version, {
      keepCount: true,
    });
    assert.equal(removed.jobId, "pi_1/settle");
    assert.equal(await store.getDeadLetter("pi_1/settle"), null);
    assert.deepEqual((await store.listDeadLetters()).items, []);
    assert.equal(await store.deliveries("pi_1/settle"), 2);
    assert.equal(await store.admit({ count: "pi_1/settle", now: 0 }), 3);
    await assert.rejects(
      store.redrive("pi_1/settle", read.version, { keepCount: true }),
      instanceOf(ConflictError),
    );
  });

  test("of two concurrent redrives of one dead letter, exactly one wins", async (store) => {
    await store.putDeadLetter(deadLetter("pi_1/settle", 1));
    const read = (await store.getDeadLetter("pi_1/settle"))!;
    const results = await Promise.allSettled([
      store.redrive("pi_1/settle", read.version),
      store.redrive("pi_1/settle", read.version),
    ]);
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
    const lost = results.find((r) => r.status === "rejected");
    assert.ok(
      lost?.status === "rejected" && lost.reason instanceof ConflictError,
    );
  });
}
