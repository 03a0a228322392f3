/**
 * The relayer on PostgresStore when its write that fails a payment (a
 * send declared not sent, then poison) meets a deadlock with another
 * session, on a real server: the server ends the store's transaction
 * (40P01), nothing of it lands, and the deadlock is another session's
 * lock, not a refusal of the failure. The delivery answers busy, and the
 * next one fails the payment; before, three in a row sent it to review
 * as "the store refused the failure", which a retry would have failed.
 *
 * Each deadlock is real: another session holds the intent's hold row,
 * the store's write takes the intent's row and waits on the hold's (it
 * voids it), and
 * the other session then asks for the intent's row. The store's sessions
 * keep the server's 1 s `deadlock_timeout` (a real wait, as in
 * postgres_deadlock_test.ts: a shorter one may look before the cycle
 * closes), the other session 10 s, so the store's write is the victim.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, notSent, poison, ScriptedSender } from "../../mod.ts";
import { postgresAvailable } from "../_postgres.ts";
import { overriding } from "../_stores.ts";
import { timeout } from "../_timeout.ts";
import { deadlockSessions, waitingOnLock } from "./_waiting_on_lock.ts";

const NAME = "relayer_deadlock_resolve";

Deno.test({
  name:
    "the relayer on PostgresStore answers busy where its write failing a payment meets a deadlock with another session, and the next delivery fails it: never review for a deadlock",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const { watch, admin, store, close } = await deadlockSessions(NAME);
    try {
      await store.createIntent({
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
      let deadlocks = 0;
      let deadlocking = true;
      /** The store's write, in a deadlock with another session. */
      const deadlocked = async <T>(write: () => Promise<T>): Promise<T> => {
        deadlocks++;
        let written: Promise<T> | undefined;
        await admin.begin(async (tx) => {
          await tx`SET LOCAL deadlock_timeout = '10s'`;
          await tx`SELECT 1 FROM relayer.holds WHERE intent_id = 'pi_0001' FOR UPDATE`;
          written = write();
          written.catch(() => {});
          await waitingOnLock(watch, NAME, "the failure's write");
          // The intent's row, which the write holds: a deadlock.
          await tx`UPDATE relayer.intents SET last_error = last_error WHERE id = 'pi_0001'`;
        });
        return await written!;
      };
      const viewed = overriding(store, {
        transition: (id, change, options) =>
          deadlocking && change.to === "failed"
            ? deadlocked(() => store.transition(id, change, options))
            : store.transition(id, change, options),
      });
      const declared = () => ({
        error: poison(notSent(new Error("bad chain id"))),
      });
      const sender = new ScriptedSender({
        pi_0001: { sends: [declared(), declared()] },
      });
      const relayer = createRelayer({
        store: viewed,
        sender,
        policy: { maxDeliveries: 5 },
        random: () => 0,
      });
      const first = await relayer.deliver(
        { intentId: "pi_0001", kind: "settle" },
        1,
      );
      assert.equal(first.action, "retry", JSON.stringify(first));
      assert.match(
        first.reason,
        /^intent pi_0001 is busy: Cannot move pi_0001 from settling to failed as PostgreSQL ended it in a deadlock with another session \(deadlock detected\): nothing was written; retry/,
      );
      assert.equal(deadlocks, 1);
      const held = await store.getIntent("pi_0001");
      assert.deepEqual(
        [held?.state, held?.hold, held?.mayHaveSent],
        ["settling", "pending", false],
      );
      assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
      deadlocking = false;
      const second = await relayer.deliver(
        { intentId: "pi_0001", kind: "settle" },
        2,
      );
      assert.equal(second.action, "poison", JSON.stringify(second));
      assert.equal(
        second.action === "poison" ? second.resolution : undefined,
        "nothing was sent, so the intent failed",
      );
      const failed = await store.getIntent("pi_0001");
      assert.deepEqual([failed?.state, failed?.hold], ["failed", "voided"]);
      assert.equal(sender.calls.length, 2);
    } finally {
      await close();
    }
  }),
});
