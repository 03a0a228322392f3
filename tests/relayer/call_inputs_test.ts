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
