import assert from "node:assert/strict";
import { createRelayer, MemoryStore, ScriptedSender } from "../../mod.ts";

// The relayer's calls check their options before they read or write
// (docs/api.md). Two did not say what was wrong: keepUnreadable({}) threw
// "Cannot read properties of undefined (reading 'slice')", and giveUp with
// `deliveries: -1` named 'delivery', an option giveUp does not have.

function relayer() {
  const store = new MemoryStore();
  return {
    store,
    relayer: createRelayer({ store, sender: new ScriptedSender({}) }),
  };
}

Deno.test("keepUnreadable() names a missing or wrong queue, raw or detail, and writes nothing", async () => {
  const { store, relayer: r } = relayer();
  const good = { queue: "cloudflare", raw: "{}", detail: "no job" } as const;
  for (
    const [bad, name] of [
      [{}, "queue"],
      [{ ...good, queue: "sqs" }, "queue"],
      [{ ...good, raw: undefined }, "raw"],
      [{ ...good, detail: 42 }, "detail"],
    ] as const
  ) {
    await assert.rejects(
      r.keepUnreadable(bad as never),
      (error) =>
        error instanceof TypeError &&
        error.message.startsWith(
          `Cannot keep an unreadable message as '${name}' must be`,
        ),
      JSON.stringify(bad),
    );
  }
  assert.deepEqual((await store.listDeadLetters()).items, []);
  assert.equal(
    await r.keepUnreadable(good),
    "cloudflare/sha256-44136fa355b3678a1146ad16f7e8649e/unreadable",
  );
});

Deno.test("giveUp() names 'deliveries' when its count is not one", async () => {
  const { relayer: r } = relayer();
  for (const deliveries of [-1, 0, 1.5, Number.NaN, 2 ** 53]) {
    await assert.rejects(
      r.giveUp({ intentId: "pi_0001", kind: "settle" }, {
        deliveries,
        queue: { queue: "qstash", messageId: "msg_1" },
      }),
      (error) =>
        error instanceof RangeError &&
        error.message.startsWith(
          `Cannot give up as 'deliveries' must be an integer from 1 to ${Number.MAX_SAFE_INTEGER}`,
        ),
      String(deliveries),
    );
  }
});

// From JavaScript, the job itself or its intent id alone found no letter,
// and the null answered read as "no such letter", not as a wrong argument.
Deno.test("redrive() and discard() name a job id that is no string with a '/', before the store is read", async () => {
  const { store, relayer: r } = relayer();
  let reads = 0;
  const getDeadLetter = store.getDeadLetter.bind(store);
  store.getDeadLetter = (jobId) => {
    reads++;
    return getDeadLetter(jobId);
  };
  for (
    const [jobId, shown] of [
      ["pi_0001", '"pi_0001"'],
      [
        { intentId: "pi_0001", kind: "settle" },
        '{"intentId":"pi_0001","kind":"settle"}',
      ],
      [42, "42"],
      [undefined, "undefined"],
    ] as const
  ) {
    for (const what of ["redrive", "discard"] as const) {
      await assert.rejects(
        r[what](jobId as never),
        new TypeError(
          `Cannot ${what} as 'jobId' must be a dead letter's job id such as "pi_0001/settle": current value is ${shown}; pass jobIdOf(job), or the jobId of a letter listDeadLetters() answered`,
        ),
      );
    }
  }
  assert.equal(reads, 0);
  assert.equal(await r.redrive("pi_0001/settle"), null);
  assert.equal(await r.discard("local/m-1/unreadable"), null);
});
