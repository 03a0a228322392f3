/**
 * A dead letter's `poisonedAt` orders the list, newest first, the same in
 * every store. Deno KV keys a letter by `MAX_SAFE_INTEGER − poisonedAt`,
 * which past 2^53 rounds: a letter from before 1970 (a negative time) was
 * listed out of order there alone (−2 before −1), and two such letters
 * could share a key. A time before 1970 is no reading of a clock the
 * relayer takes (its clock must return one a `Date` can hold, from 0), so
 * every store refuses it, as it refuses a fraction, and writes nothing.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { DeadLetter } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

function letter(id: string, poisonedAt: number): DeadLetter {
  return {
    jobId: `${id}/settle`,
    intentId: id,
    deliveries: 1,
    cause: "exhausted",
    reason: "no luck after 1 delivery",
    resolution: "job dropped, intent still authorized",
    lastError: "not authorized yet",
    poisonedAt,
  };
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: a dead letter poisoned before 1970 is refused, naming 'poisonedAt', and nothing is written`, async () => {
    const { store, close } = await backend.open();
    try {
      for (const [i, poisonedAt] of [-1, -2, -1_000_000_000_000].entries()) {
        const id = `pi_000${i}`;
        await store.createIntent({ id, state: "authorized", hold: "pending" });
        const before = await store.getIntent(id);
        await assert.rejects(store.putDeadLetter(letter(id, poisonedAt)), {
          name: "TypeError",
          message:
            `Cannot write to the store as 'poisonedAt' must be a whole number of milliseconds from 0 (1970): current value is ${poisonedAt}`,
        });
        assert.equal(await store.getDeadLetter(`${id}/settle`), null);
        assert.deepEqual(await store.getIntent(id), before);
      }
      assert.deepEqual(await store.listDeadLetters({}), {
        items: [],
        cursor: null,
      });
    } finally {
      await close();
    }
  });

  Deno.test(`${backend.name}: dead letters poisoned at 0 and at 2^53 − 1 list newest first, page by page`, async () => {
    const { store, close } = await backend.open();
    try {
      const times = [0, 1, 2, 2 ** 53 - 1];
      for (const [i, t] of times.entries()) {
        const id = `pi_000${i}`;
        await store.createIntent({ id, state: "authorized", hold: "pending" });
        await store.putDeadLetter(letter(id, t));
      }
      const seen: number[] = [];
      let cursor: string | null = null;
      do {
        const page: Awaited<ReturnType<typeof store.listDeadLetters>> =
          await store.listDeadLetters({ limit: 1, cursor });
        seen.push(...page.items.map((d) => d.poisonedAt));
        cursor = page.cursor;
      } while (cursor !== null);
      assert.deepEqual(seen, [2 ** 53 - 1, 2, 1, 0]);
    } finally {
      await close();
    }
  });
}
