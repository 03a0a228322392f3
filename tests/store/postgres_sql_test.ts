/**
 * What only PostgresStore has: the migration, the schema option, the
 * client check, and races between connections of a real server (the
 * shared contract runs in `postgres_test.ts`).
 */
import assert from "node:assert/strict";
import postgres, { type Row } from "postgres";
import {
  BusyError,
  type Claim,
  ConflictError,
  createRelayer,
  type DeadLetter,
  type LeaseRequest,
  notSent,
  poison,
  ReplayError,
} from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { migrated } from "../../store/_postgres_schema.ts";
import { CLAIM_GRACE_MS } from "../../store/_rules.ts";
import {
  afterFirstRead,
  betweenReadAndFlight,
  connect,
  freshDatabase,
  freshSchema,
  onFreshSchema,
  openPostgresStore,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { deadLetter } from "./_contract.ts";
import { closeEach } from "../_raw_http.ts";
import { gaveUp, writtenAhead } from "./_late_record.ts";

const ignore = !postgresAvailable;

Deno.test("new PostgresStore() does no I/O and refuses a bad schema or a client that transforms what it reads", async () => {
  // A client on a port nothing listens on: construction must not touch it.
  const nowhere = postgres("postgres://nobody@127.0.0.1:1/none", {
    max: 1,
    connect_timeout: 1,
  });
  try {
    const store = new PostgresStore(nowhere);
    assert.ok(store);
    assert.throws(
      () => new PostgresStore(nowhere, { schema: 'x"; DROP TABLE y; --' }),
      /'schema' must be a lower-case SQL identifier/,
    );
    assert.throws(
      () => new PostgresStore(nowhere, { schema: "Relayer" }),
      TypeError,
    );
    assert.throws( // PostgreSQL reserves pg_ for its own schemas
      () => new PostgresStore(nowhere, { schema: "pg_relayer" }),
      /not starting with pg_/,
    );
    assert.throws(
      () => new PostgresStore({} as never),
      /not a postgres.js client/,
    );
    const camel = postgres("postgres://nobody@127.0.0.1:1/none", {
      transform: postgres.camel,
    });
    assert.throws(
      () => new PostgresStore(camel),
      /^TypeError: Cannot create PostgresStore as 'sql' transforms column names and values it reads, and the store reads its own rows: pass a client without transform.column or transform.value$/,
    );
    await camel.end();
    const rows = postgres("postgres://nobody@127.0.0.1:1/none", {
      transform: { row: (row) => ({ ...row, extra: 1 }), value: String },
    });
    assert.throws(
      () => new PostgresStore(rows),
      /as 'sql' transforms values and rows it reads, .*: pass a client without transform.value or transform.row$/,
    );
    await rows.end();
  } finally {
    await nowhere.end();
  }
});

/** Polls `query` (a row with a count `n`) until `n > 0`, for at most about 5 s. */
async function waitUntil(
  what: string,
  query: () => Promise<readonly Row[]>,
): Promise<void> {
  for (let tries = 0;; tries++) {
    const [row] = await query();
    if (row!.n > 0) return;
    if (tries > 500) throw new Error(`the store's call never ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Runs `body` with a pool of `connections` and a schema name no other
 * test uses; drops the schema and closes the pool after, whatever happens.
 */
/**
 * Another writer's hold change, in the transaction open on `sql`: takes
 * the lock of intent `id`, sets its hold to `state` and moves its version.
 */
async function changeHold(
  sql: Pick<postgres.Sql, "unsafe">,
  schema: string,
  id: string,
  state: string,
): Promise<void> {
  await sql.unsafe(
    `SELECT 1 FROM "${schema}".intents WHERE id = $1 FOR UPDATE`,
    [id],
  );
  await sql.unsafe(
    `UPDATE "${schema}".holds SET state = $1 WHERE intent_id = $2`,
    [state, id],
  );
  await sql.unsafe(
    `UPDATE "${schema}".intents SET version = version + 1 WHERE id = $1`,
    [id],
  );
}

/** A row whose `n` counts the backends the session that sends it blocks. */
const BLOCKED_BY_ME = `SELECT count(*)::int AS n FROM pg_stat_activity
  WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))`;

async function inFreshSchema(
  connections: number,
  body: (sql: postgres.Sql, schema: string) => Promise<void>,
): Promise<void> {
  const sql = await connect(connections);
  const schema = freshSchema();
  try {
    await body(sql, schema);
  } finally {
    await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await sql.end();
  }
}

Deno.test({
  name:
    "PostgresStore.listDeadLetters() starts a deep page at its place in the index, not by filtering every newer letter",
  ignore,
  fn: () =>
    inFreshSchema(2, async (sql, schema) => {
      const store = new PostgresStore(sql, { schema });
      await store.migrate();
      await sql.unsafe(`
        INSERT INTO "${schema}".dead_letters (job_id, intent_id, deliveries,
          cause, reason, resolution, last_error, poisoned_at)
        SELECT 'pi_' || i || '/settle', 'pi_' || i, 3, 'exhausted', 'r', 'x',
          'e', i FROM generate_series(1, 3000) AS i`);
      await sql.unsafe(`ANALYZE "${schema}".dead_letters`);
      // Walk to a page near the end, then explain the query the store sends
      // for the next one.
      let page = await store.listDeadLetters({ limit: 1000 });
      page = await store.listDeadLetters({ limit: 1000, cursor: page.cursor });
      const seen: { query: string; params: unknown[] }[] = [];
      const watched = postgres(await postgresUrl(), {
        max: 1,
        onnotice: () => {},
        debug: (_connection, query, params) => seen.push({ query, params }),
      });
      try {
        await new PostgresStore(watched, { schema }).listDeadLetters({
          limit: 50,
          cursor: page.cursor,
        });
        const listed = seen.find((q) => /FROM .*dead_letters/s.test(q.query))!;
        const [plan] = await sql.unsafe(
          `EXPLAIN (ANALYZE, FORMAT JSON) ${listed.query}`,
          listed.params as never[],
        );
        const text = JSON.stringify(plan);
        const removed = [...text.matchAll(/"Rows Removed by Filter":(\d+)/g)]
          .reduce((sum, m) => sum + Number(m[1]), 0);
        assert.ok(
          removed < 100,
          `the page filtered ${removed} rows out: the cursor is not an index bound`,
        );
      } finally {
        await watched.end();
      }
    }),
});

Deno.test({
  name: "PostgresStore.migrate() is idempotent, also when many run at once",
  ignore,
  fn: () =>
    inFreshSchema(8, async (sql, schema) => {
      await Promise.all(
        Array.from(
          { length: 6 },
          () => new PostgresStore(sql, { schema }).migrate(),
        ),
      );
      const store = new PostgresStore(sql, { schema });
      await store.createIntent({ id: "pi_1", hold: "pending" });
      await store.migrate();
      assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
      const tables = await sql`
        SELECT table_name FROM information_schema.tables
        WHERE table_schema = ${schema} ORDER BY table_name`;
      assert.deepEqual(tables.map((t) => t.table_name), [
        "claims",
        "counters",
        "dead_letters",
        "holds",
        "intents",
        "leases",
      ]);
    }),
});

Deno.test({
  name:
    "PostgresStore.migrate() adds tx_hashes to an intents table made before it, starting each row from its last sent hash",
  ignore,
  fn: () =>
    inFreshSchema(2, async (sql, schema) => {
      // The intents table as 0.1 made it, with one sent and one unknown
      // broadcast on record.
      await sql.unsafe(`CREATE SCHEMA "${schema}"`);
      await sql.unsafe(`CREATE TABLE "${schema}".intents (
        id text COLLATE "C" PRIMARY KEY,
        state text NOT NULL,
        settling_since bigint,
        broadcasting bigint,
        may_have_sent boolean NOT NULL DEFAULT false,
        last_outcome text,
        last_tx_hash text,
        last_at bigint,
        last_error text,
        version bigint NOT NULL DEFAULT 1
      )`);
      await sql.unsafe(`INSERT INTO "${schema}".intents
        (id, state, settling_since, may_have_sent, last_outcome, last_tx_hash, last_at)
        VALUES ('pi_sent', 'settling', 0, true, 'sent', '0xold', 1),
               ('pi_unknown', 'settling', 0, true, 'unknown', NULL, 1)`);
      const store = new PostgresStore(sql, { schema });
      await store.migrate();
      await store.migrate(); // once only
      assert.deepEqual((await store.getIntent("pi_sent"))?.txHashes, ["0xold"]);
      assert.deepEqual((await store.getIntent("pi_unknown"))?.txHashes, []);
      const fresh = await store.createIntent({ id: "pi_new" });
      assert.deepEqual(fresh.txHashes, []);
    }),
});

Deno.test({
  name:
    "PostgresStore.migrate() does not wait on a reader of the intents table once the tables are there (it runs at every start)",
  ignore,
  fn: () =>
    inFreshSchema(4, async (sql, schema) => {
      const reader = await sql.reserve();
      try {
        const store = new PostgresStore(sql, { schema });
        await store.migrate();
        // A long report holds a share lock on intents until it commits.
        await reader.unsafe("BEGIN");
        await reader.unsafe(`SELECT count(*) FROM "${schema}".intents`);
        let timer: ReturnType<typeof setTimeout> | undefined;
        const waited = new Promise<string>((resolve) => {
          timer = setTimeout(() => resolve("waited"), 3000);
        });
        const done = store.migrate().then(() => "done");
        assert.equal(await Promise.race([done, waited]), "done");
        clearTimeout(timer);
      } finally {
        await reader.unsafe("ROLLBACK");
        reader.release();
      }
    }),
});

/**
 * An older schema's migration behind a long transaction holds a live
 * instance's read up for at most 2 s per try, then says what to do.
 */
const oneBehindLongTransaction = () =>
  inFreshSchema(6, async (sql, schema) => {
    const live = new PostgresStore(sql, { schema });
    await live.migrate();
    await live.createIntent({ id: "pi_1", state: "authorized" });
    // The schema as a revision before tx_hashes left it.
    await sql.unsafe(`ALTER TABLE "${schema}".intents DROP COLUMN tx_hashes`);
    const reader = await sql.reserve();
    let migrating: Promise<string> | undefined;
    try {
      // A report (or pg_dump) holds a share lock on intents until it ends.
      await reader.unsafe("BEGIN");
      await reader.unsafe(`SELECT count(*) FROM "${schema}".intents`);
      const started = performance.now();
      migrating = new PostgresStore(sql, { schema }).migrate().then(
        () => "migrated",
        (error: Error) => error.message,
      );
      await new Promise((r) => setTimeout(r, 300));
      // A live instance's read (an older revision's: no tx_hashes)
      // queues behind the migration's lock request.
      const readAt = performance.now();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const read = await Promise.race([
        sql.unsafe(`SELECT state FROM "${schema}".intents WHERE id = 'pi_1'`)
          .then(([row]) => row?.state),
        new Promise((r) => timer = setTimeout(() => r("blocked"), 5_000)),
      ]);
      clearTimeout(timer);
      assert.equal(read, "authorized");
      const readMs = performance.now() - readAt;
      assert.ok(
        readMs < 2_500,
        `a live read waited ${Math.round(readMs)} ms`,
      );
      const refused = await migrating;
      assert.match(
        refused,
        /^Cannot migrate the PostgreSQL schema "[^"]+" as another session keeps a lock on its tables \(3 tries, each lock waited for at most 2s; live instances waited no longer at a time\): end the long transaction/,
      );
      assert.ok(performance.now() - started < 10_000);
    } finally {
      await reader.unsafe("ROLLBACK");
      reader.release();
      await migrating;
    }
    // Once the transaction ended, the migration goes through.
    await new PostgresStore(sql, { schema }).migrate();
    assert.deepEqual((await live.getIntent("pi_1"))?.txHashes, []);
  });

/**
 * An older schema's migration, started by four instances at once behind a
 * long transaction: each gives up within 15 s.
 */
const fourBehindLongTransaction = () =>
  inFreshSchema(4, async (sql, schema) => {
    await new PostgresStore(sql, { schema }).migrate();
    await sql.unsafe(`ALTER TABLE "${schema}".intents DROP COLUMN tx_hashes`);
    const reader = await sql.reserve();
    const clients = Array.from({ length: 4 }, () => connect(2));
    try {
      await reader.unsafe("BEGIN");
      await reader.unsafe(`SELECT count(*) FROM "${schema}".intents`);
      const started = performance.now();
      const took = await Promise.all(
        (await Promise.all(clients)).map((own) =>
          new PostgresStore(own, { schema }).migrate().then(
            () => "migrated",
            () => performance.now() - started,
          )
        ),
      );
      for (const ms of took) {
        assert.ok(
          typeof ms === "number" && ms < 15_000,
          `a start took ${typeof ms === "number" ? Math.round(ms) : ms} ms`,
        );
      }
    } finally {
      await reader.unsafe("ROLLBACK");
      reader.release();
      await Promise.all(
        (await Promise.all(clients)).map((own) => own.end({ timeout: 1 })),
      );
    }
    // And one at a time, once the transaction ended, only the first migrates.
    const again = await Promise.all(
      [1, 2, 3].map(() => new PostgresStore(sql, { schema }).migrate()),
    );
    assert.equal(again.length, 3);
  });

// Each waits out the migration's tries behind a lock (2 s each): the two
// run at once, each on a schema and a pool of its own, where they waited
// one after the other.
Deno.test({
  name:
    "PostgresStore.migrate() of an older schema behind a long transaction: it holds live instances up for at most 2 s per try, then says what to do; started by four instances at once, each gives up within 15 s, not in a queue as long as the fleet",
  ignore,
  fn: async () => {
    const cases: [string, Promise<void>][] = [
      ["one instance", oneBehindLongTransaction()],
      ["four instances", fourBehindLongTransaction()],
    ];
    const results = await Promise.allSettled(cases.map(([, done]) => done));
    const failed = results.flatMap((result, i) =>
      result.status === "rejected"
        ? [`${cases[i]![0]}: ${String(result.reason)}`]
        : []
    );
    assert.deepEqual(failed, []);
  },
});

Deno.test({
  name:
    "PostgresStore.migrate() does not wait on an open write once the tables are there (it runs at every start)",
  ignore,
  fn: () =>
    inFreshSchema(4, async (sql, schema) => {
      const store = new PostgresStore(sql, { schema });
      await store.migrate();
      // A delivery whose commit is slow holds a row lock on claims (and
      // the table's RowExclusiveLock, which CREATE INDEX would wait for).
      const writer = await sql.reserve();
      let done: Promise<string> | undefined;
      try {
        await writer.unsafe("BEGIN");
        await writer.unsafe(
          `INSERT INTO "${schema}".claims VALUES ('slow', 10)`,
        );
        let timer: ReturnType<typeof setTimeout> | undefined;
        const waited = new Promise<string>((resolve) => {
          timer = setTimeout(() => resolve("waited"), 3000);
        });
        done = store.migrate().then(() => "done");
        assert.equal(await Promise.race([done, waited]), "done");
        clearTimeout(timer);
      } finally {
        await writer.unsafe("ROLLBACK");
        writer.release();
        await done?.catch(() => {});
      }
    }),
});

Deno.test({
  name: "PostgresStore.migrate() checks for every object the migration creates",
  ignore,
  fn: () =>
    inFreshSchema(2, async (sql, schema) => {
      await new PostgresStore(sql, { schema }).migrate();
      // Every relation and function of a migrated schema, so that a new
      // one the check misses fails here: migrate() would then never make
      // it on a database migrated before.
      const made = await sql`
        SELECT c.relname AS name FROM pg_class c
        WHERE c.relnamespace = ${schema}::regnamespace
          AND c.relkind IN ('r', 'i', 'S')
          AND NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conindid = c.oid)
        UNION ALL
        SELECT p.oid::regprocedure::text FROM pg_proc p
        WHERE p.pronamespace = ${schema}::regnamespace`;
      const check = migrated(schema);
      for (const { name } of made) {
        const unqualified = String(name).replace(/^.*\./, "");
        assert.ok(
          check.includes(`.${unqualified}')`) ||
            check.includes(`.${name}')`),
          `the check misses ${name}`,
        );
      }
      const [before] = await sql.unsafe(check);
      assert.equal(before?.current, true);
      await sql.unsafe(
        `ALTER TABLE "${schema}".intents DROP COLUMN tx_hashes`,
      );
      const [after] = await sql.unsafe(check);
      assert.equal(after?.current, false);
    }),
});

