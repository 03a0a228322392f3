/**
 * The cases where the stores answered the same call differently, found by
 * the differential run (`differential_test.ts`), one focused test each, on
 * every store: MemoryStore, KvStore (`:memory:`) and PostgresStore (where
 * a server can run). Each says which answer the design asks for.
 *
 * @module
 */
import assert from "node:assert/strict";
import { ConflictError } from "../../mod.ts";
import {
  type Backend,
  kvBackend,
  memoryBackend,
  postgresAvailable,
  postgresBackend,
} from "../_stores.ts";

const STORES: readonly Backend[] = [
  memoryBackend,
  kvBackend,
  ...(postgresAvailable ? [postgresBackend] : []),
];

/** The dead letter of `pi_1`'s job the cases keep (or try to). */
const letter = {
  jobId: "pi_1/settle",
  intentId: "pi_1",
  deliveries: 3,
  cause: "exhausted",
  reason: "no luck after 3 deliveries",
  resolution: "job dropped, intent still created",
  lastError: "not authorized yet",
  poisonedAt: 0,
} as const;

for (const backend of STORES) {
  Deno.test(`${backend.name}: admit() refuses a ttlMs below 1 ms before it claims anything, so the signature stays unused`, async () => {
    const { store, close } = await backend.open();
    try {
      const claim = { key: "sig-1", now: 0, expiresAt: 360_000 };
      await assert.rejects(
        store.admit({ count: "pi_1/settle", ttlMs: 0, claim, now: 0 }),
        TypeError,
      );
      // Nothing was written: the same signature is not a replay.
      assert.equal(await store.admit({ claim, now: 1 }), null);
      assert.equal(await store.deliveries("pi_1/settle", 1), 0);
    } finally {
      await close();
    }
  });

  Deno.test(`${backend.name}: admit() refuses a ttlMs below 1 ms without a count too, at the entry`, async () => {
    const { store, close } = await backend.open();
    try {
      const claim = { key: "sig-1", now: 0, expiresAt: 360_000 };
      await assert.rejects(store.admit({ ttlMs: 0, now: 0 }), TypeError);
      await assert.rejects(store.admit({ ttlMs: 0, claim, now: 0 }), TypeError);
      assert.equal(await store.admit({ claim, now: 1 }), null);
    } finally {
      await close();
    }
  });
}

for (const backend of STORES) {
  Deno.test(`${backend.name}: putDeadLetter() on the version of an intent that is not there is a race lost (refused: false), decided again on a fresh read`, async () => {
    const { store, close } = await backend.open();
    try {
      const other = await store.createIntent({ id: "pi_2" });
      await assert.rejects(
        store.putDeadLetter(letter, { intentVersion: other.version }),
        (error) => error instanceof ConflictError && !error.refused,
      );
      assert.equal(await store.getDeadLetter("pi_1/settle"), null);
      // With a lease, a lease on no intent: refused, in every store.
      await assert.rejects(
        store.putDeadLetter(letter, {
          intentVersion: other.version,
          lease: { owner: "o1", ttlMs: 1000, now: 0, keep: true },
        }),
        (error) => error instanceof ConflictError && error.refused,
      );
    } finally {
      await close();
    }
  });
}

for (const backend of STORES) {
  Deno.test(`${backend.name}: putDeadLetter() on a stale intentVersion is a race lost, also while another owner holds the lease`, async () => {
    const { store, close } = await backend.open();
    try {
      const read = await store.createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      // Another delivery moves the intent and holds its lease.
      await store.transition("pi_1", {
        from: "authorized",
        to: "settling",
        version: read.version,
        at: 0,
      }, { lease: { owner: "o1", ttlMs: 1000, now: 0, keep: true } });
      const given = {
        ...letter,
        resolution: "job dropped, intent still authorized",
        lastError: "not sent: delivery 3 is the last (maxDeliveries 3)",
        poisonedAt: 10,
      } as const;
      // As a delivery write on a stale version answers: the version first.
      await assert.rejects(
        store.putDeadLetter(given, {
          intentVersion: read.version,
          lease: { owner: "o2", ttlMs: 1000, now: 10, keep: true },
        }),
        (error) => error instanceof ConflictError && !error.refused,
      );
      await assert.rejects(
        store.transition("pi_1", {
          from: "authorized",
          to: "settling",
          version: read.version,
          at: 10,
        }, { lease: { owner: "o2", ttlMs: 1000, now: 10, keep: true } }),
        (error) => error instanceof ConflictError && !error.refused,
      );
      assert.equal(await store.getDeadLetter("pi_1/settle"), null);
    } finally {
      await close();
    }
  });
}

