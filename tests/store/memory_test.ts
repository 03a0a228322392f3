import { MemoryStore } from "../../mod.ts";
import assert from "node:assert/strict";
import { storeContract } from "./_contract.ts";

storeContract(
  "MemoryStore",
  () => Promise.resolve({ store: new MemoryStore(), close: () => {} }),
  { test: Deno.test },
);

Deno.test("MemoryStore.putDeadLetter() names marks.ttlMs when the marks' life is not at least 1 ms", async () => {
  const store = new MemoryStore();
  const letter = {
    jobId: "pi_1/settle",
    intentId: "pi_1",
    deliveries: 3,
    cause: "exhausted",
    reason: "no luck after 3 deliveries",
    resolution: "job dropped, intent still authorized",
    lastError: "timeout",
    poisonedAt: 0,
  } as const;
  for (const ttlMs of [0, -5, 1.5]) {
    await assert.rejects(
      store.putDeadLetter(letter, {
        marks: { keys: ["givingup/qstash/message/m1"], now: 0, ttlMs },
      }),
      (error) =>
        error instanceof TypeError &&
        error.message.startsWith(
          "Cannot keep the dead letter of pi_1/settle as 'marks.ttlMs' must be",
        ),
      `ttlMs ${ttlMs}`,
    );
  }
  assert.equal(await store.getDeadLetter("pi_1/settle"), null);
});

// From JavaScript, `new MemoryStore({ prefix })` or a database URL ran on an
// unshared store in memory as if the argument had been honoured.
Deno.test("new MemoryStore() refuses an option or argument it would ignore, naming a key and never a value", () => {
  const url = "postgres://relayer:hunter2@db.internal/payments";
  for (
    const [given, shown] of [
      [{ prefix: ["tenant_a"] }, 'an object with "prefix"'],
      [{ url }, 'an object with "url"'],
      [url, "string"],
      [null, "null"],
      [42, "number"],
      // An array is not an empty options object, nor are its items keys.
      [[], "an array"],
      [[url], "an array"],
      // A key is named to its first 40 characters.
      [{ ["k".repeat(100)]: 1 }, `an object with "${"k".repeat(40)}"`],
    ] as const
  ) {
    assert.throws(
      () => new MemoryStore(given as never),
      new TypeError(
        `Cannot create MemoryStore as it takes no options: current value is ${shown}; it keeps intents in this process's memory, one store per instance: pass nothing, or use KvStore or PostgresStore for a prefix or a database`,
      ),
    );
  }
  assert.ok(new MemoryStore() instanceof MemoryStore);
  assert.ok(new MemoryStore(undefined) instanceof MemoryStore);
  assert.ok(new MemoryStore({}) instanceof MemoryStore);
});
