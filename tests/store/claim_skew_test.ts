/**
 * Clocks (review): a replay record is kept by the store until its
 * `expiresAt`, compared with the admitting instance's clock; the generic
 * route's record expires 6 minutes after the signature's `t` and QStash's a
 * minute after its token stops verifying, "room for instances whose clocks
 * differ" (docs/webhook.md). Expiry decides a replay only where the record
 * is still there: the KV key's `expireIn` is counted from the writer's
 * clock, and PostgreSQL's sweep deletes by the sweeper's. A writer (or
 * sweeper) a little more than that minute ahead of the instance that
 * checks the next copy deletes the record while the signature still
 * verifies there, and the replay is admitted. MemoryStore sweeps by the
 * admitting write's clock: one process, but a clock that runs ahead and is
 * then stepped back (NTP) is the same two clocks in turn.
 */
import assert from "node:assert/strict";
import { type Claim, ReplayError } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { MemoryStore } from "../../store/memory.ts";
import { recordingSets } from "./_hooked_kv.ts";
import {
  SIGNATURE_MAX_AGE_MS,
  SIGNATURE_REPLAY_TTL_MS,
} from "../../webhook/_auth.ts";
import { openPostgresStore, postgresAvailable } from "../_postgres.ts";

/** Real time, in ms: the signer signs at 0 with a correct clock. */
const SIGNED_AT = 1_800_000_000_000;
/** How far the instance that admits (or sweeps) runs ahead. */
const AHEAD_MS = 90_000;
const claimAt = (now: number): Claim => ({
  key: "deliveries/" + "ab".repeat(32),
  now,
  expiresAt: SIGNED_AT + SIGNATURE_REPLAY_TTL_MS,
});

Deno.test("KvStore: a replay record's key outlives the signature at every instance, though its writer's clock ran 90s ahead", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    // Records what `expireIn` each key was set with.
    const sets = recordingSets(kv);
    const store = new KvStore(sets.kv);
    // Admitted at real time SIGNED_AT + 1s by an instance 90 s ahead (it
    // accepts: the signature is 91 s old by its clock).
    const realAtWrite = SIGNED_AT + 1_000;
    await store.admit({
      claim: claimAt(realAtWrite + AHEAD_MS),
      now: realAtWrite + AHEAD_MS,
    });
    const expireIns = sets.seen.filter(([key]) => key.includes("claim")).map((
      [, expireIn],
    ) => expireIn);
    assert.equal(expireIns.length, 1);
    // Deno KV deletes the key from (its) real time of the commit + expireIn.
    const deletedFrom = realAtWrite + expireIns[0]!;
    // An instance with a correct clock accepts a copy of the signature
    // until SIGNED_AT + 5 min.
    const acceptedUntil = SIGNED_AT + SIGNATURE_MAX_AGE_MS;
    assert.ok(
      deletedFrom > acceptedUntil,
      `the record may be deleted ${
        (acceptedUntil - deletedFrom) / 1000
      }s before a correct clock stops accepting its signature`,
    );
  } finally {
    kv.close();
  }
});

Deno.test({
  name:
    "PostgresStore: a sweep by an instance 90s ahead does not forget a replay record another instance still needs",
  ignore: !postgresAvailable,
  async fn() {
    const { store, close } = await openPostgresStore();
    try {
      // Admitted by a correct clock, 1 s after signing.
      await store.admit({
        claim: claimAt(SIGNED_AT + 1_000),
        now: SIGNED_AT + 1_000,
      });
      // 4m40s later (real), writes by an instance 90 s ahead sweep the
      // claims whose expiry its clock has passed: enough writes for one
      // sweep whatever the process's schedule.
      const fast = SIGNED_AT + 280_000 + AHEAD_MS;
      for (let i = 0; i < 70; i++) {
        await store.admit({ count: `sweep-${i}`, now: fast });
      }
      // At 4m50s (real) a copy reaches an instance with a correct clock:
      // the signature is 290 s old, so it verifies there.
      const checkAt = SIGNED_AT + 290_000;
      assert.ok(checkAt - SIGNED_AT <= SIGNATURE_MAX_AGE_MS);
      await assert.rejects(
        store.admit({ claim: claimAt(checkAt), now: checkAt }),
        ReplayError,
        "the replay was admitted: the record was swept before the signature stopped verifying",
      );
    } finally {
      await close();
    }
  },
});

Deno.test("MemoryStore: a sweep by a clock that ran 90s ahead, then stepped back, does not forget a replay record the signature still needs", async () => {
  const store = new MemoryStore();
  // Admitted by a correct clock, 1 s after signing.
  await store.admit({
    claim: claimAt(SIGNED_AT + 1_000),
    now: SIGNED_AT + 1_000,
  });
  // 4m40s later (real), the process's wall clock runs 90 s ahead (a VM
  // whose clock NTP has yet to step back): the signed deliveries it admits
  // meanwhile sweep the claims whose expiry that clock has passed.
  const fast = SIGNED_AT + 280_000 + AHEAD_MS;
  for (let i = 0; i < 8; i++) {
    await store.admit({
      claim: {
        key: `deliveries/${i.toString(16).padStart(64, "0")}`,
        now: fast,
        expiresAt: fast + SIGNATURE_REPLAY_TTL_MS,
      },
      now: fast,
    });
  }
  // NTP steps the clock back; at 4m50s (real) a copy of the first request
  // arrives: the signature is 290 s old, so it verifies.
  const checkAt = SIGNED_AT + 290_000;
  assert.ok(checkAt - SIGNED_AT <= SIGNATURE_MAX_AGE_MS);
  await assert.rejects(
    store.admit({ claim: claimAt(checkAt), now: checkAt }),
    ReplayError,
    "the replay was admitted: the record was swept before the signature stopped verifying",
  );
});
