/**
 * A fail posted to the instance whose own send of the payment ended
 * `not_sent` with its record landed but its answer lost (a connection cut
 * after the commit), while another instance's send, written ahead at the
 * same millisecond by its own wall clock, still runs and a give-up put the
 * payment in review. The review carries that other send's write-ahead,
 * `broadcasting` equal to the first send's and `mayHaveSent` false: the
 * first instance must not take it for its own send that ended, although
 * its record was answered with an error. Refused 409 `send-in-flight`, the
 * hold stays pending. On every store.
 *
 * @module
 */

import { BACKENDS, overriding } from "../_stores.ts";
import { sameMillisecondRace } from "./_give_up_mid_send.ts";

const OPS = "ops-token-for-fail-mid-send-lost-answer-tests";

/**
 * How the first instance's record is answered: lost after it landed, or
 * "may have landed or not" at once while it lands a moment later
 * (PostgresStore's answer to a flight not answered within its wait).
 */
const ANSWERS = [
  { name: "landed with its answer lost", later: false },
  { name: "answered 'may have landed' and landing after", later: true },
] as const;

for (const backend of BACKENDS) {
  for (const { name, later } of ANSWERS) {
    Deno.test(`${backend.name}: a fail posted to an instance whose own send's record ${name}, while another's, written ahead at the same millisecond, still runs, is refused`, async () => {
      const { store, close } = await backend.open();
      try {
        // The first instance's send stays home; its record lands, and the
        // answer is lost on the way back.
        let landing: Promise<unknown> = Promise.resolve();
        const answerLost = overriding(store, {
          async recordBroadcast(id, version, broadcast, options) {
            if (later) {
              // The flight still runs in the server when the answer comes.
              landing = new Promise((resolve) => setTimeout(resolve, 50)).then(
                () => store.recordBroadcast(id, version, broadcast, options),
              );
              throw new Error(
                "the store did not answer the write in time: it may have landed or not",
              );
            }
            await store.recordBroadcast(id, version, broadcast, options);
            throw new Error("connection reset after the commit");
          },
        });
        await sameMillisecondRace(store, OPS, {
          through: answerLost,
          landed: () => landing,
        });
      } finally {
        await close();
      }
    });
  }
}
