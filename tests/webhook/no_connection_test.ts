/**
 * The ops routes on a PostgreSQL store whose pool has no connection to give
 * a write (every one taken, the server unreachable): on a real server, the
 * write gets none within `connectionWaitMs`, sends nothing, and the route
 * answers that nothing changed, not that the write may have landed.
 *
 * @module
 */

import assert from "node:assert/strict";
import type postgres from "postgres";
import { createApp } from "../../webhook/app.ts";
import { type Job, ScriptedSender } from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import {
  afterFirstRead,
  answeredAs,
  onFreshSchema,
  postgresAvailable,
  serverUpFirst,
} from "../_postgres.ts";

const OPS = "ops-token-for-tests";
const headers = {
  authorization: `Bearer ${OPS}`,
  "content-type": "application/json",
};
const WAIT_MS = 300;
const NOT_WRITTEN = [
  /^The creation of intent pi_1 was not written \(the relayer's log says why\): nothing changed; try again\.$/,
  /^The resolution of intent pi_2 was not written \(the relayer's log says why\): nothing changed; try again\.$/,
  /^The redrive of pi_3\/settle was not written \(the relayer's log says why\): its dead letter stays; try again\. A job it queued before the store failed is harmless, as it only says "go and look"\.$/,
];

/** pi_2 moved to review from settling, with nothing recorded sent. */
async function inReview(store: PostgresStore) {
  const settling = await store.createIntent({
    id: "pi_2",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
  });
  return await store.transition("pi_2", {
    from: "settling",
    to: "needs_review",
    version: settling.version,
    at: 1,
  });
}

/** Takes the one connection of `sql`'s pool until `release()`. */
async function takePool(sql: postgres.Sql): Promise<() => void> {
  const held = await sql.reserve();
  return () => held.release();
}

serverUpFirst();

for (const fetchTypes of [true, false]) {
  Deno.test({
    name:
      `createApp() on a PostgreSQL store whose pool gives a write no connection (fetch_types: ${fetchTypes}): an operator's creation, resolution and redrive answer 503 with nothing changed, not that they may have landed`,
    ignore: !postgresAvailable,
    fn: onFreshSchema(
      { max: 1, fetchTypes, connectionWaitMs: WAIT_MS },
      async ({ admin, schema, sql }) => {
        const check = new PostgresStore(admin, { schema });
        const review = await inReview(check);
        await check.createIntent({ id: "pi_3", state: "authorized" });
        await check.putDeadLetter({
          jobId: "pi_3/settle",
          intentId: "pi_3",
          deliveries: 3,
          cause: "exhausted",
          reason: "no luck after 3 deliveries",
          resolution: "job dropped, intent still authorized",
          lastError: "not authorized yet",
          poisonedAt: 1,
        });
        const letter = await check.getDeadLetter("pi_3/settle");
        // The pool's one connection is taken once the route's reads are
        // done: at the resolution's write's own read, at the redrive's
        // publish, and before the creation, which reads nothing.
        let release = () => {};
        const store = new PostgresStore(
          afterFirstRead(sql, async () => {
            release = await takePool(sql);
          }),
          { schema, connectionWaitMs: WAIT_MS },
        );
        const lines: string[] = [];
        const app = createApp({
          store,
          sender: new ScriptedSender({}),
          opsToken: OPS,
          log: (line) => lines.push(line),
          redriveTo: {
            publish: async (_job: Job) => {
              release = await takePool(sql);
            },
          },
        });
        const answers: Response[] = [];
        release = await takePool(sql);
        try {
          answers.push(
            await app.request("/v1/intents", {
              method: "POST",
              headers,
              body: '{"id":"pi_1","state":"authorized"}',
            }),
          );
        } finally {
          release();
        }
        try {
          answers.push(
            await app.request("/v1/intents/pi_2/resolve", {
              method: "POST",
              headers,
              body: JSON.stringify({ to: "settled", version: review.version }),
            }),
          );
        } finally {
          release();
        }
        try {
          answers.push(
            await app.request("/v1/dead-letters/pi_3%2Fsettle/redrive", {
              method: "POST",
              headers,
            }),
          );
        } finally {
          release();
        }
        assert.equal(answers.length, NOT_WRITTEN.length);
        for (const [i, res] of answers.entries()) {
          const problem = await res.json();
          assert.equal(res.status, 503, JSON.stringify(problem));
          assert.equal(
            problem.type,
            `urn:relayer:problem:${i < 2 ? "store" : "redrive"}-failed`,
          );
          assert.match(problem.detail, NOT_WRITTEN[i]!);
        }
        assert.equal(await check.getIntent("pi_1"), null);
        assert.deepEqual(await check.getIntent("pi_2"), review);
        assert.deepEqual(await check.getDeadLetter("pi_3/settle"), letter);
        assert.equal(
          lines.filter((line) =>
            line.includes(
              `PostgreSQL gave the store no connection within ${WAIT_MS}ms`,
            )
          ).length,
          3,
          lines.join("\n"),
        );
      },
    ),
  });
}

Deno.test({
  name:
    "createApp() on a closed PostgresStore (the process stopping): an operator's creation answers 503 with nothing changed, not that it may have landed, and a read that it read nothing and wrote nothing (the store refused it as closed)",
  ignore: !postgresAvailable,
  fn: onFreshSchema({}, async ({ admin, schema, store }) => {
    const app = createApp({
      store,
      sender: new ScriptedSender({}),
      opsToken: OPS,
      log: () => {},
    });
    store.close();
    const created = await app.request("/v1/intents", {
      method: "POST",
      headers,
      body: '{"id":"pi_1","state":"authorized"}',
    });
    assert.equal(created.status, 503);
    // Before: "… failed before the store answered (…): it may have landed
    // or not. Read it (GET /v1/intents/pi_1) before you try again."
    assert.match((await created.json()).detail, NOT_WRITTEN[0]!);
    const read = await app.request("/v1/intents/pi_1", { headers });
    assert.equal(read.status, 503);
    assert.equal(
      (await read.json()).detail,
      "The read of intent pi_1 read nothing and wrote nothing (its read of the store failed: the relayer's log says why): nothing changed; try again.",
    );
    const listed = await app.request("/v1/dead-letters", { headers });
    assert.equal(listed.status, 503);
    assert.equal(
      (await listed.json()).detail,
      "The listing of dead letters read nothing and wrote nothing (its read of the store failed: the relayer's log says why): nothing changed; try again.",
    );
    assert.equal(
      await new PostgresStore(admin, { schema }).getIntent("pi_1"),
      null,
    );
  }),
});

for (const fetchTypes of [true, false]) {
  Deno.test({
    name:
      `createApp() on a PostgreSQL store whose pool gives a resolution's own read of the intent no connection (fetch_types: ${fetchTypes}): it answers 503 with nothing changed, not that it may have landed`,
    ignore: !postgresAvailable,
    fn: onFreshSchema(
      { max: 1, fetchTypes, connectionWaitMs: WAIT_MS },
      async ({ admin, schema, sql }) => {
        const check = new PostgresStore(admin, { schema });
        const review = await inReview(check);
        // Taken once the route's read (without the lease) has answered:
        // the write's own read, with the lease, then gets no connection.
        let release = () => {};
        let armed = true;
        const store = new PostgresStore(
          answeredAs(sql, (text) => {
            if (!armed || !/AS hold\b/.test(text)) return undefined;
            if (text.includes("lease_owner")) return undefined;
            armed = false;
            return async (rows) => {
              release = await takePool(sql);
              return rows;
            };
          }),
          { schema, connectionWaitMs: WAIT_MS },
        );
        const lines: string[] = [];
        const app = createApp({
          store,
          sender: new ScriptedSender({}),
          opsToken: OPS,
          log: (line) => lines.push(line),
        });
        let res: Response;
        try {
          res = await app.request("/v1/intents/pi_2/resolve", {
            method: "POST",
            headers,
            body: JSON.stringify({ to: "settled", version: review.version }),
          });
        } finally {
          release();
        }
        assert.equal(armed, false, "the route's read was not seen");
        const problem = await res.json();
        assert.equal(res.status, 503, JSON.stringify(problem));
        // Before: "… failed before the store answered (…): it may have
        // landed or not. Read the intent again …".
        assert.match(problem.detail, NOT_WRITTEN[1]!);
        assert.ok(
          lines.some((line) =>
            line.includes(
              `PostgreSQL did not answer the store's read within ${WAIT_MS}ms`,
            )
          ),
          lines.join("\n"),
        );
        assert.deepEqual(await check.getIntent("pi_2"), review);
      },
    ),
  });
}
