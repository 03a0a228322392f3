/**
 * A relayer's redrives of one job id in flight at once: the second is
 * refused (ConflictError) before it reads or publishes, and every redrive,
 * whatever its outcome, leaves the job id free for the next, on every
 * store.
 */
import assert from "node:assert/strict";
import {
  ConflictError,
  createRelayer,
  type Job,
  ScriptedSender,
  type Store,
} from "../../mod.ts";
import { deadLetter } from "../store/_contract.ts";
import { BACKENDS } from "../_stores.ts";

const JOB: Job = { intentId: "pi_0001", kind: "settle" };
const UNDER_WAY = /another redrive of it is under way on this instance/;

/** `pi_0001` authorized, with its job's dead letter. */
async function lettered(store: Store): Promise<void> {
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  await store.putDeadLetter(deadLetter("pi_0001/settle", 0));
}

for (const backend of BACKENDS) {
  Deno.test(`createRelayer() refuses a redrive of a job whose redrive runs in the same relayer, before it reads or publishes, then redrives afresh once that one ended [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      await lettered(store);
      const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const published: Job[] = [];
      const first = relayer.redrive("pi_0001/settle", {
        publish: async (job) => {
          await held;
          published.push(job);
        },
      });
      let reads = 0;
      const getDeadLetter = store.getDeadLetter.bind(store);
      store.getDeadLetter = (jobId: string) => {
        reads++;
        return getDeadLetter(jobId);
      };
      const error = await relayer.redrive("pi_0001/settle", {
        publish: (job) => Promise.resolve(void published.push(job)),
      }).then((job) => `resolved ${JSON.stringify(job)}`, (error) => error);
      assert.ok(error instanceof ConflictError, `the second ${String(error)}`);
      assert.match(error.message, UNDER_WAY);
      assert.match(error.message, /do not queue the job again/);
      assert.equal(error.refused, false); // a race lost, not a rule
      assert.equal(reads, 0);
      // Another job's redrive is not held up by it.
      assert.equal(await relayer.redrive("pi_0404/settle"), null);
      release();
      assert.deepEqual(await first, JOB);
      assert.deepEqual(published, [JOB]);
      // Ended: the next redrive reads, and finds the letter gone.
      assert.equal(await relayer.redrive("pi_0001/settle"), null);
      assert.equal(reads, 2);
    } finally {
      await close();
    }
  });

  Deno.test(`createRelayer() frees a job id for the next redrive whatever the last one's outcome: no letter, refused, publish failed, store failed, lost to another writer [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
      const next = async (what: string) => {
        // Held in flight, a second redrive would be refused at once.
        const outcome = await relayer.redrive("pi_0001/settle").then(
          (job) => job,
          (error: unknown) => error,
        );
        assert.doesNotMatch(String(outcome), UNDER_WAY, what);
      };
      // No letter.
      assert.equal(await relayer.redrive("pi_0001/settle"), null);
      await next("after no letter");
      // Refused: the intent is settled.
      await store.createIntent({ id: "pi_0001", state: "settled" });
      await store.putDeadLetter(deadLetter("pi_0001/settle", 0));
      await assert.rejects(
        relayer.redrive("pi_0001/settle"),
        /already settled: no job can help it/,
      );
      await next("after a refusal");
      await store.redrive(
        "pi_0001/settle",
        (await store.getDeadLetter("pi_0001/settle"))!.version,
      );
      // The publish fails.
      await store.createIntent({
        id: "pi_0002",
        state: "authorized",
        hold: "pending",
      });
      await store.putDeadLetter(deadLetter("pi_0002/settle", 0));
      await assert.rejects(
        relayer.redrive("pi_0002/settle", {
          publish: () => Promise.reject(new Error("the queue is down")),
        }),
        /the queue is down/,
      );
      // The store fails: a read, then the removal.
      const getDeadLetter = store.getDeadLetter;
      store.getDeadLetter = () => Promise.reject(new Error("store down"));
      await assert.rejects(relayer.redrive("pi_0002/settle"), /store down/);
      store.getDeadLetter = getDeadLetter;
      const redrive = store.redrive;
      store.redrive = () => Promise.reject(new Error("store down"));
      await assert.rejects(relayer.redrive("pi_0002/settle"), /store down/);
      // Lost to another writer: the letter replaced after the read.
      store.redrive = async (...args: Parameters<Store["redrive"]>) => {
        await store.putDeadLetter(deadLetter("pi_0002/settle", 1));
        return await redrive.apply(store, args);
      };
      await assert.rejects(
        relayer.redrive("pi_0002/settle", { publish: () => Promise.resolve() }),
        /published all the same/,
      );
      store.redrive = redrive;
      // Each ended: the letter still there, the next redrive takes it.
      assert.deepEqual(await relayer.redrive("pi_0002/settle"), {
        intentId: "pi_0002",
        kind: "settle",
      });
      assert.equal(await store.getDeadLetter("pi_0002/settle"), null);
    } finally {
      await close();
    }
  });
}