/**
 * Runs `body` with a client logged in as a new role of its own (with a
 * password, as the test server asks over TCP), then drops the role and
 * whatever it was granted or owns in the database.
 */
/**
 * Grants `role` what a service role has on `schema`: USAGE on it and
 * read and write on its tables, then runs the `more` statements.
 */
async function grantService(
  admin: postgres.Sql,
  schema: string,
  role: string,
  more: string,
): Promise<void> {
  await admin.unsafe(`
    GRANT USAGE ON SCHEMA "${schema}" TO "${role}";
    GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${schema}" TO "${role}";
    ${more}`);
}

async function asNewRole(
  admin: postgres.Sql,
  body: (sql: postgres.Sql, role: string) => Promise<void>,
  prefix = "r",
): Promise<void> {
  const role = `${prefix}${freshSchema()}`;
  // Quoted as an identifier: a name may hold what SQL must escape.
  const quoted = `"${role.replaceAll('"', '""')}"`;
  await admin.unsafe(`CREATE ROLE ${quoted} LOGIN PASSWORD '${role}-pw'`);
  const url = new URL(await postgresUrl());
  url.username = encodeURIComponent(role);
  url.password = encodeURIComponent(`${role}-pw`);
  const sql = postgres(url.href, { max: 2, onnotice: () => {} });
  try {
    await body(sql, role);
  } finally {
    await sql.end();
    await admin.unsafe(`DROP OWNED BY ${quoted} CASCADE`);
    await admin.unsafe(`DROP ROLE ${quoted}`);
  }
}

