/**
 * PostgresStore on a real server whose tables carry a deferred constraint
 * trigger of an operator's (an audit rule checked at commit): a write it
 * refuses fails at its commit, saying why, nothing of it written, and the
 * writes queued behind it on the connection land, on both write paths.
 * Through `sql.begin` (`fetch_types: false`) the store commits with
 * `COMMIT AND CHAIN`; failed there, the transaction ended without a new
 * one chained, postgres.js 3.4.9 handed the connection back to the pool,
 * and the `ROLLBACK` it then sent for the failed callback was queued on a
 * connection no longer its own, never sent: the write never answered.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  onFreshSchema,
  postgresAvailable,
  serverUpFirst,
} from "../_postgres.ts";

const NOW = 1_767_225_600_000;

const claim = (key: string) => ({ key, now: NOW, expiresAt: NOW + 60_000 });

/** How a call settled, or `"unanswered"` after `ms`. */
function within(call: Promise<unknown>, ms: number): Promise<string> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    call.then(
      (answer) => `answered ${String(answer)}`,
      (error: Error) => `failed: ${error.message}`,
    ),
    new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve("unanswered"), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

serverUpFirst();

for (const fetchTypes of [true, false]) {
  const path = fetchTypes ? "" : "through sql.begin (fetch_types: false), ";
  Deno.test({
    name:
      `PostgresStore: ${path}a write a deferred constraint trigger refuses at commit fails saying so, nothing of it written, and the writes queued behind it land`,
    ignore: !postgresAvailable,
    fn: onFreshSchema(
      { fetchTypes, connectionWaitMs: 2_000 },
      async ({ admin, schema, store }) => {
        await admin.unsafe(`
        CREATE FUNCTION "${schema}".audit() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.job_id LIKE 'refused%' THEN
            RAISE EXCEPTION 'refused by the audit';
          END IF;
          RETURN NULL;
        END $$;
        CREATE CONSTRAINT TRIGGER audit AFTER INSERT OR UPDATE
          ON "${schema}".counters DEFERRABLE INITIALLY DEFERRED
          FOR EACH ROW EXECUTE FUNCTION "${schema}".audit()`);
        // The statements prepared on the connection, as a running service
        // has them.
        for (const job of ["warm_1", "warm_2"]) {
          await store.admit({ count: job, claim: claim(job), now: NOW });
        }
        const jobs = ["refused_1", "job_2", "job_3", "refused_4", "job_5"];
        const answers = await Promise.all(
          jobs.map((job) =>
            within(
              store.admit({ count: job, claim: claim(job), now: NOW }),
              5_000,
            )
          ),
        );
        // Before: each refused write stayed unanswered. The refusal names
        // the trigger's function as one the store did not make, in the
        // server's words (tests/store/postgres_outside_rules_test.ts).
        const named =
          /^failed: Cannot admit a delivery as PostgreSQL refused it for the function t\w+\.audit\(\), a trigger's \(refused by the audit\), which the store's migration does not make \(added to its tables since\): nothing of it was written; /;
        assert.deepEqual(
          answers.map((answer) =>
            named.test(answer) ? "failed: refused by the audit" : answer
          ),
          [
            "failed: refused by the audit",
            "answered 1",
            "answered 1",
            "failed: refused by the audit",
            "answered 1",
          ],
        );
        const counted = await admin.unsafe(
          `SELECT job_id FROM "${schema}".counters
          WHERE job_id NOT LIKE 'warm%' ORDER BY job_id`,
        );
        const claimed = await admin.unsafe(
          `SELECT key FROM "${schema}".claims
          WHERE key NOT LIKE 'warm%' ORDER BY key`,
        );
        assert.deepEqual(counted.map((row) => String(row.job_id)), [
          "job_2",
          "job_3",
          "job_5",
        ]);
        assert.deepEqual(claimed.map((row) => String(row.key)), [
          "job_2",
          "job_3",
          "job_5",
        ]);
        // The connection went back to the pool, in no transaction.
        assert.equal(await store.admit({ count: "job_6", now: NOW }), 1);
      },
    ),
  });
}

for (const fetchTypes of [true, false]) {
  const path = fetchTypes ? "" : "through sql.begin (fetch_types: false), ";
  Deno.test({
    name:
      `PostgresStore: ${path}a deferred constraint trigger sees the write's transaction whole, each of its statements run, as at commit`,
    ignore: !postgresAvailable,
    fn: onFreshSchema({ fetchTypes }, async ({ admin, schema, store }) => {
      // An operator's audit of hold changes, deferred: it records each
      // with its intent's version as the transaction left it.
      await admin.unsafe(`
        CREATE TABLE "${schema}".hold_audit (intent_id text, state text,
          version bigint);
        CREATE FUNCTION "${schema}".audit() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO "${schema}".hold_audit
            SELECT NEW.intent_id, NEW.state, i.version
            FROM "${schema}".intents i WHERE i.id = NEW.intent_id;
          RETURN NULL;
        END $$;
        CREATE CONSTRAINT TRIGGER audit AFTER UPDATE
          ON "${schema}".holds DEFERRABLE INITIALLY DEFERRED
          FOR EACH ROW EXECUTE FUNCTION "${schema}".audit()`);
      await store.createIntent({ id: "pi_1", hold: "pending" });
      // The hold's update, then the intent's version moved: one flight.
      assert.equal(await store.voidHold("pi_1"), "voided");
      const audited = await admin.unsafe(
        `SELECT intent_id, state, version FROM "${schema}".hold_audit`,
      );
      assert.deepEqual(
        audited.map((row) => `${row.intent_id} ${row.state} at ${row.version}`),
        ["pi_1 voided at 2"],
      );
    }),
  });
}
