import assert from "node:assert/strict";
import { ScriptedSender } from "../../mod.ts";

// The test Sender of the package, the first one an adopter's tests build.
// A script of the wrong shape threw the engine's words: null "Cannot
// convert undefined or null to object", `{ pi_1: { send: [] } }` (a
// misspelt `sends`) "script.sends is not iterable".

Deno.test("ScriptedSender refuses a script of the wrong shape, naming the intent and the field", () => {
  for (
    const [scripts, words] of [
      [
        null,
        'its scripts must be an object such as { pi_0001: { sends: [{ txHash: "0xabc" }] } }: current value is null',
      ],
      [
        { pi_1: 5 },
        "the script of pi_1 must be an object with 'sends', an array of { txHash } or { error }: current value is 5",
      ],
      [
        { pi_1: { send: [] } },
        'the script of pi_1 names "send", which it does not read (sends, receipts): check its spelling',
      ],
      [
        { pi_1: { sends: [{ hash: "0x1" }] } },
        '\'sends[0]\' of pi_1 must be { txHash } or { error }: current value is {"hash":"0x1"}',
      ],
      // One step, not an array of them.
      [
        { pi_1: { sends: { txHash: "0x1" } } },
        '\'sends\' of pi_1 must be an array of { txHash } or { error }: current value is {"txHash":"0x1"}',
      ],
      [
        { pi_1: { sends: [null] } },
        "'sends[0]' of pi_1 must be { txHash } or { error }: current value is null",
      ],
      // A hash that is no string would be recorded as "no txHash".
      [
        { pi_1: { sends: [{ txHash: 5 }] } },
        "'sends[0]' of pi_1 must be { txHash } or { error }: current value is {\"txHash\":5}",
      ],
      [
        { pi_1: { sends: [], receipts: "confirmed" } },
        '\'receipts\' of pi_1 must be an array of "confirmed", "pending" or "dropped": current value is "confirmed"',
      ],
    ] as const
  ) {
    assert.throws(
      () => new ScriptedSender(scripts as never),
      new TypeError(`Cannot create ScriptedSender as ${words}`),
    );
  }
  assert.ok(
    new ScriptedSender({
      pi_1: { sends: [{ txHash: "0x1" }], receipts: ["pending"] },
    }),
  );
});