Deno.test({
  name:
    "PostgresStore.migrate() runs on a migrated schema as a role with only USAGE on it and read and write grants on its tables",
  ignore,
  fn: () =>
    inFreshSchema(2, async (admin, schema) => {
      await new PostgresStore(admin, { schema }).migrate();
      await asNewRole(admin, async (sql, role) => {
        await grantService(
          admin,
          schema,
          role,
          `GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${schema}" TO "${role}";`,
        );
        const store = new PostgresStore(sql, { schema });
        await store.migrate();
        await store.createIntent({ id: "pi_1", hold: "pending" });
        await store.putDeadLetter(deadLetter("pi_1/settle", 1));
        assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
      });
    }),
});

Deno.test({
  name:
    "PostgresStore.migrate() refuses a role from which row-level security hides the store's rows, where every delivery read a live payment as missing and dropped its job",
  ignore,
  fn: () =>
    inFreshSchema(2, async (admin, schema) => {
      const owner = new PostgresStore(admin, { schema });
      await owner.migrate();
      await owner.createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      await asNewRole(admin, async (sql, role) => {
        await grantService(
          admin,
          schema,
          role,
          `GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${schema}" TO "${role}";
          ALTER TABLE "${schema}".intents ENABLE ROW LEVEL SECURITY;
          ALTER TABLE "${schema}".holds ENABLE ROW LEVEL SECURITY;`,
        );
        // An admin's RLS with no policy for the service role: every row of
        // the two tables is hidden from it (before, the start went on, and
        // each delivery of pi_1 answered "intent pi_1 not found").
        const refused = (error: Error) => {
          assert.equal(
            error.message,
            `Cannot use the PostgreSQL schema "${schema}" as row-level security hides rows of ${schema}.intents, ${schema}.holds from this role (no policy lets it read them, or its row_security is off): the store must see every row of its tables, or it reads a payment as missing and drops its job. Disable row-level security on them, add a policy for this role that lets it see and write every row, or give it BYPASSRLS`,
          );
          return true;
        };
        await assert.rejects(
          new PostgresStore(sql, { schema }).migrate(),
          refused,
        );
        // A policy that lets the role see every row: it starts, and reads.
        await admin.unsafe(`
          CREATE POLICY service ON "${schema}".intents TO "${role}" USING (true) WITH CHECK (true);
          CREATE POLICY service ON "${schema}".holds TO "${role}" USING (true) WITH CHECK (true);`);
        const store = new PostgresStore(sql, { schema });
        await store.migrate();
        assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
        // With row_security off, every query on those tables fails.
        await admin.unsafe(`ALTER ROLE "${role}" SET row_security = off`);
        await sql.end();
        const url = new URL(await postgresUrl());
        url.username = role;
        url.password = `${role}-pw`;
        const off = postgres(url.href, { max: 1, onnotice: () => {} });
        try {
          await assert.rejects(
            new PostgresStore(off, { schema }).migrate(),
            refused,
          );
        } finally {
          await off.end();
        }
      });
    }),
});

Deno.test({
  name:
    "PostgresStore.migrate() seeks no second connection for its pooler check where a connection limit would refuse it, so the store goes on with the one it may have",
  ignore,
  fn: timeout(30_000, () =>
    inFreshSchema(2, async (admin, schema) => {
      await new PostgresStore(admin, { schema }).migrate();
      const role = `r${freshSchema()}`;
      await admin.unsafe(
        `CREATE ROLE "${role}" LOGIN PASSWORD '${role}-pw' CONNECTION LIMIT 1`,
      );
      await grantService(
        admin,
        schema,
        role,
        `GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${schema}" TO "${role}";`,
      );
      const url = new URL(await postgresUrl());
      url.username = role;
      url.password = `${role}-pw`;
      const sql = postgres(url.href, { max: 2, onnotice: () => {} });
      try {
        const store = new PostgresStore(sql, {
          schema,
          connectionWaitMs: 2_000,
        });
        await store.migrate();
        // Before: the check's second connection was refused (53300), and
        // postgres.js 3.4.9 never put the first back in service: every
        // call after failed with "too many connections for role" (the
        // service healthy, never ready), though the store serves on one
        // connection when migrate() is not called.
        await store.createIntent({ id: "pi_1", hold: "pending" });
        assert.equal(await store.admit({ count: "pi_1/settle", now: 1 }), 1);
        assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
        store.close();
      } finally {
        await sql.end({ timeout: 1 });
        await admin.unsafe(`DROP OWNED BY "${role}" CASCADE`);
        await admin.unsafe(`DROP ROLE "${role}"`);
      }
    })),
});

Deno.test({
  name:
    "PostgresStore.migrate() as a service role lacking a grant the store's writes use says which at start, not at the first poisoned job",
  ignore,
  fn: () =>
    inFreshSchema(2, async (admin, schema) => {
      await new PostgresStore(admin, { schema }).migrate();
      await asNewRole(admin, async (sql, role) => {
        // No DELETE on claims, no USAGE on the dead letters' sequence (only
        // a poison needs it), and a database that revokes EXECUTE from
        // PUBLIC by default.
        await grantService(
          admin,
          schema,
          role,
          `REVOKE DELETE ON "${schema}".claims FROM "${role}";
          REVOKE EXECUTE ON FUNCTION "${schema}".refuse_stale(bigint) FROM PUBLIC;`,
        );
        await assert.rejects(
          new PostgresStore(sql, { schema }).migrate(),
          (error: Error) => {
            assert.equal(
              error.message,
              `Cannot use the PostgreSQL schema "${schema}" as this role lacks DELETE on ${schema}.claims, USAGE on ${schema}.dead_letter_versions, EXECUTE on ${schema}.refuse_stale(bigint): grant them to it (docs/postgres.md lists what a service role needs), or run as the schema's owner`,
            );
            return true;
          },
        );
        // Granted what the store uses, and no more, it starts.
        await admin.unsafe(`
          REVOKE DELETE ON "${schema}".intents, "${schema}".holds FROM "${role}";
          GRANT DELETE ON "${schema}".claims TO "${role}";
          GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${schema}" TO "${role}";
          GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA "${schema}" TO "${role}";`);
        await new PostgresStore(sql, { schema }).migrate();
      });
    }),
});