for (const backend of STORES) {
  Deno.test(`${backend.name}: a write whose unlessCounted names a count on record is refused for it first, before a busy lease or a used claim`, async () => {
    const { store, close } = await backend.open();
    try {
      const read = await store.createIntent({
        id: "pi_1",
        state: "settling",
        hold: "pending",
        settlingSince: 0,
      });
      const held = await store.beginBroadcast("pi_1", read.version, 0, {
        lease: { owner: "o1", ttlMs: 1000, now: 0, keep: true },
      });
      const claim = { key: "sig-1", now: 0, expiresAt: 360_000 };
      assert.equal(await store.admit({ claim, now: 0 }), null);
      assert.equal(
        await store.admit({ count: "givingup/q/m1", now: 0 }),
        1,
      );
      const late = {
        unlessCounted: ["givingup/q/m1"],
        lease: { owner: "o2", ttlMs: 1000, now: 10, keep: true },
      };
      const unsent = { outcome: "not_sent", at: 10, error: "x" } as const;
      const counted = (error: unknown) =>
        error instanceof ConflictError && error.refused &&
        error.message.includes("givingup/q/m1");
      // Another's live lease: the mark answers, not the lease.
      await assert.rejects(
        store.recordBroadcast("pi_1", held.version, unsent, late),
        counted,
      );
      // A used claim: the mark answers, not the replay.
      await assert.rejects(
        store.recordBroadcast("pi_1", held.version, unsent, {
          unlessCounted: late.unlessCounted,
          claim: { ...claim, now: 10 },
        }),
        counted,
      );
      // A move the rules refuse: the mark answers.
      await assert.rejects(
        store.transition("pi_1", {
          from: "settling",
          to: "created",
          version: held.version,
          at: 10,
        }, { unlessCounted: late.unlessCounted }),
        counted,
      );
      assert.equal((await store.getIntent("pi_1"))?.version, held.version);
    } finally {
      await close();
    }
  });
}

for (const backend of STORES) {
  Deno.test(`${backend.name}: recordBroadcast() on a version the intent never had is a race lost (refused: false) with a give-up mark on record too: the version is checked before the marks`, async () => {
    const { store, close } = await backend.open();
    try {
      const read = await store.createIntent({ id: "pi_1" });
      assert.equal(
        await store.admit({ count: "givingup/q/m1", now: 0 }),
        1,
      );
      const broadcast = {
        outcome: "unknown",
        at: 10,
        error: "timeout",
      } as const;
      const ahead = String(Number(read.version) + 5);
      for (const version of ["bogus", ahead]) {
        for (
          const lease of [
            undefined,
            { owner: "o1", ttlMs: 1000, now: 10, keep: false },
          ]
        ) {
          await assert.rejects(
            store.recordBroadcast("pi_1", version, broadcast, {
              unlessCounted: ["givingup/q/m1"],
              ...(lease ? { lease } : {}),
            }),
            (error) => error instanceof ConflictError && !error.refused,
            `version ${version}, lease ${lease ? "o1" : "none"}`,
          );
        }
      }
      assert.equal((await store.getIntent("pi_1"))?.version, read.version);
    } finally {
      await close();
    }
  });
}

