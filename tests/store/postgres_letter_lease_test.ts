/**
 * A dead letter that takes the intent's lease (a delivery's drop of an
 * authorized intent's job, see relayer/relayer.ts) moves the intent's
 * version in its commit: a copy of the message that read the intent
 * before the letter, and flies its write ahead of a send after it, finds
 * the version moved and sends nothing behind a letter that says the job
 * was dropped.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ConflictError } from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import {
  afterFirstRead,
  openPostgresStore,
  postgresAvailable,
} from "../_postgres.ts";
import { deadLetter } from "./_contract.ts";

Deno.test({
  name:
    "PostgresStore: a write ahead of a send whose read came before a dead letter that took the lease is refused, and the letter's lease stands",
  ignore: !postgresAvailable,
  async fn() {
    const { store, sql, schema, close } = await openPostgresStore();
    try {
      const read = await store.createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      // The copy's read answers; before its flight, the drop's letter
      // lands on the version both read, taking the lease.
      const copy = new PostgresStore(
        afterFirstRead(sql, async () => {
          await store.putDeadLetter(
            deadLetter("pi_1/settle", 10),
            {
              intentVersion: read.version,
              lease: { owner: "drop", ttlMs: 60_000, now: 10, keep: true },
            },
          );
        }),
        { schema },
      );
      await assert.rejects(
        copy.transition("pi_1", {
          from: "authorized",
          to: "settling",
          version: read.version,
          at: 11,
        }, { lease: { owner: "copy", ttlMs: 60_000, now: 11, keep: true } }),
        (error) => error instanceof ConflictError && !error.refused,
      );
      const after = (await store.getIntent("pi_1"))!;
      assert.equal(after.state, "authorized", "nothing of the copy's write");
      assert.notEqual(after.version, read.version, "the letter moved it");
      const [lease] = await sql.unsafe(
        `SELECT owner FROM "${schema}".leases WHERE intent_id = 'pi_1'`,
      );
      assert.equal(lease?.owner, "drop");
    } finally {
      await close();
    }
  },
});
