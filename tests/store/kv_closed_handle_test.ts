/**
 * KvStore on a Deno KV handle closed under it (the service's stop closes
 * it; a delivery its drain cut short may still call the store): a call
 * says the handle is closed and what follows, not Deno's bare "Bad
 * resource ID", and a write on it is marked as nothing written.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type KvLike, KvStore } from "../../store/kv.ts";
import { isNotRead, isNotWritten } from "../../store/_not_written.ts";
import { closedKv } from "../../store/_closed_kv.ts";
import { resendingKv } from "./_resending_kv.ts";
import { kvClosedTests, seed, WRITES } from "./_kv_closed.ts";

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
      () => store.getDeadLetter("pi_0001/settle"),
      () => store.deliveries("pi_0001/settle"),
      () => store.deliveries("pi_0001/settle", 2),
    ]
  ) {
    await assert.rejects(read(), (error: Error) => {
      assert.match(
        error.message,
        /^Cannot read Deno KV as its handle is closed \(Deno: "Bad resource ID"\): nothing was read\./,
      );
      assert.equal(isNotWritten(error), false);
      // A read's own: it read nothing and wrote nothing, and a route that
      // reads before it writes says so.
      assert.equal(isNotRead(error), true);
      return true;
    });
  }
});

Deno.test("a commit in flight as its Deno KV handle closed may have landed: worded so, never marked as nothing written", async () => {
  // Commits in flight as the handle closes, until one is cut short: one
  // alone landed first in about 1 run in 7, ten at once in about 1 in 15,
  // and the test then had no such commit to look at.
  let thrown: unknown;
  for (let round = 1; thrown === undefined && round <= 50; round++) {
    const kv = await Deno.openKv(":memory:");
    const commits = Array.from(
      { length: 10 },
      (_, i) => kv.atomic().set(["a", i], 1).commit(),
    );
    kv.close();
    const answers = await Promise.all(
      commits.map((commit) => commit.then(() => undefined, (error) => error)),
    );
    thrown = answers.find((answer) => answer !== undefined);
  }
  // Deno's own answer for it, which the store words.
  assert.equal((thrown as Error | undefined)?.message, "Database is closed.");
  const error = closedKv(thrown, "write")!;
  assert.match(
    error.message,
    /^Cannot finish the write as Deno KV was closed under it \(Deno: "Database is closed\."\): it may have landed or not\./,
  );
  assert.equal(isNotWritten(error), false);
  // A read the close cut short so read nothing, and wrote nothing.
  assert.match(
    closedKv(thrown, "read")!.message,
    /^Cannot read Deno KV as its handle is closed \(Deno: "Database is closed\."\): nothing was read\./,
  );
  assert.equal(closedKv(new Error("Bad resource ID"), "write"), undefined);
  // @deno/kv's words on Node are taken only whole, and its addon's only
  // with the addon's code: nothing else is called nothing written.
  const addon = (message: string) =>
    Object.assign(new Error(message), { code: "GenericFailure" });
  for (
    const other of [
      new Error("db not found"),
      addon("db not found for tenant 7"),
      new Error("Cannot call '.close' after '.close' is called"),
      new Error("Cannot call '.commit' after '.close' is called, twice"),
      addon("Database is closed. Again"),
    ]
  ) {
    assert.equal(closedKv(other, "write"), undefined, other.message);
  }
});

Deno.test("a KvStore write whose commit landed, answered as a race lost (a KV Connect client's resend), reads back on a handle closed meanwhile: it may have landed, and is never marked as nothing written", async () => {
  for (const [name, write] of Object.entries(WRITES)) {
    // Refused by the ledger before any commit: no hold to record or capture.
    if (name === "recordHold" || name === "captureHold") continue;
    for (const saw of [true, false]) {
      const kv = await Deno.openKv(":memory:");
      const at = await seed(new KvStore(kv));
      // The commit lands; its answer is lost, and the handle closes before
      // the writer reads back what it did: on a store that saw the
      // intents, after a delivery write's commit with no read first.
      const store = new KvStore(
        resendingKv(kv, () => true, () => Promise.resolve(kv.close())),
      );
      if (saw) {
        for (const id of ["pi_1", "pi_2"]) await store.getIntent(id);
      }
      const thrown = await write(store, at).then(() => null, (e) => e);
      const closed = await kv.get(["a"]).then(() => false, () => true);
      if (!closed) kv.close();
      const which = `${name} (${saw ? "seen" : "unseen"})`;
      assert.ok(closed, `${which} committed nothing`);
      assert.ok(thrown instanceof Error, `${which} answered`);
      assert.equal(isNotWritten(thrown), false, `${which}: ${thrown.message}`);
      assert.equal(isNotRead(thrown), false, `${which}: ${thrown.message}`);
    }
  }
});

Deno.test("a KvStore write whose first read the handle's close cut short (Deno's \"Database is closed.\") sent nothing to commit: it says nothing was written, and is marked so", async () => {
  // Until three writes met it (the close does not always beat the read),
  // or 20 rounds of every write.
  let cut = 0;
  const writes = Array.from({ length: 20 }, () => Object.entries(WRITES))
    .flat();
  for (const [name, write] of writes) {
    if (cut >= 3) break;
    const kv = await Deno.openKv(":memory:");
    const at = await seed(new KvStore(kv));
    // The handle closes as the write's first read is under way.
    let armed = true;
    const closing: KvLike = {
      getMany: (keys) => {
        const read = kv.getMany(keys);
        if (armed) {
          armed = false;
          kv.close();
        }
        return read;
      },
      atomic: () => kv.atomic(),
      list: (selector, options) => kv.list(selector, options),
    };
    const thrown = await write(new KvStore(closing), at).then(
      () => null,
      (e) => e,
    );
    if (armed) kv.close();
    const cause = (thrown as Error | null)?.cause as Error | undefined;
    if (cause?.message !== "Database is closed.") continue;
    cut++;
    const which = `${name}: ${(thrown as Error).message}`;
    assert.match(
      (thrown as Error).message,
      /^Cannot write to Deno KV as its handle is closed \(Deno: "Database is closed\."\): nothing was written\./,
      which,
    );
    assert.equal(isNotWritten(thrown), true, which);
  }
  assert.ok(cut >= 3, `only ${cut} writes had their first read cut short`);
});

Deno.test("KvStore.listDeadLetters() on a Deno KV handle closed between its list and its read of the letters says nothing was read, and is marked so", async () => {
  const kv = await Deno.openKv(":memory:");
  await seed(new KvStore(kv));
  // The handle closes as the list of letters ends, before they are read.
  const closing: KvLike = {
    getMany: (keys) => kv.getMany(keys),
    atomic: () => kv.atomic(),
    async *list(selector, options) {
      yield* kv.list(selector, options);
      kv.close();
    },
  };
  await assert.rejects(
    new KvStore(closing).listDeadLetters({}),
    (error: Error) => {
      assert.match(
        error.message,
        /^Cannot read Deno KV as its handle is closed \(Deno: "Bad resource ID"\): nothing was read\./,
      );
      assert.equal(isNotRead(error), true);
      assert.equal(isNotWritten(error), false);
      return true;
    },
  );
});

kvClosedTests(
  "KvStore on Deno KV",
  (path) => Deno.openKv(path),
  Deno.test,
  ["Database is closed."],
);