Deno.test({
  name:
    "PostgresStore.migrate() as a service role granted its tables but not USAGE on the schema says which grant is missing, and how to give it, as SQL that runs for a name SQL must quote",
  ignore,
  fn: () =>
    inFreshSchema(2, async (admin, schema) => {
      await new PostgresStore(admin, { schema }).migrate();
      await asNewRole(admin, async (sql, role) => {
        // The role as SQL names it: each " in its name doubled.
        const named = `"${role.replaceAll('"', '""')}"`;
        // A DBA's grant script that forgot the schema itself.
        await admin.unsafe(`
          GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${schema}" TO ${named};
          GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${schema}" TO ${named};`);
        // Before: the server's words alone, "permission denied for schema …".
        const grant = `GRANT USAGE ON SCHEMA "${schema}" TO ${named}`;
        await assert.rejects(
          new PostgresStore(sql, { schema }).migrate(),
          (error: Error) => {
            assert.equal(
              error.message,
              `Cannot use the PostgreSQL schema "${schema}" as this role lacks USAGE on it (permission denied for schema ${schema}): grant it (${grant}) with the grants docs/postgres.md lists for a service role, or run as the schema's owner`,
            );
            assert.equal((error.cause as { code?: unknown }).code, "42501");
            return true;
          },
        );
        // Granted as it says, it starts.
        await admin.unsafe(grant);
        await new PostgresStore(sql, { schema }).migrate();
      }, 'o"ps"svc_');
    }),
});

Deno.test({
  name:
    "PostgresStore.migrate() as a service role refused USAGE on the language plpgsql, which each write's durable commit runs in, says so at start, not at every write",
  ignore,
  fn: timeout(30_000, async () => {
    // A database of its own: a language's grants are the database's.
    const database = await freshDatabase();
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    const role = `r${freshSchema()}`;
    const schema = "relayer";
    const url = new URL(database.url);
    url.username = role;
    url.password = `${role}-pw`;
    const sql = postgres(url.href, { max: 1, onnotice: () => {} });
    try {
      await new PostgresStore(admin, { schema }).migrate();
      await admin.unsafe(`
        CREATE ROLE "${role}" LOGIN PASSWORD '${role}-pw';
        GRANT USAGE ON SCHEMA "${schema}" TO "${role}";
        GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${schema}" TO "${role}";
        GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${schema}" TO "${role}";
        REVOKE USAGE ON LANGUAGE plpgsql FROM PUBLIC;`);
      // Before: migrate() answered, and every write then failed with
      // "permission denied for language plpgsql".
      await assert.rejects(
        new PostgresStore(sql, { schema }).migrate(),
        (error: Error) => {
          assert.equal(
            error.message,
            `Cannot use the PostgreSQL schema "${schema}" as this role lacks USAGE on LANGUAGE plpgsql: grant them to it (docs/postgres.md lists what a service role needs), or run as the schema's owner`,
          );
          return true;
        },
      );
      await admin.unsafe(`GRANT USAGE ON LANGUAGE plpgsql TO "${role}"`);
      const store = new PostgresStore(sql, { schema });
      await store.migrate();
      await store.createIntent({ id: "pi_1", hold: "pending" });
      assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
    } finally {
      await sql.end({ timeout: 0 });
      await admin.end({ timeout: 0 });
      await database.drop();
      const shared = await connect(1);
      await shared.unsafe(`DROP ROLE IF EXISTS "${role}"`).finally(() =>
        shared.end()
      );
    }
  }),
});

Deno.test({
  name:
    "PostgresStore.migrate() as a service role on a schema an upgrade changes says to run it once as the schema's owner",
  ignore,
  fn: () =>
    inFreshSchema(2, async (admin, schema) => {
      await new PostgresStore(admin, { schema }).migrate();
      // The schema as a revision before tx_hashes left it.
      await admin.unsafe(
        `ALTER TABLE "${schema}".intents DROP COLUMN tx_hashes`,
      );
      await asNewRole(admin, async (sql, role) => {
        await grantService(
          admin,
          schema,
          role,
          `GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${schema}" TO "${role}";`,
        );
        await assert.rejects(
          new PostgresStore(sql, { schema }).migrate(),
          (error: Error) => {
            assert.match(
              error.message,
              /^Cannot migrate the PostgreSQL schema "[^"]+" as this role may not change it \(.*permission denied.*\): run migrate\(\) once as the schema's owner \(at the first start, and before starting a version that changes the schema\)/,
            );
            return true;
          },
        );
      });
      await new PostgresStore(admin, { schema }).migrate(); // the owner can
    }),
});

Deno.test({
  name:
    "PostgresStore.migrate() migrates a schema its role owns but could not have created (no CREATE on the database)",
  ignore,
  fn: () =>
    inFreshSchema(2, async (admin, schema) => {
      await asNewRole(admin, async (sql, role) => {
        await admin.unsafe(`CREATE SCHEMA "${schema}" AUTHORIZATION "${role}"`);
        const store = new PostgresStore(sql, { schema });
        await store.migrate();
        await store.migrate();
        await store.createIntent({ id: "pi_1", hold: "pending" });
        assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
        // Dropped here: the role's objects go before the role does.
        await admin.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
      });
    }),
});

Deno.test({
  name: "PostgresStore keeps two schemas of one database apart",
  ignore,
  async fn() {
    const a = await openPostgresStore();
    const b = await openPostgresStore();
    try {
      await a.store.createIntent({ id: "pi_1", state: "created" });
      assert.equal(await b.store.getIntent("pi_1"), null);
      await b.store.createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      assert.equal((await a.store.getIntent("pi_1"))?.state, "created");
    } finally {
      await a.close();
      await b.close();
    }
  },
});

Deno.test({
  name:
    "PostgresStore versions are bigints as strings, and a hold change moves them",
  ignore,
  async fn() {
    const { store, sql, schema, close } = await openPostgresStore();
    try {
      const v1 = await store.createIntent({ id: "pi_1" });
      assert.equal(v1.version, "1");
      await store.recordHold("pi_1");
      assert.equal((await store.getIntent("pi_1"))?.version, "2");
      await sql.unsafe(
        `UPDATE "${schema}".intents SET version = 9007199254740993`,
      );
      const big = await store.getIntent("pi_1");
      assert.equal(big?.version, "9007199254740993"); // past 2^53: kept exact
      const moved = await store.transition("pi_1", {
        from: "created",
        to: "authorized",
        version: big!.version,
        at: 1,
      });
      assert.equal(moved.version, "9007199254740994");
      await assert.rejects(
        store.transition("pi_1", {
          from: "authorized",
          to: "settling",
          version: "not a version",
          at: 2,
        }),
        ConflictError,
      );
    } finally {
      await close();
    }
  },
});

