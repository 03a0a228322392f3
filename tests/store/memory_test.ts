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
