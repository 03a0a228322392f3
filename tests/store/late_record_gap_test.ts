/**
 * The record of a send whose give-up lands between that record's read (the
 * intent still settling, on the send's version) and its commit: the store
 * keeps its tx on the intent in review, as it does when the give-up landed
 * before the read (store/_rules.ts lateBroadcastRecorded). Answered as a
 * race lost instead, the tx is on no record but the sending process's
 * memory, and a fail posted to another instance voids the hold of the
 * payment it paid.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Intent } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { PostgresStore } from "../../store/postgres.ts";
import {
  betweenReadAndFlight,
  connect,
  openPostgresStore,
  postgresAvailable,
} from "../_postgres.ts";
import { beforeEachCommit } from "./_hooked_kv.ts";
import { gaveUp, writtenAhead } from "./_late_record.ts";

const SENT = { outcome: "sent", txHash: "0xT", at: 3 } as const;

function kept(intent: Intent) {
  assert.equal(intent.state, "needs_review");
  assert.equal(intent.hold, "pending");
  assert.deepEqual(intent.txHashes, ["0xT"]);
  assert.equal(intent.mayHaveSent, true);
}

Deno.test("KvStore keeps the tx of a send whose give-up lands between its record's read and its commit", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const other = new KvStore(kv);
    const ahead = await writtenAhead(other);
    let armed = true;
    // A store that has not cached the send's version (another instance of
    // the process's own, or one whose cache moved on): it reads, then
    // commits, and the give-up lands between the two.
    const store = new KvStore(
      beforeEachCommit(kv, async () => {
        if (!armed) return;
        armed = false;
        await gaveUp(other, ahead.version);
      }),
    );
    const written = await store.recordBroadcast("pi_1", ahead.version, SENT);
    kept(written);
    kept((await other.getIntent("pi_1"))!);
  } finally {
    kv.close();
  }
});

Deno.test({
  name:
    "PostgresStore keeps the tx of a send whose give-up lands between its record's read and its flight",
  ignore: !postgresAvailable,
  async fn() {
    const { schema, close } = await openPostgresStore();
    const sql = await connect(2);
    try {
      const other = new PostgresStore(sql, { schema });
      const ahead = await writtenAhead(other);
      let armed = true;
      const store = new PostgresStore(
        betweenReadAndFlight(sql, async () => {
          if (!armed) return;
          armed = false;
          await gaveUp(other, ahead.version);
        }),
        { schema },
      );
      const written = await store.recordBroadcast("pi_1", ahead.version, SENT);
      kept(written);
      kept((await other.getIntent("pi_1"))!);
    } finally {
      await sql.end();
      await close();
    }
  },
});