Deno.test({
  name:
    "PostgresStore lets exactly one of many connections win a compare-and-set, a lease, a claim and a redrive",
  ignore,
  async fn() {
    const { schema, close } = await openPostgresStore();
    // One client per writer: the writes really race on different
    // connections. Half of them without type fetching: those take the
    // store's sql.begin path.
    const clients = await Promise.all(
      Array.from(
        { length: 8 },
        (_, n) => connect(1, { fetchTypes: n % 2 === 0 }),
      ),
    );
    const stores = clients.map((sql) => new PostgresStore(sql, { schema }));
    const [first] = stores as [PostgresStore];
    const settled = <T>(all: Promise<T>[]) => Promise.allSettled(all);
    const won = (results: PromiseSettledResult<unknown>[]) =>
      results.filter((r) => r.status === "fulfilled").length;
    const reasons = (results: PromiseSettledResult<unknown>[]) =>
      results.flatMap((r) =>
        r.status === "rejected" ? [(r.reason as Error).name] : []
      );
    try {
      for (let round = 0; round < 5; round++) {
        const id = `pi_${round}`;
        const intent = await first.createIntent({
          id,
          state: "authorized",
          hold: "pending",
        });
        // The same compare-and-set from every connection: one wins.
        const moves = await settled(
          stores.map((store, n) =>
            store.transition(id, {
              from: "authorized",
              to: "settling",
              version: intent.version,
              at: n,
            })
          ),
        );
        assert.equal(won(moves), 1);
        assert.ok(reasons(moves).every((name) => name === "ConflictError"));

        // A lease taken by one of many concurrent write-aheads, each on the version it read.
        const read = (await first.getIntent(id))!;
        const aheads = await settled(
          stores.map((store, n) =>
            store.beginBroadcast(id, read.version, 10, {
              lease: { owner: `o${n}`, ttlMs: 1000, now: 10, keep: true },
            })
          ),
        );
        assert.equal(won(aheads), 1);
        const busy = await first.getIntent(id);
        const other = await settled(
          stores.map((store, n) =>
            store.recordBroadcast(
              id,
              busy!.version,
              { outcome: "unknown", at: 20, error: "timeout" },
              { lease: { owner: `late${n}`, ttlMs: 1000, now: 20 } },
            )
          ),
        );
        assert.equal(won(other), 0);
        assert.ok(
          other.every((r) =>
            r.status === "rejected" && r.reason instanceof BusyError
          ),
        );

        // One signature, many deliveries at once: one is admitted.
        const claim = { key: `sig-${round}`, now: 0, expiresAt: 360_000 };
        const claims = await settled(
          stores.map((store) =>
            store.admit({ count: `${id}/settle`, claim, now: 0 })
          ),
        );
        assert.equal(won(claims), 1);
        assert.ok(
          claims.every((r) =>
            r.status === "fulfilled" || r.reason instanceof ReplayError
          ),
        );
        // The losers counted nothing: their count rode in the refused commit.
        assert.equal(await first.deliveries(`${id}/settle`), 1);

        // Counted from every connection at once: exact.
        const counts = await Promise.all(
          stores.flatMap((store) =>
            [0, 1].map(() => store.admit({ count: `${id}/x`, now: 0 }))
          ),
        );
        assert.deepEqual(
          counts.sort((a, b) => a! - b!),
          Array.from({ length: 16 }, (_, k) => k + 1),
        );

        // Two redrives of one letter: one wins, and the count is reset.
        await first.putDeadLetter(deadLetter(`${id}/settle`, round));
        const stored = (await first.getDeadLetter(`${id}/settle`))!;
        const redrives = await settled(
          stores.map((store) => store.redrive(stored.jobId, stored.version)),
        );
        assert.equal(won(redrives), 1);
        assert.ok(
          redrives.every((r) =>
            r.status === "fulfilled" || r.reason instanceof ConflictError
          ),
        );
        assert.equal(await first.deliveries(`${id}/settle`), 0);
      }
    } finally {
      await Promise.all(clients.map((sql) => sql.end()));
      await close();
    }
  },
});

for (const fetchTypes of [true, false]) {
  Deno.test({
    name:
      `PostgresStore refuses a write whose unlessCounted names a mark committed between its read and its flight, and writes nothing${
        fetchTypes ? "" : " (fetch_types: false)"
      }`,
    ignore,
    async fn() {
      const { schema, close } = await openPostgresStore();
      // Without type fetching, the store takes its sql.begin path.
      const sql = await connect(2, { fetchTypes });
      try {
        const store = new PostgresStore(sql, { schema });
        const other = new PostgresStore(sql, { schema });
        const created = await store.createIntent({
          id: "pi_1",
          state: "authorized",
          hold: "pending",
        });
        const lease = { owner: "d1", ttlMs: 60_000, now: 2000, keep: true };
        /** Moves pi_1 on `version`, marks checked; `gap` runs once its read has answered. */
        const write = (
          version: string,
          to: "settling" | "needs_review",
          gap: () => Promise<unknown>,
        ) =>
          new PostgresStore(afterFirstRead(sql, async () => void await gap()), {
            schema,
          }).transition("pi_1", {
            from: to === "settling" ? "authorized" : "settling",
            to,
            version,
            at: 2000,
          }, {
            lease,
            unlessCounted: [
              "gaveup/qstash/message/m0",
              "gaveup/qstash/message/m1",
            ],
          });
        // Another instance's give-up marks the message in the gap.
        const mark = (now: number) =>
          other.admit({
            count: "gaveup/qstash/message/m1",
            now,
            ttlMs: 1000,
          });
        await assert.rejects(
          write(created.version, "settling", () => mark(1500)),
          (error) =>
            error instanceof ConflictError && error.refused &&
            error.message.includes("as gaveup/qstash/message/m1 is on record"),
        );
        const after = (await store.getIntent("pi_1"))!;
        assert.deepEqual([after.state, after.version], [
          "authorized",
          created.version,
        ]);
        const [leases] = await sql.unsafe(
          `SELECT count(*)::int AS n FROM "${schema}".leases`,
        );
        assert.equal(leases!.n, 0, "nothing of the refused write");
        // A mark that lapsed by the write's time refuses nothing.
        await sql.unsafe(`DELETE FROM "${schema}".counters`);
        const moved = await write(created.version, "settling", () => mark(0));
        assert.equal(moved.state, "settling");
        // A write with marks to check that lost its race in the gap is a
        // race lost, not a refusal.
        await assert.rejects(
          write(
            moved.version,
            "needs_review",
            () =>
              other.beginBroadcast("pi_1", moved.version, 2001, {
                lease: { ...lease, now: 2001 },
              }),
          ),
          (error) =>
            error instanceof ConflictError && !error.refused &&
            error.message.includes("changed since it was read"),
        );
      } finally {
        await sql.end();
        await close();
      }
    },
  });
}

Deno.test({
  name:
    "PostgresStore: a hold change that waited for another's lock sees what that one wrote (a captured hold is never then voided)",
  ignore,
  async fn() {
    const { store: shared, schema, close } = await openPostgresStore();
    // A writer of its own: it holds the intent's lock while the store's
    // call starts, and commits only once that call waits for the lock.
    const other = await connect(1);
    // Without type fetching, the store takes its sql.begin path.
    const untyped = await connect(1, { fetchTypes: false });
    const cases = [
      [shared, "captured", "void"],
      [shared, "voided", "capture"],
      [new PostgresStore(untyped, { schema }), "captured", "void"],
    ] as const;
    try {
      for (const [n, [store, first, second]] of cases.entries()) {
        const id = `pi_${n}`;
        // Nothing left (a review may be voided alone then): the void's
        // refusal comes from the lock it waited for, not from the rule.
        await store.createIntent({
          id,
          state: "needs_review",
          hold: "pending",
          mayHaveSent: false,
        });
        let waited!: Promise<unknown>;
        await other.begin(async (tx) => {
          await changeHold(tx, schema, id, first);
          waited = second === "void"
            ? store.voidHold(id)
            : store.captureHold(id);
          waited.catch(() => {});
          // Commit only once the store's statement waits for our lock: a
          // backend this transaction blocks, not any wait on the server
          // (another file of a parallel run has its own).
          await waitUntil(
            "waited for the lock",
            () => tx.unsafe(BLOCKED_BY_ME),
          );
        });
        await assert.rejects(waited, ConflictError);
        assert.equal((await store.getIntent(id))!.hold, first);
      }
    } finally {
      await Promise.all([other.end(), untyped.end()]);
      await close();
    }
  },
});

Deno.test({
  name:
    "PostgresStore never voids a hold captured while the void was deciding on an intent created after its read began",
  ignore,
  async fn() {
    const { store, schema, close } = await openPostgresStore();
    // Two writers of their own: one holds the leases table, so the store's
    // read (it joins leases) waits after its lock statement found no row;
    // the other captures the hold under the intent's lock meanwhile.
    const [x, y] = await Promise.all([connect(1), connect(1)]);
    const [rx, ry] = await Promise.all([x.reserve(), y.reserve()]);
    try {
      await rx.unsafe("BEGIN");
      await rx.unsafe(`LOCK TABLE "${schema}".leases IN ACCESS EXCLUSIVE MODE`);
      const voided = store.voidHold("pi_1");
      voided.catch(() => {});
      await waitUntil("waited for the leases table", () =>
        rx.unsafe(
          `SELECT count(*)::int AS n FROM pg_locks
          WHERE NOT granted AND relation = '"${schema}".leases'::regclass`,
        ));
      // Nothing left (a review may be voided alone then): only the
      // capture committed meanwhile refuses the void.
      await store.createIntent({
        id: "pi_1",
        state: "needs_review",
        hold: "pending",
        mayHaveSent: false,
      });
      await ry.unsafe("BEGIN");
      await changeHold(ry, schema, "pi_1", "captured");
      // The store's read runs now: it sees the intent, its hold pending.
      await rx.unsafe("COMMIT");
      // The capture commits once the store's call has answered, or once
      // the call waits for the capture's lock: it went on to write.
      const settled = voided.then(() => 1, () => 1);
      await waitUntil(
        "answered",
        async () =>
          await Promise.race([
            settled.then((n) => [{ n }]),
            ry.unsafe(BLOCKED_BY_ME),
          ]),
      );
      await ry.unsafe("COMMIT");
      await settled;
      assert.equal((await store.getIntent("pi_1"))?.hold, "captured");
      // Refused either way: as missing (its read began before the intent
      // existed), or, deciding again once its check found the version
      // moved, as captured. Never voided.
      await assert.rejects(
        voided,
        (error) =>
          error instanceof ConflictError && error.refused &&
          /does not exist|is captured/.test(error.message),
      );
    } finally {
      await rx.unsafe("ROLLBACK").catch(() => {});
      await ry.unsafe("ROLLBACK").catch(() => {});
      rx.release();
      ry.release();
      await Promise.all([x.end(), y.end()]);
      await close();
    }
  },
});

