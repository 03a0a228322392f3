/**
 * PostgresStore's write that the server ends in a deadlock with another
 * session (40P01: a DBA's script or a report that locks the store's rows
 * in another order than the store does), on a real server: the write is a
 * `BusyError` (another session held a lock it needed, as past its
 * `lock_timeout`) that names the deadlock and says nothing was written,
 * nothing of it landed, and the same write, read again, lands once the
 * other session is done.
 *
 * The server looks for a deadlock once, in the session that has waited
 * its `deadlock_timeout`, and ends that session's transaction: the store's
 * sessions keep the server's 1 s (a real wait: a shorter one passed before
 * the other session's statement closed the cycle on a loaded machine, and
 * the store's write waited its lock_timeout instead), the other session
 * takes 10 s, so the store's write is the one the server ends.
 *
 * @module
 */

import assert from "node:assert/strict";
import { BusyError } from "../../mod.ts";
import { postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { deadlockSessions, waitingOnLock } from "./_waiting_on_lock.ts";

const NAME = "relayer_deadlock";

Deno.test({
  name:
    "PostgresStore's write ended in a deadlock with another session is a BusyError naming the deadlock, nothing of it written, and lands when asked again",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    const { watch, admin, store, close } = await deadlockSessions(NAME);
    try {
      const intent = await store.createIntent({
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
      // A lease that lapsed: the write takes it, after its intent's row.
      await admin`INSERT INTO relayer.leases VALUES ('pi_0001', 'd0', 0)`;
      const lease = { owner: "d1", ttlMs: 30_000, now: 1000, keep: true };
      const change = {
        from: "authorized",
        to: "settling",
        version: intent.version,
        at: 1000,
      } as const;
      let write: Promise<unknown> | undefined;
      const other = admin.begin(async (tx) => {
        await tx`SET LOCAL deadlock_timeout = '10s'`;
        await tx`SELECT 1 FROM relayer.leases WHERE intent_id = 'pi_0001' FOR UPDATE`;
        write = store.transition("pi_0001", change, { lease });
        write.catch(() => {});
        await waitingOnLock(watch, NAME, "the write");
        // The intent's row, which the write holds: a deadlock.
        await tx`UPDATE relayer.intents SET last_error = last_error WHERE id = 'pi_0001'`;
      });
      await other;
      await assert.rejects(write!, (error: unknown) => {
        assert.ok(error instanceof BusyError, String(error));
        assert.match(
          error.message,
          /^Cannot move pi_0001 from authorized to settling as PostgreSQL ended it in a deadlock with another session \(deadlock detected\): nothing was written; retry \(the server's log names the other session\)$/,
        );
        assert.equal((error.cause as { code?: unknown })?.code, "40P01");
        return true;
      });
      const [seen] = await admin`
        SELECT i.state, i.version::text AS version, l.owner
        FROM relayer.intents i LEFT JOIN relayer.leases l ON l.intent_id = i.id
        WHERE i.id = 'pi_0001'`;
      assert.deepEqual({ ...seen }, {
        state: "authorized",
        version: intent.version,
        owner: "d0",
      });
      const again = await store.getIntent("pi_0001");
      const settling = await store.transition("pi_0001", {
        ...change,
        version: again!.version,
      }, { lease });
      assert.equal(settling.state, "settling");
    } finally {
      await close();
    }
  }),
});
