/**
 * PostgresStore on a database whose encoding is not UTF8 (LATIN1, a legacy
 * payments database): free text a Sender or the relayer writes (an error
 * cut with "…", a node's message in another script) must still land.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import {
  createRelayer,
  MemoryStore,
  notSent,
  poison,
  ScriptedSender,
  type Store,
} from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { isNotWritten } from "../../store/_not_written.ts";
import { freshDatabase, postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

/** Runs `body` on a store in a fresh database of `encoding`, then drops it. */
function inDatabase(
  encoding: string,
  body: (store: PostgresStore, sql: postgres.Sql) => Promise<void>,
): (t: Deno.TestContext) => Promise<void> {
  return timeout(30_000, async () => {
    const database = await freshDatabase(
      `ENCODING '${encoding}' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`,
    );
    const sql = postgres(database.url, {
      max: 2,
      onnotice: () => {},
      max_lifetime: null,
    });
    const store = new PostgresStore(sql);
    try {
      await store.migrate();
      await body(store, sql);
    } finally {
      store.close();
      await sql.end({ timeout: 1 });
      await database.drop();
    }
  });
}

/** A node's refusal as viem words it: over 1,000 characters, which the relayer cuts with "…". */
const LONG = `insufficient funds for gas * price + value. Request Arguments: ${
  "from: 0x0000000000000000000000000000000000000001 ".repeat(30)
}`;

/** Delivers pi_1 once on `store`, its send refused with `error`; the intent after. */
async function declaredPoison(store: Store) {
  await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
  });
  const sender = new ScriptedSender({
    pi_1: {
      sends: [{ error: poison(notSent(new Error(LONG))) }, { txHash: "0xabc" }],
    },
  });
  const relayer = createRelayer({ store, sender, now: () => 1_000_000 });
  const outcome = await relayer.deliver(
    { intentId: "pi_1", kind: "settle" },
    1,
  );
  return { outcome, intent: await store.getIntent("pi_1") };
}

Deno.test({
  name:
    "PostgresStore on a LATIN1 database keeps a declared not-sent poison whose error the relayer cut with '…': the intent fails and its hold is voided, as on MemoryStore",
  ignore: !postgresAvailable,
  fn: inDatabase("LATIN1", async (store) => {
    const expected = await declaredPoison(new MemoryStore());
    assert.equal(expected.outcome.action, "poison");
    // Before: "retry Cannot record a broadcast for pi_1 as PostgreSQL text
    // cannot hold the character U+0000 (NUL)", the intent left settling with
    // its hold pending, and the next delivery sent the payment again.
    const { outcome, intent } = await declaredPoison(store);
    assert.equal(outcome.action, "poison", outcome.reason);
    assert.equal(intent?.state, "failed");
    assert.equal(intent?.hold, "voided");
    assert.equal(intent?.lastBroadcast?.outcome, "not_sent");
    const error = intent?.lastBroadcast?.error ?? "";
    assert.match(error, /^insufficient funds for gas/);
    assert.match(error, /\\u\{2026\} \(\d+ more characters\)$/);
  }),
});

Deno.test({
  name:
    "PostgresStore on a LATIN1 database keeps a dead letter whose text LATIN1 cannot hold, the characters it can as they are",
  ignore: !postgresAvailable,
  fn: inDatabase("LATIN1", async (store) => {
    await store.createIntent({ id: "pi_1", hold: "pending" });
    await store.putDeadLetter({
      jobId: "pi_1/settle",
      intentId: "pi_1",
      deliveries: 3,
      cause: "exhausted",
      reason: "no luck → after 3",
      resolution: "café: held",
      lastError: "余额不足 \0 😀",
      poisonedAt: 5,
    });
    const letter = await store.getDeadLetter("pi_1/settle");
    assert.equal(letter?.reason, "no luck \\u{2192} after 3");
    assert.equal(letter?.resolution, "café: held");
    assert.equal(
      letter?.lastError,
      "\\u{4f59}\\u{989d}\\u{4e0d}\\u{8db3} \\u{0} \\u{1f600}",
    );
  }),
});

Deno.test({
  name:
    "PostgresStore on a LATIN1 database names the encoding, not U+0000, when a value it does not mend holds a character LATIN1 cannot",
  ignore: !postgresAvailable,
  fn: inDatabase("LATIN1", async (store) => {
    await store.createIntent({ id: "pi_1", hold: "pending" });
    await assert.rejects(
      store.putDeadLetter({
        jobId: "pi_1/settle",
        intentId: "pi_1",
        deliveries: 3,
        cause: "exhausted",
        reason: "r",
        resolution: "r",
        lastError: "e",
        poisonedAt: 5,
        queue: { queue: "qstash", messageId: "msg_€" },
      }),
      (error: Error) => {
        assert.match(
          error.message,
          /^Cannot keep the dead letter of pi_1\/settle as this database's encoding \(LATIN1\) cannot hold a character of it \(character with byte sequence 0xe2 0x82 0xac in encoding "UTF8" has no equivalent in encoding "LATIN1"\): /,
        );
        return true;
      },
    );
  }),
});

Deno.test({
  name:
    "PostgresStore on a LATIN1 database reads nothing under an id or job id LATIN1 cannot hold, as on a UTF8 database, and a write under one names the encoding, marked nothing written",
  ignore: !postgresAvailable,
  fn: inDatabase("LATIN1", async (store) => {
    // Before: each read failed in the server's words alone, 'character
    // with byte sequence 0xe2 0x98 0x83 in encoding "UTF8" has no
    // equivalent in encoding "LATIN1"' (a UTF8 database answers none).
    assert.equal(await store.getIntent("pi_☃"), null);
    assert.equal(await store.deliveries("pi_☃/settle"), 0);
    assert.equal(await store.getDeadLetter("pi_☃/settle"), null);
    for (
      const write of [
        () => store.recordHold("pi_☃"),
        () => store.admit({ count: "pi_☃/settle", now: 1 }),
      ]
    ) {
      await assert.rejects(write(), (error: Error) => {
        assert.match(
          error.message,
          /as this database's encoding \(LATIN1\) cannot hold a character of it \(.*\): remove it from the id, key, tx hash or queue id, or keep the store in a UTF8 database; nothing was written$/,
        );
        // Before: not marked, so an operator's route said it may have landed.
        assert.equal(isNotWritten(error), true);
        return true;
      });
    }
  }),
});
