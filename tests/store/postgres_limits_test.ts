/**
 * PostgresStore against PostgreSQL's own limit on its keys, on a real
 * server: a btree index entry holds at most 2,704 bytes (8 KiB pages), so
 * a count key, replay key or dead letter's job id longer than its index
 * holds is refused in the store's words before anything is read or
 * written (PostgreSQL's own, "index row size … exceeds btree version 4
 * maximum 2704 for index …", names neither the field nor the fix), and
 * one at the limit is kept and read back.
 *
 * @module
 */

import assert from "node:assert/strict";
import { openPostgresStore, postgresAvailable } from "../_postgres.ts";
import { deadLetter } from "./_contract.ts";

const ignore = !postgresAvailable;

/** A refusal in the store's words, naming the field, its size and the limit. */
function overLimit(field: string, bytes: number, limit: number) {
  return (error: unknown) =>
    error instanceof TypeError &&
    error.message.includes(
      `as '${field}' is ${bytes} bytes of UTF-8, over PostgresStore's limit of ${limit}`,
    ) &&
    error.message.endsWith("Nothing was written.");
}

/** `n` bytes of random letters and digits: text PostgreSQL cannot compress to fit. */
function incompressible(n: number): string {
  const alphabet =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  return Array.from(
    crypto.getRandomValues(new Uint8Array(n)),
    (b) => alphabet[b % alphabet.length],
  ).join("");
}

Deno.test({
  name:
    "PostgresStore refuses a count, claim or job id too long for its index in its own words, before it writes anything, and keeps one at the limit",
  ignore,
  async fn() {
    const { store, sql, schema, close } = await openPostgresStore();
    /** Every row of every table, to show that nothing was written. */
    const rows = async () =>
      await Promise.all(
        ["intents", "holds", "leases", "counters", "claims", "dead_letters"]
          .map((table) =>
            sql.unsafe(`SELECT * FROM "${schema}".${table} ORDER BY 1`)
          ),
      ).then((tables) => JSON.stringify(tables));
    try {
      const intent = await store.createIntent({
        id: "pi_1",
        state: "settling",
        hold: "pending",
        settlingSince: 0,
      });
      // A count that lapsed: the sweep due at this schema's first count or
      // claim (a write) would delete it.
      await sql.unsafe(
        `INSERT INTO "${schema}".counters VALUES ('old/settle', 1, 1)`,
      );
      const before = await rows();
      const key = incompressible(2693);
      const jobId = incompressible(2685); // fits its key, not the index by time
      await assert.rejects(
        store.admit({ count: key, now: 100 }),
        overLimit("count", 2693, 2692),
      );
      await assert.rejects(
        store.admit({ claim: { key, now: 100, expiresAt: 200 }, now: 100 }),
        overLimit("claim.key", 2693, 2692),
      );
      await assert.rejects(
        store.admit({
          count: "pi_1/settle",
          claim: { key, now: 100, expiresAt: 200 },
          now: 100,
        }),
        overLimit("claim.key", 2693, 2692),
      );
      await assert.rejects(
        store.putDeadLetter(deadLetter(jobId, 5)),
        overLimit("jobId", 2685, 2684),
      );
      await assert.rejects(
        store.putDeadLetter(deadLetter("pi_1/settle", 5), {
          claim: { key, now: 100, expiresAt: 200 },
        }),
        overLimit("claim.key", 2693, 2692),
      );
      // A dead letter's marks are counts of its commit.
      await assert.rejects(
        store.putDeadLetter(deadLetter("pi_1/settle", 5), {
          marks: { keys: ["givingup/qstash/message/m1", key], now: 100 },
        }),
        overLimit("marks.keys", 2693, 2692),
      );
      // The poison resolution's one flight: the intent stays as it was.
      await assert.rejects(
        store.transition("pi_1", {
          from: "settling",
          to: "needs_review",
          version: intent.version,
          at: 5,
          deadLetter: { ...deadLetter("pi_1/settle", 5), jobId },
        }),
        overLimit("jobId", 2685, 2684),
      );
      await assert.rejects(
        store.beginBroadcast("pi_1", intent.version, 5, {
          claim: { key, now: 100, expiresAt: 200 },
          lease: { owner: "d1", ttlMs: 60_000, now: 100, keep: true },
        }),
        overLimit("claim.key", 2693, 2692),
      );
      // Bytes, not characters: 898 euro signs are 2,694 bytes.
      await assert.rejects(
        store.admit({ count: "€".repeat(898), now: 100 }),
        overLimit("count", 2694, 2692),
      );
      assert.equal(await rows(), before, "nothing was written, nor swept");
      // At the limit, whatever PostgreSQL can compress: kept, and read back.
      const longest = incompressible(2692);
      assert.equal(await store.admit({ count: longest, now: 100 }), 1);
      assert.equal(await store.deliveries(longest, 100), 1);
      assert.equal(
        await store.admit({
          claim: { key: longest, now: 100, expiresAt: 200 },
          now: 100,
        }),
        null,
      );
      const letter = deadLetter(incompressible(2684), 6);
      await store.putDeadLetter(letter);
      assert.equal(
        (await store.getDeadLetter(letter.jobId))?.jobId,
        letter.jobId,
      );
      const moved = await store.transition("pi_1", {
        from: "settling",
        to: "needs_review",
        version: intent.version,
        at: 7,
        deadLetter: {
          ...deadLetter(incompressible(2684), 7),
          intentId: "pi_1",
        },
      });
      assert.equal(moved.state, "needs_review");
      // A key too long to be on record is read as absent, as on every store.
      assert.equal(await store.deliveries(key), 0);
      assert.equal(await store.getDeadLetter(jobId), null);
    } finally {
      await close();
    }
  },
});