Deno.test({
  name:
    "PostgresStore's voidHold whose flight lost to a send and a give-up's move to review decides again on the payment in review, and refuses",
  ignore,
  async fn() {
    const { store: other, schema, close } = await openPostgresStore();
    const sql = await connect(2);
    try {
      const created = await other.createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      // Between the void's read (authorized: voidable) and its flight, the
      // first send's write-ahead and a give-up's move to review land.
      const store = new PostgresStore(
        afterFirstRead(sql, async () => {
          const settling = await other.transition("pi_1", {
            from: "authorized",
            to: "settling",
            version: created.version,
            at: 1,
          });
          await other.transition("pi_1", {
            from: "settling",
            to: "needs_review",
            version: settling.version,
            at: 2,
          });
        }),
        { schema },
      );
      await assert.rejects(
        store.voidHold("pi_1"),
        (error) =>
          error instanceof ConflictError && error.refused &&
          /money may have moved/.test(error.message),
      );
      const after = (await other.getIntent("pi_1"))!;
      assert.deepEqual([after.state, after.hold], ["needs_review", "pending"]);
    } finally {
      await sql.end();
      await close();
    }
  },
});

Deno.test({
  name:
    "PostgresStore sends nothing of a write that has a value it cannot send (no partial commit)",
  ignore,
  // A statement postgres.js refuses inside a pipeline can leave the calls
  // behind it unanswered: fail, not hang.
  fn: timeout(20_000, async () => {
    const { store, sql, schema, close } = await openPostgresStore();
    try {
      const intent = await store.createIntent({
        id: "pi_1",
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        lastBroadcast: { outcome: "not_sent", at: 0 },
      });
      const options = {
        lease: { owner: "d1", ttlMs: 1000, now: 5 },
        claim: { key: "sig1", now: 5, expiresAt: 1000 },
      };
      // Each write is refused whole: nothing of it committed, then the error.
      const refused = async (write: Promise<unknown>): Promise<Error> => {
        const error = await write.then(
          () => assert.fail("the write went through"),
          (error: Error) => error,
        );
        assert.deepEqual(await store.getIntent("pi_1"), intent);
        assert.equal(await store.getDeadLetter("pi_1/settle"), null);
        assert.equal(await store.deliveries("pi_1/settle"), 0);
        const [row] = await sql.unsafe(`
          SELECT (SELECT count(*) FROM "${schema}".claims)::int AS claims,
                 (SELECT count(*) FROM "${schema}".leases)::int AS leases`);
        assert.deepEqual([row?.claims, row?.leases], [0, 0]);
        return error;
      };
      const fail = (deadLetter?: DeadLetter) =>
        store.transition("pi_1", {
          from: "settling",
          to: "failed",
          version: intent.version,
          at: 5,
          ledger: "void",
          ...(deadLetter ? { deadLetter } : {}),
        }, options);
      const noLastError = await refused(fail({
        ...deadLetter("pi_1/settle", 5),
        lastError: undefined as unknown as string,
      }));
      assert.ok(noLastError instanceof TypeError);
      assert.equal(
        noLastError.message,
        "Cannot write to the store as 'lastError' must be a string: current value is undefined",
      );
      // A claim without its key, with a count and with a dead letter.
      const keyless = { now: 5, expiresAt: 1000 } as unknown as Claim;
      for (
        const write of [
          () => store.admit({ count: "pi_1/settle", claim: keyless, now: 5 }),
          () =>
            store.putDeadLetter(deadLetter("pi_1/settle", 5), {
              claim: keyless,
            }),
        ]
      ) {
        const error = await refused(write());
        assert.ok(error instanceof TypeError);
        assert.match(error.message, /'claim\.key' must be a string/);
      }
      // A lease without its owner, and a dead letter of no known cause.
      const ownerless = await refused(
        store.transition("pi_1", {
          from: "settling",
          to: "failed",
          version: intent.version,
          at: 5,
          ledger: "void",
        }, {
          ...options,
          lease: { ttlMs: 1000, now: 5 } as unknown as LeaseRequest,
        }),
      );
      assert.match(ownerless.message, /'lease\.owner' must be a string/);
      const causeless = await refused(fail({
        ...deadLetter("pi_1/settle", 5),
        cause: "bored" as DeadLetter["cause"],
      }));
      assert.match(
        causeless.message,
        /'cause' must be "declared" or "exhausted"/,
      );
    } finally {
      await close();
    }
  }),
});

Deno.test({
  name:
    "PostgresStore forgets expired counters and replay records as it admits",
  ignore,
  async fn() {
    const { store, sql, schema, close } = await openPostgresStore();
    try {
      for (let n = 0; n < 10; n++) {
        await store.admit({
          count: `old/${n}`,
          claim: { key: `old-${n}`, now: 0, expiresAt: 10 },
          now: 0,
        });
      }
      const later = 9 * 24 * 60 * 60 * 1000; // past the counters' 8 days
      for (let n = 0; n < 64; n++) {
        await store.admit({ count: "new", now: later });
      }
      const [row] = await sql.unsafe(`
        SELECT (SELECT count(*) FROM "${schema}".counters WHERE job_id LIKE 'old/%')::int AS counters,
               (SELECT count(*) FROM "${schema}".claims)::int AS claims`);
      assert.deepEqual([row?.counters, row?.claims], [0, 0]);
      assert.equal(await store.deliveries("new"), 64);
    } finally {
      await close();
    }
  },
});

Deno.test({
  name:
    "PostgresStore counts and claims at once on a database whose default isolation is REPEATABLE READ or SERIALIZABLE",
  ignore,
  async fn() {
    for (const level of ["repeatable read", "serializable"]) {
      const sql = await connect(20, {
        connection: { default_transaction_isolation: level },
      });
      const schema = freshSchema();
      try {
        const [row] = await sql`SHOW default_transaction_isolation`;
        assert.equal(row?.default_transaction_isolation, level);
        const store = new PostgresStore(sql, { schema });
        await store.migrate();
        // Duplicate deliveries of one job, counted at once; and claims.
        const counted = await Promise.allSettled(
          Array.from(
            { length: 20 },
            () => store.admit({ count: "pi_1/settle", now: 1 }),
          ),
        );
        const claimed = await Promise.allSettled(
          Array.from({ length: 20 }, (_, i) =>
            store.admit({
              claim: { key: `k${i}`, now: 1, expiresAt: 1_000 },
              now: 1,
            })),
        );
        const numbers = counted.map((r) =>
          r.status === "fulfilled" ? r.value : String(r.reason)
        );
        assert.deepEqual(
          [...numbers].sort((a, b) => Number(a) - Number(b)),
          Array.from({ length: 20 }, (_, i) => i + 1),
          level,
        );
        assert.ok(claimed.every((r) => r.status === "fulfilled"), level);
      } finally {
        await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await sql.end();
      }
    }
  },
});

