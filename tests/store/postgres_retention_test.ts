/**
 * What PostgresStore removes, on a real server: rows that would otherwise
 * pile up in a service that runs for months.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  freshDatabase,
  openPostgresStore,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";

const DAY = 24 * 60 * 60 * 1000;

/**
 * A settling pi_1 whose delivery "a" wrote ahead at 0, keeping its lease
 * for 60 s, and died: the intent as that write left it.
 */
async function leaseLeft(store: PostgresStore) {
  const created = await store.createIntent({
    id: "pi_1",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
  });
  return await store.beginBroadcast("pi_1", created.version, 0, {
    lease: { owner: "a", ttlMs: 60_000, now: 0, keep: true },
  });
}

Deno.test({
  name:
    "PostgresStore: a lease a crashed delivery left is deleted by the next write that releases, once it has lapsed",
  ignore: !postgresAvailable,
  async fn() {
    const { store, sql, schema, close } = await openPostgresStore();
    try {
      // Delivery a writes ahead, keeps its lease for 60 s, and dies.
      const ahead = await leaseLeft(store);
      // Delivery b, after the lease lapsed, records and ends the intent.
      const recorded = await store.recordBroadcast(
        "pi_1",
        ahead.version,
        { outcome: "unknown", at: 60_000 },
        { lease: { owner: "b", ttlMs: 60_000, now: 60_000 } },
      );
      await store.transition("pi_1", {
        from: "settling",
        to: "needs_review",
        version: recorded.version,
        at: 60_001,
      }, { lease: { owner: "b", ttlMs: 60_000, now: 60_001 } });
      const [row] = await sql.unsafe(
        `SELECT count(*)::int AS n FROM "${schema}".leases`,
      );
      assert.equal(row!.n, 0, "a's lapsed lease is gone");
    } finally {
      await close();
    }
  },
});

Deno.test({
  name:
    "PostgresStore: a lease left on an intent nobody writes again (a crash, a give-up) is swept an hour after it lapsed, not kept for ever",
  ignore: !postgresAvailable,
  async fn() {
    const { store, sql, schema, close } = await openPostgresStore();
    try {
      await leaseLeft(store);
      const leases = async () => {
        const [row] = await sql.unsafe(
          `SELECT count(*)::int AS n FROM "${schema}".leases`,
        );
        return row!.n;
      };
      // A new process's first write sweeps: 59 minutes after the lapse the
      // lease stays, an hour after it goes.
      const { PostgresStore: Early } = await import(
        "../../store/postgres.ts?lease-early"
      );
      await new Early(sql, { schema }).admit({
        count: "pi_2/settle",
        now: 60_000 + 59 * 60_000,
      });
      assert.equal(await leases(), 1, "kept within the hour");
      const { PostgresStore: Late } = await import(
        "../../store/postgres.ts?lease-late"
      );
      await new Late(sql, { schema }).admit({
        count: "pi_3/settle",
        now: 60_000 + 60 * 60_000,
      });
      assert.equal(await leases(), 0, "swept after the hour");
    } finally {
      await close();
    }
  },
});

Deno.test({
  name:
    "PostgresStore: stores made per request (a Worker's) share the process's sweep schedule: one sweep for their first writes, not one each",
  ignore: !postgresAvailable,
  async fn() {
    const { schema, close } = await openPostgresStore();
    const sweeps: string[] = [];
    const watched = postgres(await postgresUrl(), {
      max: 2,
      onnotice: () => {},
      debug: (_connection, query) => {
        if (/DELETE FROM .*claims/s.test(query)) sweeps.push(query);
      },
    });
    try {
      for (let n = 0; n < 20; n++) {
        await new PostgresStore(watched, { schema }).admit({
          count: `pi_${n}/settle`,
          now: 0,
        });
      }
      assert.ok(sweeps.length <= 1, `${sweeps.length} sweeps for 20 writes`);
    } finally {
      await watched.end();
      await close();
    }
  },
});

