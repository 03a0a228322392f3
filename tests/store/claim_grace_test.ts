/**
 * A replay record stays `CLAIM_GRACE_MS` past its expiry, whatever the
 * clock of the instance that sweeps: an instance whose clock runs minutes
 * ahead of another's sweeps by its own time, and must not forget a record
 * the other still needs to refuse a replayed signature. On every store.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ReplayError } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

const MINUTE = 60_000;

for (const backend of BACKENDS) {
  Deno.test(`a replay record outlives a sweep by a clock minutes ahead, so an instance behind it still refuses the replay [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const t0 = 1_000_000_000;
      await store.admit({
        now: t0,
        claim: { key: "qstash/sig-1", now: t0, expiresAt: t0 + MINUTE },
      });
      // Another instance, its clock 6 minutes ahead, admits enough
      // deliveries for its sweeps to pass over the record: lapsed by its
      // clock, within the grace.
      const ahead = t0 + 6 * MINUTE;
      for (let n = 0; n < 100; n++) {
        await store.admit({
          now: ahead,
          claim: { key: `qstash/other-${n}`, now: ahead, expiresAt: ahead + 1 },
        });
      }
      // The replay reaches an instance whose clock is right: the record
      // is live there.
      await assert.rejects(
        store.admit({
          now: t0 + 1,
          claim: { key: "qstash/sig-1", now: t0 + 1, expiresAt: t0 + MINUTE },
        }),
        ReplayError,
      );
    } finally {
      await close();
    }
  });
}
