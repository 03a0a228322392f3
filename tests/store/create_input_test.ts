/**
 * An intent handed to `createIntent` from JavaScript or JSON (a payments
 * API's own code, an import script): one left out failed on "Cannot read
 * properties of null (reading 'id')", and an id, state or hold that is a
 * BigInt on "Do not know how to serialize a BigInt", naming neither the
 * field nor what to give. Each is refused on every store, naming it, and
 * nothing is written.
 *
 * @module
 */

import assert from "node:assert/strict";
import { BACKENDS } from "../_stores.ts";

const REFUSED: [unknown, string][] = [
  [
    null,
    "Cannot create intent as 'intent' must be an object such as { id, state, hold }: current value is null",
  ],
  [
    undefined,
    "Cannot create intent as 'intent' must be an object such as { id, state, hold }: current value is undefined",
  ],
  [
    { id: 1n },
    `Cannot create intent as 'id' must be 1-128 characters of A-Z a-z 0-9 _ . : -, not "." or "..": current value is 1n`,
  ],
  [
    { id: "pi_1", state: 2n },
    "Cannot create intent as 'state' is not an intent state: current value is 2n",
  ],
  [
    { id: "pi_1", state: "authorized", hold: Symbol("pending") },
    'Cannot create intent as \'hold\' must be "pending", "voided", "captured" or null: current value is Symbol(pending)',
  ],
];

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}.createIntent() names an intent left out, or an id, state or hold of the wrong type, and writes nothing`, async () => {
    const { store, close } = await backend.open();
    try {
      for (const [intent, message] of REFUSED) {
        await assert.rejects(
          store.createIntent(intent as never),
          (error: Error) => {
            assert.ok(error instanceof TypeError, String(error));
            assert.equal(error.message, message);
            return true;
          },
        );
      }
      assert.equal(await store.getIntent("pi_1"), null);
    } finally {
      await close();
    }
  });
}
