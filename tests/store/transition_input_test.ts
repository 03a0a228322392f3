/**
 * A move handed to `transition` from JavaScript or JSON (a payments API's
 * own code, an operator's script): a misspelt `version` was told "it
 * changed since it was read; re-read it", which a caller that re-reads and
 * tries again does for ever; a misspelt `ledger` moved the intent without
 * the hold change it asked for; a `ledger` of a value no store knows was
 * told the hold was not recorded; a move left out failed on "Cannot read
 * properties of null". Each is refused on every store, naming the field,
 * and nothing is written.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Store } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

/** Each move refused, and the end of what its TypeError says. */
const REFUSED: [(version: string) => unknown, RegExp][] = [
  [
    () => null,
    /^Cannot move pi_1 as 'change' must be an object such as \{ from, to, version, at \}: current value is null$/,
  ],
  [
    (version) => ({ from: "created", to: "authorized", versoin: version }),
    /^Cannot move pi_1 as "versoin" is not one of its options \(from, to, version, at, ledger, confirmed, deadLetter\): check its spelling$/,
  ],
  [
    (version) => ({
      from: "created",
      to: "authorized",
      version,
      at: 0,
      ledgr: "capture",
    }),
    /^Cannot move pi_1 as "ledgr" is not one of its options/,
  ],
  [
    () => ({
      from: "created",
      to: "authorized",
      version: 1,
      at: 0,
    }),
    /^Cannot move pi_1 as 'version' must be the version its read returned \(a string\): current value is 1; pass intent\.version from getIntent\(\) or the last write$/,
  ],
  [
    (version) => ({
      from: "created",
      to: "authorized",
      version,
      at: 0,
      ledger: "viod",
    }),
    /^Cannot move pi_1 as 'ledger' must be "void" or "capture" \(or left out\): current value is "viod"$/,
  ],
];

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}.transition() refuses a move that is no object, a misspelt field, a version that is no string or an unknown ledger change, naming it, and writes nothing`, async () => {
    const { store, close } = await backend.open();
    try {
      const created = await (store as Store).createIntent({
        id: "pi_1",
        hold: "pending",
      });
      for (const [change, message] of REFUSED) {
        await assert.rejects(
          store.transition("pi_1", change(created.version) as never),
          (error: Error) => {
            assert.ok(error instanceof TypeError, String(error));
            assert.match(error.message, message);
            return true;
          },
        );
      }
      const read = await store.getIntent("pi_1");
      assert.equal(read?.state, "created");
      assert.equal(read?.version, created.version);
      // Spelt right, the same move is taken.
      const moved = await store.transition("pi_1", {
        from: "created",
        to: "authorized",
        version: created.version,
        at: 0,
      });
      assert.equal(moved.state, "authorized");
    } finally {
      await close();
    }
  });
}

// A move to settling starts the payment's clock at `at`: given as text
// ("5", from JSON) it was refused naming 'settlingSince', a field the
// caller never gave, as `current value is 5`, which reads as valid; a
// fraction or NaN, a number still, is named as given too.
for (const backend of BACKENDS) {
  Deno.test(`${backend.name}.transition() to settling names an 'at' that is no whole number of milliseconds, as it came`, async () => {
    const { store, close } = await backend.open();
    try {
      const authorized = await store.createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      for (
        const [at, shown] of [
          ["5", '"5"'],
          [undefined, "undefined"],
          [5.5, "5.5"],
          [Number.NaN, "NaN"],
        ]
      ) {
        await assert.rejects(
          store.transition("pi_1", {
            from: "authorized",
            to: "settling",
            version: authorized.version,
            at,
          } as never),
          (error: Error) => {
            assert.ok(error instanceof TypeError, String(error));
            assert.equal(
              error.message,
              `Cannot move pi_1 as 'at', the 'settlingSince' it sets, must be a whole number of milliseconds: current value is ${shown}`,
            );
            return true;
          },
        );
      }
      assert.equal((await store.getIntent("pi_1"))?.state, "authorized");
    } finally {
      await close();
    }
  });
}
