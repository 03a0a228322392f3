/**
 * PostgresStore's read on a hot standby that recovery keeps cancelling
 * ("canceling statement due to conflict with recovery"), which PostgreSQL
 * reports as a serialization failure (`40001`) though no transaction is
 * SERIALIZABLE: a read asked again up to three times, as one ended by
 * other SERIALIZABLE transactions is, then said as what it is, not as a
 * database or role defaulting to SERIALIZABLE with READ COMMITTED to set.
 *
 * The standby cancels at once (`max_standby_streaming_delay = 0`, where a
 * standby behind its primary by more than the default 30 s does the same);
 * the read is held on a lock on `relayer.holds`, which it takes after its
 * lock on `relayer.intents`, while the primary's `LOCK TABLE
 * relayer.intents`, replayed, finds it in the way, once per ask.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { PAIR_CLIENT, startPair } from "./_postgres_pair.ts";

/**
 * The read on the standby, cancelled by recovery at every ask: its
 * message. `german`: both servers word their errors in German (see
 * `postgres_localized_messages_test.ts`).
 */
async function conflicted(german: boolean): Promise<string> {
  const pair = await startPair(
    german
      ? { settings: { lc_messages: "C.UTF-8" }, env: { LANGUAGE: "de" } }
      : {},
  );
  const { password, port } = pair.primary;
  const primaryUrl =
    `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
  const standbyUrl =
    `postgres://postgres:${password}@127.0.0.1:${pair.standbyPort}/postgres`;
  const primary = postgres(primaryUrl, { ...PAIR_CLIENT, max: 3 });
  const standbyAdmin = postgres(standbyUrl, { ...PAIR_CLIENT, max: 1 });
  const standby = postgres(standbyUrl, { ...PAIR_CLIENT, max: 1 });
  let store: PostgresStore | undefined;
  // Reserved inside the try, so a failure there still stops the pair.
  let lock: postgres.ReservedSql | undefined;
  try {
    lock = await primary.reserve();
    const owner = new PostgresStore(primary, { schema: "relayer" });
    await owner.migrate();
    await owner.createIntent({ id: "a", state: "authorized" });
    await standbyAdmin.unsafe(
      `ALTER SYSTEM SET max_standby_streaming_delay = 0`,
    );
    await standbyAdmin.unsafe(`SELECT pg_reload_conf()`);
    for (let waited = 0;; waited += 50) {
      const [row] = await standbyAdmin<{ n: number }[]>`
          SELECT count(*)::int AS n FROM relayer.intents WHERE id = 'a'`;
      const [delay] = await standbyAdmin`SHOW max_standby_streaming_delay`;
      if (row?.n === 1 && delay?.max_standby_streaming_delay === "0") break;
      assert.ok(waited < 10_000, "the standby never replayed the intent");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    store = new PostgresStore(standby, { schema: "relayer" });
    // Held open on the primary: replayed, the standby's read waits for it.
    await lock.unsafe(
      `BEGIN; LOCK TABLE relayer.holds IN ACCESS EXCLUSIVE MODE`,
    );
    // A commit flushes the WAL up to it, the lock's record with it.
    await primary.unsafe(`SELECT txid_current()`);
    for (let waited = 0;; waited += 20) {
      const [row] = await standbyAdmin<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_locks
          WHERE mode = 'AccessExclusiveLock'
            AND relation = 'relayer.holds'::regclass`;
      if ((row?.n ?? 0) > 0) break;
      assert.ok(waited < 10_000, "the standby never replayed the lock");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const reading = store.getIntent("a").then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    let settled = false;
    void reading.then(() => settled = true);
    for (let cancels = 0; !settled; cancels++) {
      assert.ok(cancels < 10, "the read was asked again past its limit");
      // The read waits on relayer.holds, its lock on relayer.intents held.
      for (let waited = 0; !settled; waited += 20) {
        const [row] = await standbyAdmin<{ n: number }[]>`
            SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE wait_event_type = 'Lock' AND backend_type = 'client backend'`;
        if ((row?.n ?? 0) > 0) break;
        assert.ok(waited < 10_000, "the store's read never waited");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      if (settled) break;
      // Replayed, this lock finds the read in the way: cancelled at once.
      await primary.begin((sql) =>
        sql.unsafe(`LOCK TABLE relayer.intents IN ACCESS EXCLUSIVE MODE`)
      );
      for (let waited = 0; !settled && waited < 2_000; waited += 20) {
        const [row] = await standbyAdmin<{ n: number }[]>`
            SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE wait_event_type = 'Lock' AND backend_type = 'client backend'`;
        if ((row?.n ?? 0) === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    const read = await reading;
    assert.ok("error" in read, "the read answered");
    return (read.error as Error).message;
  } finally {
    await lock?.unsafe(`ROLLBACK`).catch(() => {});
    lock?.release();
    store?.close();
    await standby.end({ timeout: 1 });
    await standbyAdmin.end({ timeout: 1 });
    await primary.end({ timeout: 1 });
    await pair.stop();
  }
}

/** Asserts that `message` says the read met recovery on a standby. */
function saidAsRecovery(message: string): void {
  // Asked again three times, each cancelled in turn.
  assert.match(message, /ended it 4 times for a conflict with recovery/);
  // Said as what it is: no SERIALIZABLE transaction was involved.
  assert.doesNotMatch(message, /serializable|READ COMMITTED/, message);
  assert.match(message, /hot standby/, message);
  assert.match(message, /nothing was read/, message);
}

Deno.test({
  name:
    "PostgresStore's read on a hot standby that recovery cancels at every ask (40001, a conflict with recovery) says the server is a standby whose replay ended it and that nothing was read, not that the database defaults to SERIALIZABLE",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => saidAsRecovery(await conflicted(false))),
});

Deno.test({
  name:
    "PostgresStore's read on a hot standby that recovery cancels at every ask says so on servers whose words are German too ('storniere Anfrage wegen Konflikt mit der Wiederherstellung'), not that the database defaults to SERIALIZABLE",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const message = await conflicted(true);
    assert.match(message, /Konflikt mit der Wiederherstellung/);
    saidAsRecovery(message);
  }),
});