Deno.test({
  name:
    "PostgresStore keeps a Sender's error text and an unreadable message's reason with U+0000 (as U+FFFD), so a declared not-sent poison still fails the intent; a NUL id reads as absent, and is refused in a write",
  ignore,
  async fn() {
    const { store, close } = await openPostgresStore();
    try {
      await store.createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      const relayer = createRelayer({
        store,
        sender: {
          send: () =>
            Promise.reject(poison(notSent(new Error("nonce too low: \0\x01")))),
          receipt: () => Promise.resolve("pending" as const),
        },
        now: () => 1_000,
        random: () => 0.5,
      });
      const outcome = await relayer.deliver(
        { intentId: "pi_1", kind: "settle" },
        1,
      );
      assert.equal(outcome.action, "poison");
      const intent = await store.getIntent("pi_1");
      assert.equal(intent?.state, "failed");
      assert.equal(intent?.hold, "voided");
      assert.equal(intent?.lastBroadcast?.error, "nonce too low: \uFFFD\x01");
      const letter = await store.getDeadLetter("pi_1/settle");
      assert.ok(
        letter!.lastError.includes("nonce too low: \uFFFD\x01"),
        letter!.lastError,
      );
      assert.doesNotMatch(letter!.lastError, /\0/);

      // An imported intent's broadcast error is free text too.
      const imported = await store.createIntent({
        id: "pi_2",
        state: "settling",
        hold: "pending",
        settlingSince: 0,
        lastBroadcast: { outcome: "unknown", at: 1, error: "rpc: \0 reset" },
      });
      assert.equal(imported.lastBroadcast?.error, "rpc: \uFFFD reset");
      assert.equal(
        (await store.getIntent("pi_2"))?.lastBroadcast?.error,
        "rpc: \uFFFD reset",
      );
      // A queue's word on an unreadable message quotes what it read: the
      // letter's reason carries it too.
      const kept = await relayer.keepUnreadable({
        queue: "local",
        id: "m-1",
        raw: "\0",
        detail: "not JSON: \0",
      });
      const unreadable = await store.getDeadLetter(kept);
      assert.match(unreadable!.reason, /not JSON: \uFFFD$/);
      assert.equal(unreadable!.lastError, "not JSON: \uFFFD");
      // An id with U+0000 cannot be in the store: reads find nothing, and
      // writes and cursors are refused with a TypeError that says why.
      assert.equal(await store.getIntent("pi\0"), null);
      assert.equal(await store.getDeadLetter("pi\0/settle"), null);
      assert.equal(await store.deliveries("pi\0/settle"), 0);
      await assert.rejects(
        store.admit({ count: "pi\0/settle", now: 1 }),
        (error) => error instanceof TypeError && /U\+0000/.test(error.message),
      );
      await assert.rejects(
        store.listDeadLetters({ cursor: "1|pi\0/settle" }),
        TypeError,
      );
    } finally {
      await close();
    }
  },
});

Deno.test({
  name:
    "PostgresStore.migrate() refuses a read-only database (a standby, default_transaction_read_only), migrated or not, where every write would fail",
  ignore,
  async fn() {
    const { schema, close } = await openPostgresStore(); // migrated
    const readOnly = await connect(2, {
      connection: { default_transaction_read_only: "on" },
    });
    try {
      for (const name of [schema, freshSchema()]) {
        await assert.rejects(
          new PostgresStore(readOnly, { schema: name }).migrate(),
          /database as this session is read-only though the server is a primary \(default_transaction_read_only = on, set for the role, the database or the connection\): turn it off for the store's role \(ALTER ROLE … SET default_transaction_read_only = off\), or connect as a role that may write$/,
        );
      }
    } finally {
      await readOnly.end();
      await close();
    }
  },
});

Deno.test({
  name:
    "PostgresStore keeps its replay records bounded when each delivery claims in its own write, not by admit",
  ignore,
  async fn() {
    const { store, sql, schema, close } = await openPostgresStore();
    try {
      // QStash with a chain that confirms at once: per job, a delivery that
      // writes (its claim rides in the write-ahead) and one that settles.
      // Each record lives 5 minutes; 10 s pass per delivery.
      let t = 1_000_000;
      let sends = 0;
      const relayer = createRelayer({
        store,
        sender: {
          send: () =>
            Promise.resolve({ txHash: `0x${(++sends).toString(16)}` }),
          receipt: () => Promise.resolve("confirmed" as const),
        },
        now: () => t,
        random: () => 0.5,
      });
      for (let k = 0; k < 300; k++) {
        const id = `pi_${k}`;
        await store.createIntent({ id, state: "authorized", hold: "pending" });
        for (let n = 1; n <= 2; n++) {
          await relayer.deliver({ intentId: id, kind: "settle" }, n, {
            claim: { key: `qstash/${k}/${n}`, now: t, expiresAt: t + 300_000 },
          });
          t += 10_000;
        }
      }
      assert.equal(sends, 300);
      const [row] = await sql.unsafe(`
        SELECT count(*)::int AS total,
               count(*) FILTER (WHERE expires_at > ${t})::int AS live
        FROM "${schema}".claims`);
      // 29 live, those within CLAIM_GRACE_MS of their expiry (one per
      // 10 s), and at most what was written since the last sweep.
      assert.equal(row?.live, 29);
      const grace = CLAIM_GRACE_MS / 10_000;
      assert.ok(
        row!.total <= 29 + grace + 64,
        `${row!.total} replay records kept`,
      );
    } finally {
      await close();
    }
  },
});

Deno.test({
  name:
    "PostgresStore refuses to enqueue in a redrive: it has no queue of its own",
  ignore,
  async fn() {
    const { store, close } = await openPostgresStore();
    try {
      await store.putDeadLetter(deadLetter("pi_1/settle", 1));
      const { version } = (await store.getDeadLetter("pi_1/settle"))!;
      await assert.rejects(
        store.redrive("pi_1/settle", version, { enqueue: { job: 1 } }),
        /PostgresStore has no queue/,
      );
      assert.notEqual(await store.getDeadLetter("pi_1/settle"), null);
    } finally {
      await close();
    }
  },
});

Deno.test({
  name:
    "the Postgres test server answers on 127.0.0.1 and asks for a password, checked with SCRAM-SHA-256, as managed servers do",
  ignore,
  async fn() {
    const url = new URL(await postgresUrl());
    assert.equal(url.hostname, "127.0.0.1");
    assert.match(url.password, /^[0-9a-f]{32}$/);
    const sql = postgres(url.href, { max: 1, onnotice: () => {} });
    try {
      const [row] = await sql<{ scram: boolean }[]>`
        SELECT rolpassword LIKE 'SCRAM-SHA-256$%' AS scram
        FROM pg_authid WHERE rolname = current_user`;
      assert.equal(row?.scram, true);
    } finally {
      await sql.end();
    }
    url.password = "not-the-password";
    const wrong = postgres(url.href, { max: 1, onnotice: () => {} });
    try {
      await assert.rejects(
        wrong`SELECT 1`,
        /password authentication failed for user "postgres"/,
      );
    } finally {
      await wrong.end();
    }
  },
});

