/**
 * `createIntent` (setup, imports, migrations) must not write a record
 * that breaks the money invariants no other write can reach: a `failed`
 * intent whose hold is still `pending` (I2: the payer's funds reserved
 * forever behind a terminal state) or `captured` (the money taken for a
 * payment that did not happen), and a `settled` one whose hold is
 * `voided` (I6: the payee paid with the payer's funds released). On every
 * store.
 *
 * @module
 */

import assert from "node:assert/strict";
import { BACKENDS } from "../_stores.ts";
import type { HoldState, IntentState } from "../../mod.ts";

const CONTRADICTIONS: readonly [IntentState, HoldState][] = [
  ["failed", "pending"],
  ["failed", "captured"],
  ["settled", "voided"],
];

for (const backend of BACKENDS) {
  Deno.test(`createIntent() refuses a terminal intent whose hold contradicts it (I2, I6) [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      for (const [state, hold] of CONTRADICTIONS) {
        const id = `pi_${state}_${hold}`;
        await assert.rejects(
          () => store.createIntent({ id, state, hold }),
          TypeError,
          `${state} with its hold ${hold}`,
        );
        assert.equal(await store.getIntent(id), null, `${state}/${hold}`);
      }
      // What the rules reach stays possible, and a record with no hold
      // (imported without its ledger) too.
      for (
        const [state, hold] of [
          ["failed", "voided"],
          ["settled", "captured"],
          ["failed", null],
          ["settled", null],
        ] as const
      ) {
        const created = await store.createIntent({
          id: `pi_ok_${state}_${hold}`,
          state,
          hold,
        });
        assert.equal(created.hold, hold);
      }
    } finally {
      await close();
    }
  });
}
