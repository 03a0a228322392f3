/**
 * PostgresStore on a database that turned read-only under it (a primary
 * demoted in a failover, a standby it was pointed at, or
 * `ALTER SYSTEM SET default_transaction_read_only = on` and a reload): on a
 * real server, every write is refused with nothing written, and says so,
 * not as the server's bare "cannot execute … in a read-only transaction".
 *
 * @module
 */

import assert from "node:assert/strict";
import { isNotWritten } from "../../store/_not_written.ts";
import { isReadOnly } from "../../store/_read_only.ts";
import {
  onFreshSchema,
  onReadOnlySchema,
  postgresAvailable,
  serverUpFirst,
} from "../_postgres.ts";

const READ_ONLY =
  /^Cannot .+ as PostgreSQL refused it as read-only \(a standby, a primary that failed over and is not writable yet, or default_transaction_read_only = on\): nothing was written; retry once the database takes writes, and check that the store's URL names the primary$/;

serverUpFirst();

Deno.test({
  name:
    "PostgresStore's writes on a read-only database fail with nothing written, say so and are marked so, never as the server's bare PostgresError",
  ignore: !postgresAvailable,
  fn: onReadOnlySchema(async ({ store, writable }) => {
    // Set up through a writable client, on the same schema.
    await writable.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    await writable.createIntent({
      id: "pi_2",
      state: "settling",
      hold: "pending",
      settlingSince: 0,
    });
    await writable.createIntent({ id: "pi_4" });
    await writable.putDeadLetter({
      jobId: "pi_1/settle",
      intentId: "pi_1",
      deliveries: 5,
      cause: "exhausted",
      reason: "no luck after 5 deliveries",
      resolution: "job dropped, intent still authorized",
      lastError: "timeout",
      poisonedAt: 1,
    });
    const one = (await store.getIntent("pi_1"))!;
    const two = (await store.getIntent("pi_2"))!;
    const letter = (await store.getDeadLetter("pi_1/settle"))!;
    const lease = { owner: "d1", ttlMs: 30_000, now: 10, keep: true };
    const writes: [string, () => Promise<unknown>][] = [
      ["createIntent", () => store.createIntent({ id: "pi_3" })],
      [
        "transition",
        () =>
          store.transition("pi_1", {
            from: "authorized",
            to: "settling",
            version: one.version,
            at: 10,
          }, { lease }),
      ],
      [
        "beginBroadcast",
        () => store.beginBroadcast("pi_2", two.version, 10, { lease }),
      ],
      [
        "recordBroadcast",
        () =>
          store.recordBroadcast("pi_2", two.version, {
            outcome: "sent",
            txHash: "0xabc",
            at: 10,
          }, { lease }),
      ],
      [
        "transition to review (a give-up)",
        () =>
          store.transition("pi_2", {
            from: "settling",
            to: "needs_review",
            version: two.version,
            at: 10,
          }),
      ],
      ["recordHold", () => store.recordHold("pi_4")],
      ["admit", () => store.admit({ count: "pi_1/settle", now: 10 })],
      [
        "putDeadLetter",
        () =>
          store.putDeadLetter({
            jobId: "pi_2/settle",
            intentId: "pi_2",
            deliveries: 5,
            cause: "exhausted",
            reason: "no luck after 5 deliveries",
            resolution: "needs review",
            lastError: "timeout",
            poisonedAt: 10,
          }),
      ],
      ["redrive", () => store.redrive("pi_1/settle", letter.version)],
    ];
    for (const [name, write] of writes) {
      await assert.rejects(write(), (error: Error) => {
        assert.equal(error.name, "Error", `${name}: ${error.name}`);
        assert.match(error.message, READ_ONLY, name);
        assert.equal((error.cause as { code?: unknown })?.code, "25006");
        // Marked so: the relayer takes a send's record refused so as one
        // that failed ("its record failed", the write-ahead kept), not one
        // that may have landed; the routes name the read-only database.
        assert.equal(isNotWritten(error), true, name);
        assert.equal(isReadOnly(error), true, name);
        return true;
      }, name);
    }
    // Nothing of them landed.
    assert.deepEqual(await writable.getIntent("pi_1"), one);
    assert.deepEqual(await writable.getIntent("pi_2"), two);
    assert.equal(await writable.getIntent("pi_3"), null);
    assert.equal((await writable.getIntent("pi_4"))?.hold, null);
    assert.deepEqual(await writable.getDeadLetter("pi_1/settle"), letter);
    assert.equal(await writable.getDeadLetter("pi_2/settle"), null);
  }),
});

Deno.test({
  name:
    "PostgresStore keeps the session of a write the database refused for another cause than read-only: only a read-only refusal closes it",
  ignore: !postgresAvailable,
  fn: onFreshSchema({ max: 1 }, async ({ admin, schema, sql, store }) => {
    await admin.unsafe(
      `ALTER TABLE "${schema}".intents ADD CONSTRAINT refused CHECK (id <> 'pi_9')`,
    );
    const session = async () =>
      (await sql`SELECT pg_backend_pid() AS pid`)[0]!.pid as number;
    const before = await session();
    for (const id of ["pi_9", "pi_9"]) {
      await assert.rejects(
        store.createIntent({ id }),
        (error: Error) =>
          (error.cause as { code?: unknown }).code === "23514" &&
          !isReadOnly(error),
      );
    }
    await store.createIntent({ id: "pi_1" });
    assert.equal(await session(), before);
  }),
});
