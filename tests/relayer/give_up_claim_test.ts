/**
 * A queue's give-up claims its replay record in its first write, the
 * first give-up mark when it drops the job: what that does when the write
 * is lost, refused as a replay, or raced by the queue's own repeats.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  createRelayer,
  type Outcome,
  ReplayError,
  ScriptedSender,
  type Store,
} from "../../mod.ts";
import { type Backend, BACKENDS, overriding } from "../_stores.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;
const m1 = { queue: "qstash", messageId: "msg_1" } as const;
const claimOf = (key: string) => ({
  key,
  now: 1_000_000,
  expiresAt: 1_360_000,
});
/** The give-up of m1 at its 5 deliveries, signed with `key`. */
const signed = (key: string) => ({
  deliveries: 5,
  queue: m1,
  claim: claimOf(key),
});

/** pi_0001 authorized on `backend`, and a relayer over `wrap(store)`. */
async function open(
  backend: Backend,
  wrap: (s: Store) => Store = (s) => s,
) {
  const opened = await backend.open();
  await opened.store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const sender = new ScriptedSender({ pi_0001: { sends: [] } });
  const clock = { now: 1_000_000 };
  const relayer = createRelayer({
    store: wrap(opened.store),
    sender,
    policy: { maxDeliveries: 5, jitter: "none" },
    now: () => clock.now,
    random: () => 0,
  });
  return { ...opened, relayer, sender, clock };
}

for (const backend of BACKENDS) {
  Deno.test(`createRelayer().giveUp() fails when its first mark, carrying its replay record, lands with its answer lost; a copy sends nothing, the replay is refused and a give-up signed afresh resolves [${backend.name}]`, async () => {
    let lose = true;
    const o = await open(backend, (inner) =>
      overriding(inner, {
        async admit(admission) {
          const n = await inner.admit(admission);
          if (lose && admission.claim !== undefined && admission.count) {
            lose = false;
            throw new Error("connection reset after commit");
          }
          return n;
        },
      }));
    try {
      await assert.rejects(
        o.relayer.giveUp(job, signed("sig-1")),
        /connection reset/,
      );
      assert.equal(await o.store.getDeadLetter("pi_0001/settle"), null);
      // A copy of the message meanwhile sends nothing.
      const copy = await o.relayer.deliver(job, 2, { message: m1 });
      assert.equal(copy.action, "retry");
      assert.equal(o.sender.calls.length, 0);
      // The replay of the first signed request is refused, writing nothing.
      await assert.rejects(
        o.relayer.giveUp(job, signed("sig-1")),
        ReplayError,
      );
      // The queue's retry, signed afresh, resolves.
      const out: Outcome = await o.relayer.giveUp(job, signed("sig-2"));
      assert.equal(
        out.action === "poison" && out.resolution,
        "job dropped, intent still authorized",
      );
      assert.equal(
        (await o.store.getDeadLetter("pi_0001/settle"))?.cause,
        "exhausted",
      );
      // Repeated with a third signature: answered from the letter.
      const again = await o.relayer.giveUp(job, signed("sig-3"));
      assert.equal(again.action, "poison");
      // sig-3 is used (its replay refused).
      await assert.rejects(
        o.store.admit({ claim: claimOf("sig-3"), now: 1_000_001 }),
        ReplayError,
      );
    } finally {
      await o.close();
    }
  });

  Deno.test(`createRelayer().giveUp() with a replay record already used writes nothing, not even the mark that holds copies of the message off [${backend.name}]`, async () => {
    const o = await open(backend);
    try {
      await o.store.admit({ claim: claimOf("sig-1"), now: 1_000_000 });
      await assert.rejects(
        o.relayer.giveUp(job, signed("sig-1")),
        ReplayError,
      );
      assert.equal(
        await o.store.deliveries("givingup/qstash/message/msg_1", 1_000_000),
        0,
      );
      assert.equal(await o.store.getDeadLetter("pi_0001/settle"), null);
      // A delivery of the message still sends (nothing marked).
      const d = await o.relayer.deliver(job, 1, { message: m1 });
      assert.equal(d.action, "retry");
      assert.equal(
        o.sender.calls.filter((c) => c.method === "send").length,
        1,
      );
    } finally {
      await o.close();
    }
  });

  Deno.test(`createRelayer().giveUp() on a created and on a settling intent claims its record once: its replay is refused [${backend.name}]`, async () => {
    for (
      const state of [
        { state: "created" },
        {
          state: "settling",
          hold: "pending",
          settlingSince: 1_000_000,
          lastBroadcast: { outcome: "not_sent", at: 1_000_000 },
          mayHaveSent: false,
        },
      ] as const
    ) {
      const opened = await backend.open();
      try {
        await opened.store.createIntent({ id: "pi_0001", ...state });
        const relayer = createRelayer({
          store: opened.store,
          sender: new ScriptedSender({ pi_0001: { sends: [] } }),
          policy: { maxDeliveries: 5, jitter: "none" },
          now: () => 1_000_000,
          random: () => 0,
        });
        const out = await relayer.giveUp(job, signed("sig-1"));
        assert.equal(out.action, "poison", state.state);
        await assert.rejects(
          relayer.giveUp(job, signed("sig-1")),
          ReplayError,
        );
      } finally {
        await opened.close();
      }
    }
  });
}

for (const backend of BACKENDS) {
  Deno.test(`createRelayer().giveUp() six times at once for one message, each signed afresh, on an authorized intent: each answers poison, busy or (resolved meanwhile) done and uses its record, and a copy after sends nothing [${backend.name}]`, async () => {
    const opened = await open(backend);
    const { relayer, sender, clock } = opened;
    try {
      const outs = await Promise.all(
        Array.from(
          { length: 6 },
          (_, i) =>
            relayer.giveUp(job, signed(`sig-${i}`)).catch((e) => e as Error),
        ),
      );
      for (const out of outs) {
        assert.ok(!(out instanceof Error), String(out));
        // Done only when another call resolved the message between this
        // one's read of the letter and its look for the message's mark:
        // the first resolution stands, and the queue may ack.
        assert.ok(
          out.action === "poison" || out.action === "retry" ||
            (out.action === "done" &&
              /repeated its give-up for a message already resolved/.test(
                out.reason,
              )),
          JSON.stringify(out),
        );
      }
      assert.ok(
        outs.some((o) => !(o instanceof Error) && o.action === "poison"),
      );
      for (let i = 0; i < 6; i++) {
        await assert.rejects(
          opened.store.admit({ claim: claimOf(`sig-${i}`), now: 1_000_001 }),
          ReplayError,
          `sig-${i} claimed`,
        );
      }
      clock.now += 35_000;
      const late = await relayer.deliver(job, 2, { message: m1 });
      assert.equal(late.action, "done");
      assert.equal(sender.calls.length, 0);
    } finally {
      await opened.close();
    }
  });
}