for (const backend of STORES) {
  Deno.test(`${backend.name}: a write with a malformed lease or claim is a TypeError at the entry, whatever the intent's state`, async () => {
    const { store, close } = await backend.open();
    try {
      const names = (name: string) => (error: unknown) =>
        error instanceof TypeError && error.message.includes(`'${name}'`);
      const badLease = { owner: "o2", ttlMs: 1.5, now: 0, keep: true };
      const badClaim = { key: "sig-1", now: 0, expiresAt: 0.5 };
      // On an intent that is not there.
      await assert.rejects(
        store.transition("pi_9", {
          from: "authorized",
          to: "settling",
          version: "1",
          at: 0,
        }, { lease: badLease }),
        names("lease.ttlMs"),
      );
      await assert.rejects(
        store.beginBroadcast("pi_9", "1", 0, { claim: badClaim }),
        names("claim.expiresAt"),
      );
      // On a stale version, while another owner holds the lease.
      const read = await store.createIntent({
        id: "pi_1",
        state: "settling",
        hold: "pending",
        settlingSince: 0,
      });
      await store.beginBroadcast("pi_1", read.version, 0, {
        lease: { owner: "o1", ttlMs: 1000, now: 0, keep: true },
      });
      const unsent = { outcome: "not_sent", at: 0, error: "x" } as const;
      await assert.rejects(
        store.recordBroadcast("pi_1", read.version, unsent, {
          lease: badLease,
        }),
        names("lease.ttlMs"),
      );
      await assert.rejects(
        store.recordBroadcast("pi_1", read.version, unsent, {
          claim: badClaim,
        }),
        names("claim.expiresAt"),
      );
      await assert.rejects(
        store.putDeadLetter(letter, {
          intentVersion: read.version,
          lease: badLease,
        }),
        names("lease.ttlMs"),
      );
      await assert.rejects(
        store.putDeadLetter({ ...letter, intentId: "pi_9" }, {
          intentVersion: read.version,
          claim: badClaim,
        }),
        names("claim.expiresAt"),
      );
    } finally {
      await close();
    }
  });
}

for (const backend of STORES) {
  Deno.test(`${backend.name}: a write with a malformed lease or claim is a TypeError at the entry on a version no store makes too`, async () => {
    const { store, close } = await backend.open();
    try {
      const names = (name: string) => (error: unknown) =>
        error instanceof TypeError && error.message.includes(`'${name}'`);
      const badLease = { owner: "o2", ttlMs: 1.5, now: 0, keep: true };
      const badClaim = { key: "sig-1", now: 0, expiresAt: 0.5 };
      await store.createIntent({ id: "pi_1", state: "authorized", hold: null });
      // Not a version any store makes (PostgresStore's are digits): a race
      // lost on its own, but the malformed argument is named first.
      const change = {
        from: "authorized",
        to: "settling",
        version: "v1",
        at: 0,
      } as const;
      await assert.rejects(
        store.transition("pi_1", change, { lease: badLease }),
        names("lease.ttlMs"),
      );
      await assert.rejects(
        store.beginBroadcast("pi_1", "v1", 0, { claim: badClaim }),
        names("claim.expiresAt"),
      );
      await assert.rejects(
        store.putDeadLetter(letter, { intentVersion: "v1", lease: badLease }),
        names("lease.ttlMs"),
      );
      await assert.rejects(
        store.putDeadLetter(letter, { intentVersion: "v1", claim: badClaim }),
        names("claim.expiresAt"),
      );
      // Well formed, it is the race lost it was.
      await assert.rejects(
        store.transition("pi_1", change, {}),
        (error: unknown) =>
          error instanceof ConflictError && error.refused === false,
      );
    } finally {
      await close();
    }
  });
}

for (const backend of STORES) {
  Deno.test(`${backend.name}: admit() refuses a count that is not a job id at the entry, before it claims anything`, async () => {
    const { store, close } = await backend.open();
    try {
      const claim = { key: "sig-1", now: 0, expiresAt: 360_000 };
      // A JavaScript caller's number (deliver()'s countAs is not checked).
      const count = 42 as unknown as string;
      await assert.rejects(
        store.admit({ count, claim, now: 0 }),
        (error: unknown) =>
          error instanceof TypeError && error.message.includes("'count'"),
      );
      // Nothing was written: the same signature is not a replay.
      assert.equal(await store.admit({ claim, now: 1 }), null);
    } finally {
      await close();
    }
  });
}
