/**
 * KvStore on a Deno KV handle closed under it (the service's stop closes
 * it; a delivery its drain cut short may still call the store): a call
 * says the handle is closed and what follows, not Deno's bare "Bad
 * resource ID", and a write on it is marked as nothing written.
 *
 * @module
 */

import assert from "node:assert/strict";
import { KvStore } from "../../store/kv.ts";
import { isNotWritten } from "../../store/_not_written.ts";
import { closedKv } from "../../store/_closed_kv.ts";

Deno.test("KvStore on a closed Deno KV handle: a write says nothing was written, and is marked so; a read says nothing was read", async () => {
  const kv = await Deno.openKv(":memory:");
  const store = new KvStore(kv);
  await store.createIntent({ id: "pi_0001" });
  kv.close();
  await assert.rejects(
    store.createIntent({ id: "pi_0002" }),
    (error: Error) => {
      assert.equal(
        error.message,
        'Cannot write to Deno KV as its handle is closed (Deno: "Bad resource ID"): nothing was written. The service closes it as it stops; a running instance takes the queue\'s next delivery.',
      );
      assert.equal(isNotWritten(error), true);
      assert.equal((error.cause as Error).name, "BadResource");
      return true;
    },
  );
  for (
    const read of [
      () => store.getIntent("pi_0001"),
      () => store.listDeadLetters({}),
    ]
  ) {
    await assert.rejects(read(), (error: Error) => {
      assert.match(
        error.message,
        /^Cannot read Deno KV as its handle is closed \(Deno: "Bad resource ID"\): nothing was read\./,
      );
      assert.equal(isNotWritten(error), false);
      return true;
    });
  }
});

Deno.test("a commit in flight as its Deno KV handle closed may have landed: worded so, never marked as nothing written", async () => {
  const kv = await Deno.openKv(":memory:");
  const commit = kv.atomic().set(["a"], 1).commit();
  kv.close();
  const thrown = await commit.then(() => null, (error) => error);
  // Deno's own answer for it, which the store words.
  assert.equal((thrown as Error | null)?.message, "Database is closed.");
  const error = closedKv(thrown, "write")!;
  assert.match(
    error.message,
    /^Cannot finish the write as Deno KV was closed under it \(Deno: "Database is closed\."\): it may have landed or not\./,
  );
  assert.equal(isNotWritten(error), false);
  assert.equal(closedKv(thrown, "read"), undefined);
  assert.equal(closedKv(new Error("Bad resource ID"), "write"), undefined);
});
