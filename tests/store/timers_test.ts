import assert from "node:assert/strict";
import {
  createRelayer,
  MemoryStore,
  ScriptedSender,
  type SenderScript,
} from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { type RegisterTest, storeContract } from "./_contract.ts";
import { hookedKvStore } from "./_hooked_kv.ts";

// Deno's op and resource sanitizers are off by default: here the store
// contract, and bursts of deliveries that group KvStore's commits and
// reads, run with them on, so that a store call that returns while a
// timer, a KV read or commit of its own still runs fails them.

const sanitized: RegisterTest = (definition, fn) =>
  Deno.test({
    ...definition,
    sanitizeOps: true,
    sanitizeResources: true,
    fn,
  });

storeContract(
  "MemoryStore, sanitized,",
  () => Promise.resolve({ store: new MemoryStore(), close: () => {} }),
  { test: sanitized },
);

storeContract("KvStore, sanitized,", async () => {
  const kv = await Deno.openKv(":memory:");
  return { ...hookedKvStore(kv), close: () => kv.close() };
}, { test: sanitized, commitGap: true });

const INTENTS = 40;

/** `INTENTS` authorized intents, and a Sender whose txs confirm. */
async function burst(store: KvStore) {
  const scripts: Record<string, SenderScript> = {};
  const jobs = [];
  for (let i = 0; i < INTENTS; i++) {
    const id = `pi_${String(i).padStart(4, "0")}`;
    await store.createIntent({ id, state: "authorized", hold: "pending" });
    scripts[id] = { sends: [{ txHash: `0x${i}` }], receipts: ["confirmed"] };
    jobs.push({ intentId: id, kind: "settle" } as const);
  }
  const relayer = createRelayer({ store, sender: new ScriptedSender(scripts) });
  return { relayer, jobs };
}

sanitized({
  name:
    "KvStore leaves no KV read, commit or timer behind a burst of deliveries and give-ups whose commits and reads are grouped",
  ignore: false,
}, async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const store = new KvStore(kv);
    const { relayer, jobs } = await burst(store);
    const first = await Promise.all(jobs.map((job) => relayer.deliver(job, 1)));
    const second = await Promise.all(
      jobs.map((job) => relayer.deliver(job, 2)),
    );
    const gaveUp = await Promise.all(jobs.map((job, i) =>
      relayer.giveUp(job, {
        deliveries: 3,
        queue: { queue: "qstash", messageId: `msg_${i}` },
      })
    ));
    assert.deepEqual(
      [first, second, gaveUp].map((outcomes) =>
        [...new Set(outcomes.map((o) => o.action))].join()
      ),
      ["retry", "done", "done"],
    );
  } finally {
    kv.close();
  }
});

sanitized({
  name:
    "KvStore leaves no KV read, commit or timer behind a burst its handle's closing cuts short",
  ignore: false,
}, async () => {
  const kv = await Deno.openKv(":memory:");
  const store = new KvStore(kv);
  const { relayer, jobs } = await burst(store);
  const delivering = Promise.allSettled(
    jobs.map((job) => relayer.deliver(job, 1)),
  );
  // Its first reads in flight.
  kv.close();
  const settled = await delivering;
  assert.ok(
    settled.some((s) => s.status === "rejected"),
    "some deliveries meet the closed handle",
  );
});