Deno.test({
  name:
    "PostgresStore: two databases with one schema name in one process keep a sweep schedule each: one's writes do not use up the other's sweep",
  ignore: !postgresAvailable,
  async fn() {
    const first = await freshDatabase();
    const second = await freshDatabase();
    const a = postgres(first.url, { max: 1, onnotice: () => {} });
    const b = postgres(second.url, { max: 1, onnotice: () => {} });
    try {
      const schema = "tenant";
      await new PostgresStore(a, { schema }).migrate();
      await new PostgresStore(b, { schema }).migrate();
      // Expired counts in the second database, left by an earlier process.
      for (let n = 0; n < 5; n++) {
        await b.unsafe(
          `INSERT INTO tenant.counters (job_id, deliveries, expires_at) VALUES ($1, 1, 0)`,
          [`pi_${n}/settle`],
        );
      }
      // This process (a fresh copy of the module: the schedules are per
      // process) writes to the first database, then to the second.
      const { PostgresStore: Fresh } = await import(
        "../../store/postgres.ts?two-databases"
      );
      await new Fresh(a, { schema }).admit({ count: "pi_a/settle", now: DAY });
      await new Fresh(b, { schema }).admit({ count: "pi_b/settle", now: DAY });
      const [row] = await b.unsafe(
        `SELECT count(*)::int AS n FROM tenant.counters`,
      );
      assert.equal(row!.n, 1, "the second database's first write swept it");
    } finally {
      await a.end();
      await b.end();
      await first.drop();
      await second.drop();
    }
  },
});

Deno.test({
  name:
    "PostgresStore: a new process sweeps expired counts and replay records on its first write, so one that restarts often still sweeps",
  ignore: !postgresAvailable,
  async fn() {
    const { store, sql, schema, close } = await openPostgresStore();
    try {
      // A first process counts and claims a little, and restarts.
      for (let n = 0; n < 5; n++) {
        await store.admit({
          count: `pi_${n}/settle`,
          claim: { key: `sig-${n}`, now: 0, expiresAt: 60_000 },
          now: 0,
        });
      }
      const rows = async () => {
        const [row] = await sql.unsafe(
          `SELECT (SELECT count(*) FROM "${schema}".counters)::int AS counters,
                  (SELECT count(*) FROM "${schema}".claims)::int AS claims`,
        );
        return { counters: row!.counters, claims: row!.claims };
      };
      assert.deepEqual(await rows(), { counters: 5, claims: 5 });
      // The next process, 9 days later (a fresh copy of the module: the
      // sweep schedule is per process): its first write sweeps.
      const { PostgresStore: Restarted } = await import(
        "../../store/postgres.ts?restarted"
      );
      const next = new Restarted(sql, { schema });
      await next.admit({ count: "pi_9/settle", now: 9 * DAY });
      assert.deepEqual(await rows(), { counters: 1, claims: 0 });
    } finally {
      await close();
    }
  },
});

Deno.test({
  name:
    "PostgresStore: a dead letter's write that counts its marks sweeps as any write that counts, with nothing else to check (no claim, version nor lease)",
  ignore: !postgresAvailable,
  async fn() {
    const { store, sql, schema, close } = await openPostgresStore();
    try {
      // A count that lapsed: this schema's first write that counts sweeps it.
      await sql.unsafe(
        `INSERT INTO "${schema}".counters VALUES ('old/settle', 1, 1)`,
      );
      const mark = "givingup/qstash/message/m1";
      await store.putDeadLetter({
        jobId: "pi_1/settle",
        intentId: "pi_1",
        deliveries: 5,
        cause: "exhausted",
        reason: "no luck after 5 deliveries",
        resolution: "job dropped, intent still authorized",
        lastError: "not sent: delivery 5 is the last (maxDeliveries 5)",
        poisonedAt: 100,
      }, { marks: { keys: [mark], now: 100 } });
      const counted = await sql.unsafe(
        `SELECT job_id FROM "${schema}".counters ORDER BY job_id`,
      );
      assert.deepEqual(counted.map((row) => row.job_id), [mark]);
    } finally {
      await close();
    }
  },
});
