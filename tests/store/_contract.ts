/**
 * The contract every {@linkcode Store} keeps. A new adapter is a
 * three-line test file:
 *
 * ```ts ignore
 * import { storeContract } from "./_contract.ts";
 * storeContract("MyStore", async () => ({ store: new MyStore(), close: () => {} }));
 * ```
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  ConflictError,
  type DeadLetter,
  type HoldState,
  INTENT_STATES,
  type IntentState,
  type Store,
  TRANSITIONS,
} from "../../mod.ts";

/** An open store and how to close it. */
export interface OpenStore {
  readonly store: Store;
  close(): void | Promise<void>;
}

/** Opens a fresh, empty store. */
export type OpenStoreFn = () => Promise<OpenStore>;

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

/** A dead letter for `jobId`, poisoned at `poisonedAt`: a fixture for store tests. */
export function deadLetter(jobId: string, poisonedAt: number): DeadLetter {
  return {
    jobId,
    intentId: jobId.split("/")[0]!,
    deliveries: 3,
    cause: "exhausted",
    reason: "no luck after 3 deliveries",
    resolution: "job dropped, intent still created",
    lastError: "not authorized yet",
    poisonedAt,
  };
}

/**
 * Registers the contract tests for a store.
 *
 * @param name The store's name, prefixed to every test name.
 * @param open Opens a fresh, empty store.
 */
export function storeContract(name: string, open: OpenStoreFn): void {
  const test = (title: string, body: (store: Store) => Promise<void>) =>
    Deno.test(`${name} ${title}`, async () => {
      const { store, close } = await open();
      try {
        await body(store);
      } finally {
        await close();
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

  test("refuses to create an intent twice, or with a bad id or state", async (store) => {
    await store.createIntent({ id: "pi_1" });
    await assert.rejects(store.createIntent({ id: "pi_1" }), ConflictError);
    await assert.rejects(store.createIntent({ id: "" }), TypeError);
    await assert.rejects(
      store.createIntent({ id: "pi 1" }),
      /'id' must be 1-128 characters/,
    );
    await assert.rejects(
      store.createIntent({ id: "pi_2", state: "paid" as IntentState }),
      TypeError,
    );
    await assert.rejects(
      store.createIntent({ id: "pi_3", state: "settling" }),
      /without a finite 'settlingSince'/,
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
          hold: holdFor(to) ?? holdFor(from),
          ...(from === "settling" ? { settlingSince: 0 } : {}),
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
          await assert.rejects(
            move,
            ConflictError,
            `${from} → ${to} must be refused`,
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
      ConflictError,
    );
    await assert.rejects(
      store.transition("pi_1", {
        from: "authorized",
        to: "settling",
        version: v2.version,
        at: 2,
      }),
      /as it is settling/,
    );
    await assert.rejects(
      store.transition("pi_missing", {
        from: "created",
        to: "authorized",
        version: "x",
        at: 2,
      }),
      ConflictError,
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
      ConflictError,
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

    const b = await store.createIntent({ id: "pi_3", ...base });
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
      ConflictError,
    );
    assert.deepEqual([
      (await store.getIntent("pi_4"))?.state,
      (await store.getIntent("pi_4"))?.hold,
    ], ["settling", "voided"]);
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
    await assert.rejects(store.recordHold("pi_1"), ConflictError);

    await store.createIntent({
      id: "pi_2",
      state: "authorized",
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
    await assert.rejects(store.voidHold("pi_missing"), ConflictError);
  });

  test("records broadcasts as compare-and-set, and remembers a send that may have left", async (store) => {
    const i0 = await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
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
      ConflictError,
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

  test("counts deliveries atomically, also under concurrent calls", async (store) => {
    assert.equal(await store.deliveries("pi_1/settle"), 0);
    assert.equal(await store.countDelivery("pi_1/settle"), 1);
    assert.equal(await store.countDelivery("pi_1/settle"), 2);
    const concurrent = await Promise.all(
      Array.from({ length: 12 }, () => store.countDelivery("pi_2/settle")),
    );
    assert.deepEqual(
      [...concurrent].sort((a, b) => a - b),
      Array.from({ length: 12 }, (_, i) => i + 1),
    );
    assert.equal(await store.deliveries("pi_2/settle"), 12);
    assert.equal(await store.deliveries("pi_1/settle"), 2);
  });

  test("grants a lease to one owner until it expires by the injected clock", async (store) => {
    const a = { owner: "a", ttlMs: 1000, now: 0 };
    assert.equal(await store.acquireLease("pi_1", a), true);
    assert.equal(
      await store.acquireLease("pi_1", a),
      true,
      "the owner may re-acquire",
    );
    assert.equal(
      await store.acquireLease("pi_1", { owner: "b", ttlMs: 1000, now: 999 }),
      false,
    );
    assert.equal(
      await store.acquireLease("pi_2", { owner: "b", ttlMs: 1000, now: 999 }),
      true,
      "per intent",
    );
    assert.equal(
      await store.acquireLease("pi_1", { owner: "b", ttlMs: 1000, now: 1000 }),
      true,
      "expired: taken over",
    );
    assert.equal(
      await store.renewLease("pi_1", { owner: "a", ttlMs: 1000, now: 1001 }),
      false,
      "a lost it",
    );
    await store.releaseLease("pi_1", "a"); // not a's any more: nothing happens
    assert.equal(
      await store.acquireLease("pi_1", { owner: "c", ttlMs: 1000, now: 1500 }),
      false,
    );
    assert.equal(
      await store.renewLease("pi_1", { owner: "b", ttlMs: 1000, now: 1900 }),
      true,
    );
    assert.equal(
      await store.acquireLease("pi_1", { owner: "c", ttlMs: 1000, now: 2500 }),
      false,
      "renewed to 2900",
    );
    await store.releaseLease("pi_1", "b");
    assert.equal(
      await store.acquireLease("pi_1", { owner: "c", ttlMs: 1000, now: 2500 }),
      true,
      "released",
    );
  });

  test("gives a contested lease to exactly one of many concurrent owners", async (store) => {
    const results = await Promise.all(
      Array.from(
        { length: 8 },
        (_, i) =>
          store.acquireLease("pi_1", { owner: `o${i}`, ttlMs: 1000, now: 0 }),
      ),
    );
    assert.equal(results.filter(Boolean).length, 1);
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
  });

  test("keeps the dead letter of a poison resolution in the same write as the move", async (store) => {
    const i = await store.createIntent({
      id: "pi_1",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
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
    assert.deepEqual(await store.getDeadLetter("pi_1/settle"), letter);
    // A refused move keeps no dead letter.
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
      }),
      ConflictError,
    );
    assert.equal(await store.getDeadLetter("pi_2/settle"), null);
  });

  test("redrives a dead letter: removes it and resets the delivery count in one write", async (store) => {
    await store.countDelivery("pi_1/settle");
    await store.countDelivery("pi_1/settle");
    await store.putDeadLetter(deadLetter("pi_1/settle", 1));
    await store.putDeadLetter(deadLetter("pi_2/settle", 2));
    assert.equal((await store.redrive("pi_1/settle"))?.jobId, "pi_1/settle");
    assert.equal(await store.getDeadLetter("pi_1/settle"), null);
    assert.equal(await store.deliveries("pi_1/settle"), 0);
    assert.equal(await store.countDelivery("pi_1/settle"), 1);
    assert.deepEqual(
      (await store.listDeadLetters()).items.map((d) => d.jobId),
      ["pi_2/settle"],
    );
    assert.equal(await store.redrive("pi_1/settle"), null);
  });
}