for (const max of [1, 2]) {
  Deno.test({
    name:
      `PostgresStore gives a write waiting for a connection the one that opens again when the server ends one of the pool's (${max} of ${max} held), at once and once: postgres.js 3.4.9 loses that wait, and the write waited out connectionWaitMs`,
    ignore,
    fn: timeout(30_000, () =>
      inFreshSchema(2, async (admin, schema) => {
        await new PostgresStore(admin, { schema }).migrate();
        // A client as main.ts makes it (types fetched, so writes reserve a
        // connection), with an `onclose` of the caller's own.
        let closes = 0;
        const sql = postgres(await postgresUrl(), {
          max,
          onnotice: () => {},
          onclose: () => void closes++,
        });
        try {
          // The write's read answers; before its reserve(), others take
          // every connection of the client (a hook on the read).
          const held: postgres.ReservedSql[] = [];
          const hooked = afterFirstRead(sql, async () => {
            for (let n = 0; n < max; n++) held.push(await sql.reserve());
          });
          const store = new PostgresStore(hooked, {
            schema,
            connectionWaitMs: 8_000,
          });
          const created = await store.createIntent({
            id: "pi_1",
            hold: "pending",
          });
          const write = store.transition("pi_1", {
            from: "created",
            to: "authorized",
            version: created.version,
            at: 1,
          });
          const settled = write.then(() => "written", (error: Error) => error);
          while (held.length < max) {
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
          const [row] = await held[0]!`SELECT pg_backend_pid() AS pid`;
          await new Promise((resolve) => setTimeout(resolve, 100));
          // A connection the write waits for is ended by the server: its
          // wait in postgres.js's queue goes to the connection opening
          // again, which drops it (porsager/postgres#1195).
          const ended = performance.now();
          await admin`SELECT pg_terminate_backend(${row!.pid as number})`;
          const outcome = await settled;
          const waited = performance.now() - ended;
          assert.equal(outcome, "written", String(outcome));
          assert.ok(waited < 3_000, `${Math.round(waited)} ms`);
          assert.ok(closes >= 1, "the client's own onclose was not called");
          // Landed once: one version on.
          const intent = await store.getIntent("pi_1");
          assert.equal(intent?.state, "authorized");
          assert.equal(intent?.version, String(Number(created.version) + 1));
          // The pool is whole: the other held connection handed back, the
          // write's own too, and every later write gets one at once.
          for (const other of held.slice(1)) other.release();
          for (let n = 1; n <= 3; n++) {
            const started = performance.now();
            assert.equal(
              await store.admit({ count: "pi_1/settle", now: n }),
              n,
            );
            assert.ok(performance.now() - started < 3_000);
          }
          assert.throws(
            () => new PostgresStore(sql, { schema, connectionWaitMs: 0 }),
            /'connectionWaitMs' must be a whole number of milliseconds from 1 to 2147483647: current value is 0$/,
          );
        } finally {
          await sql.end({ timeout: 1 });
        }
      })),
  });
}

Deno.test({
  name:
    "PostgresStore.migrate() does not wait for two free connections: on a busy pool of two it skips its pooler check",
  ignore,
  fn: timeout(30_000, async () => {
    const sql = await connect(2);
    const schema = freshSchema();
    try {
      await new PostgresStore(sql, { schema }).migrate();
      // One of the two connections is the application's, busy.
      const busy = sql`SELECT pg_sleep(3)`.execute();
      await new Promise((resolve) => setTimeout(resolve, 100));
      const store = new PostgresStore(sql, { schema, connectionWaitMs: 1000 });
      const started = performance.now();
      await store.migrate();
      assert.ok(performance.now() - started < 2_000);
      await busy;
    } finally {
      await sql.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
      await sql.end({ timeout: 1 });
    }
  }),
});

/**
 * A TCP proxy in front of the run's server that ends the first
 * connection to send `trigger`, as a server restart would.
 */
async function cuttingProxy(
  trigger: string,
): Promise<{ url: string; cut: () => boolean; close(): void }> {
  const target = new URL(await postgresUrl());
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  let cut = false;
  void (async () => {
    for await (const client of listener) {
      const server = await Deno.connect({
        hostname: target.hostname,
        port: Number(target.port),
      });
      conns.add(client).add(server);
      const close = () => {
        for (const conn of [client, server]) {
          conns.delete(conn);
          try {
            conn.close();
          } catch {
            // closed already
          }
        }
      };
      void (async () => {
        const buffer = new Uint8Array(65536);
        try {
          for (;;) {
            const n = await client.read(buffer);
            if (n === null) break;
            const chunk = buffer.subarray(0, n);
            if (!cut && new TextDecoder().decode(chunk).includes(trigger)) {
              cut = true;
              break;
            }
            await server.write(chunk);
          }
        } catch {
          // either side closed
        }
        close();
      })();
      void server.readable.pipeTo(client.writable).catch(() => {}).finally(
        close,
      );
    }
  })().catch(() => {});
  const { port } = listener.addr as Deno.NetAddr;
  return {
    url: `postgres://postgres:${target.password}@127.0.0.1:${port}/postgres`,
    cut: () => cut,
    close() {
      listener.close();
      closeEach(conns);
    },
  };
}

for (
  const [where, trigger] of [
    ["at its first statement", "AS one"],
    ["as the second connection begins", "BEGIN isolation level"],
  ]
) {
  Deno.test({
    name:
      `PostgresStore.migrate() goes on when a connection is lost during its pooler check (${where}), and the process and the pool live on`,
    ignore,
    fn: timeout(30_000, async () => {
      const schema = freshSchema();
      const admin = await connect(1);
      await new PostgresStore(admin, { schema }).migrate();
      const proxy = await cuttingProxy(trigger!);
      const sql = postgres(proxy.url, { max: 4, onnotice: () => {} });
      try {
        const store = new PostgresStore(sql, {
          schema,
          connectionWaitMs: 2000,
        });
        await store.migrate();
        assert.ok(proxy.cut(), "the proxy cut no connection");
        // A lost connection handed back would crash the process at its
        // next query (porsager/postgres#1154); the pool answers instead.
        await new Promise((resolve) => setTimeout(resolve, 500));
        await store.createIntent({ id: "pi_1", state: "created" });
        assert.equal(await store.recordHold("pi_1"), "pending");
      } finally {
        await sql.end({ timeout: 1 });
        proxy.close();
        await admin.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
        await admin.end();
      }
    }),
  });
}

Deno.test({
  name:
    "PostgresStore takes a replaced dead letter's version from its sequence, whatever function named nextval(text) the role's search_path finds first",
  ignore,
  fn: async (t) => {
    // A schema on the service role's search_path (ALTER ROLE … SET
    // search_path), holding a nextval(text): PostgreSQL picks it over
    // pg_catalog.nextval(regclass) for an untyped parameter, as the
    // string category wins (CVE-2018-1058's pattern). Before, every
    // replacement of a letter ran it: here, each got version 7.
    const hostile = freshSchema();
    const admin = await connect(1);
    try {
      await admin.unsafe(`CREATE SCHEMA "${hostile}";
        CREATE FUNCTION "${hostile}".nextval(text) RETURNS bigint
          LANGUAGE sql AS 'SELECT 7::bigint'`);
      await onFreshSchema(
        { connection: { search_path: `"${hostile}", public` } },
        async ({ store }) => {
          await store.createIntent({ id: "pi_1", hold: "pending" });
          await store.putDeadLetter(deadLetter("pi_1/settle", 1));
          await store.putDeadLetter(deadLetter("pi_1/settle", 2));
          const read = await store.getDeadLetter("pi_1/settle");
          assert.notEqual(read?.version, "7");
          // Replaced again after the operator read it: a redrive of what
          // they read must not remove a letter they never saw.
          await store.putDeadLetter(deadLetter("pi_1/settle", 3));
          await assert.rejects(
            store.redrive("pi_1/settle", read!.version),
            ConflictError,
          );
          assert.equal(
            (await store.getDeadLetter("pi_1/settle"))?.poisonedAt,
            3,
          );
        },
      )(t);
    } finally {
      await admin.unsafe(`DROP SCHEMA "${hostile}" CASCADE`);
      await admin.end();
    }
  },
});

// The record of a send that outlived its settling is written on the
// intent in review as it is then: a write landing between that read and
// the flight (another such record) is a race lost, decided again, not an
// error that leaves the tx on no record.
Deno.test({
  name:
    "PostgresStore decides the record of a send that outlived its settling again when another write lands between its read and its flight",
  ignore,
  async fn() {
    const { schema, close } = await openPostgresStore();
    const sql = await connect(2);
    try {
      const store = new PostgresStore(sql, { schema });
      const ahead = await writtenAhead(store);
      await gaveUp(store, ahead.version);
      // Read 1 finds the version moved, read 2 the intent as it is, read 3
      // is the write's own: another late record lands after it.
      let reads = 0;
      const racing = new PostgresStore(
        betweenReadAndFlight(sql, async () => {
          if (++reads !== 3) return;
          await store.recordBroadcast("pi_1", ahead.version, {
            outcome: "sent",
            txHash: "0xother",
            at: 3,
          });
        }),
        { schema },
      );
      const kept = await racing.recordBroadcast("pi_1", ahead.version, {
        outcome: "sent",
        txHash: "0xmine",
        at: 4,
      });
      assert.ok(reads > 3, `decided again: ${reads} reads`);
      assert.deepEqual(kept.txHashes, ["0xother", "0xmine"]);
      assert.equal(kept.state, "needs_review");
      assert.deepEqual(await store.getIntent("pi_1"), kept);
    } finally {
      await sql.end();
      await close();
    }
  },
});
