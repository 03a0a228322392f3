/**
 * Two `main.ts` with `KV_QUEUE=1` on one Deno KV file, the first with a
 * delivery mid-send (its signer holds the send). Deno KV keeps a running
 * message under a deadline 5 s after it was due and never renews it, so
 * the second instance, opening the file past that, puts the message back
 * and has it delivered 1 s later, while the first's send is still out.
 * The send's write-ahead and the intent's lease answer that copy busy
 * (past `STUCK_AFTER`, only they keep it from a rescue): nothing is sent
 * beside the first send, whose outcome the first records once; the
 * payment settles on its one tx, and the job ends once.
 */
import assert from "node:assert/strict";
import {
  assertCopyAnsweredBusy,
  linesOf,
  TX_HASH,
  until,
  withHeldSend,
} from "./_put_back.ts";
import { timeout } from "./_timeout.ts";

Deno.test(
  "main.ts with KV_QUEUE=1: a second instance on the file gets a copy of the message the first has mid-send, answers it busy, and the payment is sent once",
  timeout(30_000, (_t, signal) =>
    withHeldSend(signal, async (world) => {
      const original = await world.line();
      assert.equal(typeof original, "string");
      await assertCopyAnsweredBusy(world, original);

      world.release();
      const intent = await until(
        () => world.store.getIntent("pi_put_back"),
        (intent) => intent?.state === "settled",
        10_000,
      );
      assert.equal(intent?.state, "settled");
      assert.deepEqual(intent?.txHashes, [TX_HASH]);
      assert.deepEqual(world.sends, [
        { intentId: "pi_put_back", replace: false },
      ]);
      const outputs = await world.stop();
      const [first, second] = outputs;
      // Delivered again, to the second instance, and answered busy.
      assert.match(
        second!.stdout,
        /^queue +pi_put_back\/settle +#2 +retry +\(intent pi_put_back is busy with another delivery/m,
      );
      // The first's send recorded once; the job ended once.
      assert.equal(linesOf([first!], /^queue .* retry .*\(sent /).length, 1);
      assert.equal(linesOf(outputs, /^queue .* done /).length, 1);
      for (const { code, stderr } of outputs) assert.equal(code, 0, stderr);
    })),
);
