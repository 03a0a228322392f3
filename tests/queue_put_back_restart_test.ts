/**
 * A `main.ts` with `KV_QUEUE=1` killed mid-send (SIGKILL) and started
 * again on its Deno KV file past the deadline Deno KV keeps on a running
 * message (5 s after it was due, never renewed): the start puts the
 * message back and delivers it 1 s later. The killed send may have left, so that copy must not send:
 * the send's write-ahead and the intent's lease answer it busy, and its
 * retry, queued on the job's line, waits out the lease (the job is not
 * stranded; after the lease its rescue reuses the send's nonce).
 */
import assert from "node:assert/strict";
import { assertCopyAnsweredBusy, withHeldSend } from "./_put_back.ts";
import { timeout } from "./_timeout.ts";

Deno.test(
  "main.ts with KV_QUEUE=1 killed mid-send and started again: the message Deno KV puts back is answered busy, nothing is sent again, and its retry is queued",
  timeout(30_000, (_t, signal) =>
    withHeldSend(signal, async (world) => {
      const original = await world.line();
      assert.equal(typeof original, "string");
      world.first.kill();
      await world.first.ended();
      await assertCopyAnsweredBusy(world, original);
      const intent = await world.store.getIntent("pi_put_back");
      assert.equal(intent?.state, "settling");
      assert.notEqual(intent?.broadcasting, null, "the send stays on record");

      const [, restarted] = await world.stop();
      assert.match(
        restarted!.stdout,
        /^queue +pi_put_back\/settle +#2 +retry +\(intent pi_put_back is busy with another delivery/m,
      );
      assert.equal(restarted!.code, 0, restarted!.stderr);
    })),
);
