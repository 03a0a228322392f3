/**
 * A queue's give-up whose last write, the mark that it resolved its
 * message, failed: the queue repeats the give-up, and the repeat, answered
 * from the letter, writes the mark. Without it, once the letter was
 * redriven, a later repeat of that old message's give-up read as a new
 * one and dropped the job published since.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  createRelayer,
  MemoryStore,
  ScriptedSender,
  type Store,
} from "../../mod.ts";

const JOB = { intentId: "pi_0001", kind: "settle" } as const;
const QUEUE = { queue: "qstash", messageId: "msg_1" } as const;

/** `store` whose first write of a resolved give-up's mark fails. */
function markLostOnce(store: Store): Store {
  let failed = false;
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (key !== "admit") return value.bind(target);
      return (admission: { count?: string }) => {
        if (!failed && admission.count?.startsWith("gaveup/")) {
          failed = true;
          return Promise.reject(new Error("connection reset"));
        }
        return value.call(target, admission);
      };
    },
  });
}

Deno.test("a give-up repeated after its mark failed marks its message, so a repeat after the letter's redrive changes nothing", async () => {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: JOB.intentId,
    state: "authorized",
    hold: "pending",
  });
  let at = 0;
  const relayer = createRelayer({
    store: markLostOnce(memory),
    sender: new ScriptedSender({}),
    now: () => at,
  });
  await assert.rejects(
    relayer.giveUp(JOB, { deliveries: 3, queue: QUEUE }),
    /connection reset/,
  );
  // The queue repeats it: answered from the letter, as the first was.
  const repeat = await relayer.giveUp(JOB, { deliveries: 3, queue: QUEUE });
  assert.equal(repeat.action, "poison");
  // The job is redriven: its letter removed, the job published again.
  const letter = await memory.getDeadLetter("pi_0001/settle");
  assert.ok(letter);
  await memory.redrive(letter.jobId, letter.version);
  // A late repeat of the old message's give-up, its lease long lapsed,
  // drops nothing.
  at = 3_600_000;
  const late = await relayer.giveUp(JOB, { deliveries: 3, queue: QUEUE });
  assert.deepEqual(
    [late.action, await memory.getDeadLetter("pi_0001/settle")],
    ["done", null],
  );
});
