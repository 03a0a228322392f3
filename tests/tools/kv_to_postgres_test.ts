/**
 * `deno task kv-to-postgres` (`tools/kv_to_postgres.ts`) as a subprocess,
 * as an operator runs it: a KV file the service left, a database of this
 * run's server.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import type { NewIntent } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { PostgresStore } from "../../store/postgres.ts";
import {
  freshDatabase,
  postgresAvailable,
  readOnlyDatabase,
} from "../_postgres.ts";
import { startPostgres } from "../../support/postgres_server.ts";
import { testCertificates } from "../../support/test_tls.ts";
import { runMove } from "./_run_tool.ts";
import { echoedRefusal, refusingMetadata } from "../_echoing_kv.ts";

const root = new URL("../../", import.meta.url);

/** Makes a Deno KV file at `path` that holds `intent` alone, closed. */
async function kvHolding(path: string, intent: NewIntent): Promise<void> {
  const kv = await Deno.openKv(path);
  try {
    await new KvStore(kv).createIntent(intent);
  } finally {
    kv.close();
  }
}

/**
 * A temporary folder (`path`, its KV file, not made yet), a fresh database
 * and a client of it (opening nothing until used) for `body`; the client
 * ended, the database dropped and the folder removed after.
 */
async function inFolderWithDatabase(
  body: (made: {
    dir: string;
    path: string;
    database: Awaited<ReturnType<typeof freshDatabase>>;
    sql: postgres.Sql;
  }) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_tool_" });
  const database = await freshDatabase();
  const sql = postgres(database.url, { onnotice: () => {}, max: 2 });
  try {
    await body({ dir, path: `${dir}/relayer.kv`, database, sql });
  } finally {
    await sql.end();
    await database.drop();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name:
    "deno task kv-to-postgres, refusing a schema a service started on wrote, names nothing the task cannot do (no schema option)",
  ignore: !postgresAvailable,
  fn: () =>
    inFolderWithDatabase(async ({ dir, path, database, sql }) => {
      await kvHolding(path, {
        id: "pi_0001",
        state: "authorized",
      });
      // A service started on the schema first: its readiness probe's count.
      const written = new PostgresStore(sql);
      await written.migrate();
      await written.admit({ now: Date.now(), count: "relayer/write-probe" });
      written.close();

      const refused = await runMove(
        { KV_PATH: path, DATABASE_URL: database.url },
        dir,
      );
      assert.equal(refused.code, 1);
      assert.match(refused.err, /But no move of this store committed here/);
      assert.ok(!refused.err.includes("the schema option"), refused.err);
      assert.match(
        refused.err,
        / Stop it, then point DATABASE_URL at another database \(the service and this task use its schema relayer\), or empty this schema if nothing in it is needed \(TRUNCATE "relayer"\.intents, "relayer"\.holds, "relayer"\.leases, "relayer"\.counters, "relayer"\.claims, "relayer"\.dead_letters\)\. Nothing was moved\.\n$/,
      );
    }),
});

Deno.test({
  name:
    "deno task kv-to-postgres moves the KV file into DATABASE_URL, says what moved, and refuses to move twice",
  ignore: !postgresAvailable,
  fn: () =>
    inFolderWithDatabase(async ({ dir, path, database }) => {
      const kv = await Deno.openKv(path);
      const store = new KvStore(kv);
      await store.createIntent({
        id: "pi_0001",
        state: "settling",
        hold: "pending",
        settlingSince: 1000,
        lastBroadcast: { outcome: "sent", txHash: "0xabc", at: 1000 },
      });
      await store.admit({ now: Date.now(), count: "pi_0001/settle" });
      kv.close();

      const env = { KV_PATH: path, DATABASE_URL: database.url };
      const first = await runMove(env, dir);
      assert.equal(first.code, 0, first.err);
      assert.equal(
        first.out.split("\n")[0],
        "moved  1 intent, 1 hold, 1 delivery count, 0 replay records, 0 dead letters",
      );
      // The local queue neither moves nor runs on PostgreSQL: KV_QUEUE goes
      // too (the start refuses it beside DATABASE_URL), and POST /v1/jobs
      // needs a queue the service is given.
      assert.equal(
        first.out.split("\n")[2],
        "next   start the service with DATABASE_URL (KV_PATH, KV_URL and KV_QUEUE unset), then resume the queue",
      );
      assert.equal(
        first.out.split("\n")[3],
        "       if it ran KV_QUEUE=1, its local queue's messages were not moved, and no local queue runs on PostgreSQL: give the service QStash (QSTASH_TOKEN) and publish a job (POST /v1/jobs), or deliver one signed on POST /v1/deliveries, for each intent still authorized or settling (there is 1; docs/stores.md's query lists them)",
      );
      // docs/stores.md shows the same two lines (its store had 2 in flight).
      const shown = (await Deno.readTextFile(new URL("docs/stores.md", root)))
        .split("\n").map((line) => line.slice(3));
      const at = shown.findIndex((line) => line.startsWith("next   "));
      assert.deepEqual(
        shown.slice(at, at + 2),
        first.out.split("\n").slice(2, 4)
          .map((line) => line.replace("there is 1", "there are 2")),
      );
      const sql = postgres(database.url, { onnotice: () => {}, max: 1 });
      try {
        const moved = new PostgresStore(sql);
        const intent = await moved.getIntent("pi_0001");
        assert.deepEqual(intent?.txHashes, ["0xabc"]);
        assert.equal(intent?.hold, "pending");
        assert.equal(await moved.deliveries("pi_0001/settle"), 1);
        moved.close();
      } finally {
        await sql.end();
      }

      const again = await runMove(env, dir);
      assert.equal(again.code, 1);
      assert.match(
        again.err,
        /^ConflictError: Cannot move into schema relayer as it already holds 1 intent, 1 count: .* If an earlier move committed, it is done/,
      );
      assert.ok(!again.err.includes(database.url), again.err);
      // The task has no schema option (the library's move has): what it
      // says to do must be something the task and the service can do.
      assert.ok(!again.err.includes("the schema option"), again.err);
      assert.match(
        again.err,
        / Otherwise point DATABASE_URL at another database \(the service and this task use its schema relayer\), or empty this schema if nothing in it is needed \(TRUNCATE "relayer"\.intents, "relayer"\.holds, "relayer"\.leases, "relayer"\.counters, "relayer"\.claims, "relayer"\.dead_letters\)\. Nothing was moved\.\n$/,
      );
    }),
});

Deno.test({
  name:
    "deno task kv-to-postgres exits 1 and does not say moved when Deno KV is written behind the move's last look before the commit: it says the move committed without the key it names, and what to do",
  ignore: !postgresAvailable,
  fn: () =>
    inFolderWithDatabase(async ({ dir, path, database }) => {
      await kvHolding(path, {
        id: "pi_0001",
        state: "settling",
        hold: "pending",
        settlingSince: 1000,
        broadcasting: 1000,
      });

      const env = { KV_PATH: path, DATABASE_URL: database.url };
      const run = await runMove(env, dir, [
        "tests/tools/_written_in_last_look.ts",
      ]);
      assert.equal(run.code, 1, run.out + run.err);
      assert.equal(run.out, "");
      assert.match(
        run.err,
        /^WrittenAfterMoveError: The move into schema relayer committed, but Deno KV's \["relayer","intent","pi_0001"\] was written after the move's last look at it: .* Do not switch the service to PostgreSQL: .* Stop every instance on Deno KV, empty the schema \(TRUNCATE "relayer"\.intents, "relayer"\.holds, "relayer"\.leases, "relayer"\.counters, "relayer"\.claims, "relayer"\.dead_letters\) and run the move again\.\n$/,
      );
      assert.ok(!run.err.includes(database.url), run.err);
      assert.ok(!run.err.includes("Nothing was moved"), run.err);
    }),
});

Deno.test("deno task kv-to-postgres refuses a DATABASE_URL the service would refuse, without showing it, and opens nothing", async () => {
  const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_tool_" });
  try {
    const { code, out, err } = await runMove({
      KV_PATH: `${dir}/relayer.kv`,
      DATABASE_URL: "mysql://relayer:s3cret@db.internal/payments",
    }, dir);
    assert.equal(code, 2);
    assert.equal(out, "");
    assert.match(err, /its scheme is "mysql:"/);
    assert.ok(!err.includes("s3cret"), err);
    assert.deepEqual(await Array.fromAsync(Deno.readDir(dir)), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deno task kv-to-postgres refuses a missing DATABASE_URL, and KV_URL set with KV_PATH, saying which, and makes nothing", async () => {
  const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_tool_" });
  try {
    const unset = await runMove({ KV_PATH: `${dir}/relayer.kv` }, dir);
    assert.equal(unset.code, 2);
    assert.equal(unset.out, "");
    assert.match(unset.err, /^DATABASE_URL is not set: set it to the database/);
    const both = await runMove({
      KV_URL: "https://api.deno.com/databases/00000000/connect",
      KV_PATH: `${dir}/relayer.kv`,
      DATABASE_URL: "postgres://relayer@127.0.0.1:9/payments",
    }, dir);
    assert.equal(both.code, 2);
    assert.match(both.err, /^Set KV_URL or KV_PATH, not both/);
    assert.deepEqual(await Array.fromAsync(Deno.readDir(dir)), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deno task kv-to-postgres refuses a KV_URL it cannot open in one line naming KV_URL, without the access token an answer echoed, as main.ts does", async () => {
  const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_tool_" });
  const token = "KVTOK/0123  456789abcdef"; // a slash and a run of spaces
  // A metadata endpoint that refuses, quoting the request's header.
  const server = refusingMetadata();
  try {
    const { code, out, err } = await runMove({
      KV_URL: `http://127.0.0.1:${server.addr.port}/kv`,
      DENO_KV_ACCESS_TOKEN: token,
      DATABASE_URL: "postgres://relayer@127.0.0.1:9/payments",
    }, dir);
    assert.equal(code, 2);
    assert.equal(out, "");
    assert.match(
      err,
      /^KV_URL: cannot open the KV Connect database \(.*401.*\): check KV_URL and DENO_KV_ACCESS_TOKEN\.\n$/,
    );
    assert.ok(!err.includes("456789abcdef"), err);
  } finally {
    await server.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name:
    "deno task kv-to-postgres keeps the access token out of a refusal KV Connect gives while the move reads (its metadata fetched again and refused with the header echoed), as main.ts does",
  ignore: !postgresAvailable,
  fn: () =>
    inFolderWithDatabase(async ({ dir, database }) => {
      const token = "KVTOK/0123  456789abcdef";
      let fetched = 0;
      // A KV Connect metadata endpoint whose first answer has already
      // expired, and which refuses the next fetch, quoting the header.
      const server: Deno.HttpServer<Deno.NetAddr> = Deno.serve(
        { hostname: "127.0.0.1", port: 0, onListen() {} },
        (req): Response => {
          if (++fetched > 1) {
            return echoedRefusal(req);
          }
          return Response.json({
            version: 2,
            databaseId: crypto.randomUUID(),
            endpoints: [{
              url: `http://127.0.0.1:${server.addr.port}/data`,
              consistency: "strong",
            }],
            token: "data-plane-token",
            expiresAt: new Date(Date.now() - 1000).toISOString(),
          });
        },
      );
      try {
        const { code, out, err } = await runMove({
          KV_URL: `http://127.0.0.1:${server.addr.port}/kv`,
          DENO_KV_ACCESS_TOKEN: token,
          DATABASE_URL: database.url,
        }, dir);
        assert.equal(code, 1, err);
        assert.equal(out, "");
        assert.match(err, /Failed to fetch metadata: unauthorized/);
        assert.ok(!err.includes("456789abcdef"), err);
      } finally {
        await server.shutdown();
      }
    }),
});

Deno.test({
  name:
    "deno task kv-to-postgres refuses a database it cannot open (nothing listening, a wrong password) in one line naming DATABASE_URL and what to do, as main.ts does, without the password, and moves nothing",
  ignore: !postgresAvailable,
  fn: () =>
    inFolderWithDatabase(async ({ dir, path, database, sql }) => {
      await kvHolding(path, {
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
      // A port nothing listens on: one the system gave, closed again.
      const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const port = listener.addr.port;
      listener.close();
      const nobody = new URL(database.url);
      nobody.port = String(port);
      nobody.password = "n0b0dy-s3cret";
      const refused = await runMove(
        { KV_PATH: path, DATABASE_URL: nobody.href },
        dir,
      );
      assert.equal(refused.code, 2, refused.err);
      assert.equal(refused.out, "");
      assert.match(
        refused.err,
        new RegExp(
          `^DATABASE_URL: cannot open PostgreSQL 127\\.0\\.0\\.1:${port}/\\S+, [^:]+: .*ECONNREFUSED.* \\(nothing listens at that host and port: start the server, or correct the host and port in DATABASE_URL\\)\\n$`,
        ),
      );
      assert.ok(!refused.err.includes("n0b0dy-s3cret"), refused.err);

      const wrong = new URL(database.url);
      wrong.password = "wr0ng-s3cret";
      const denied = await runMove(
        { KV_PATH: path, DATABASE_URL: wrong.href },
        dir,
      );
      assert.equal(denied.code, 2, denied.err);
      assert.equal(denied.out, "");
      assert.match(
        denied.err,
        /^DATABASE_URL: cannot open PostgreSQL 127\.0\.0\.1:\d+\/\S+, [^:]+: password authentication failed for user "postgres"/,
      );
      assert.ok(!denied.err.includes("wr0ng-s3cret"), denied.err);
      assert.ok(!/\n\s+at /.test(denied.err), denied.err); // no stack
      const [row] = await sql`
        SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'relayer'`;
      assert.equal(row?.n, 0);
    }),
});

Deno.test("deno task kv-to-postgres refuses a KV_PATH with no file, and makes none", async () => {
  const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_tool_" });
  try {
    const { code, err } = await runMove({
      KV_PATH: `${dir}/relayr.kv`,
      DATABASE_URL: "postgres://relayer@127.0.0.1:9/payments",
    }, dir);
    assert.equal(code, 2);
    assert.match(err, /^KV_PATH: no file at .*relayr\.kv: point KV_PATH/);
    assert.deepEqual(await Array.fromAsync(Deno.readDir(dir)), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name:
    "deno task kv-to-postgres whose session the server ends under the move (a stop, a failover) says nothing was moved and to run it again, with no crash; run again, it moves",
  ignore: !postgresAvailable,
  fn: () =>
    inFolderWithDatabase(async ({ dir, path, database, sql }) => {
      const kv = await Deno.openKv(path);
      const store = new KvStore(kv);
      for (let i = 0; i < 50; i++) {
        await store.createIntent({
          id: `pi_${String(i).padStart(4, "0")}`,
          state: "authorized",
          hold: "pending",
        });
      }
      kv.close();
      const migrating = new PostgresStore(sql);
      await migrating.migrate();
      migrating.close();

      // A write held open on the intents: the move waits at its LOCK
      // TABLE, inside its transaction, where the server ends its session
      // as a stop does (57P01, terminating connection due to administrator
      // command).
      const env = { KV_PATH: path, DATABASE_URL: database.url };
      let tool: ReturnType<typeof runMove> | undefined;
      await sql.begin(async (tx) => {
        await tx`INSERT INTO relayer.intents (id, state) VALUES ('pi_held', 'created')`;
        tool = runMove(env, dir);
        for (let waited = 0;; waited += 20) {
          const [waiting] = await sql`
            SELECT pid FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'
              AND query LIKE 'LOCK TABLE%'`;
          if (waiting) {
            await sql`SELECT pg_terminate_backend(${waiting.pid})`;
            break;
          }
          assert.ok(waited < 30_000, "the move never waited at its lock");
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await tx`ROLLBACK`.catch(() => {}); // the held write: rolled back
        throw new Error("rolled back");
      }).catch((error) => {
        if (error.message !== "rolled back") throw error;
      });
      const cut = await tool!;
      assert.equal(cut.code, 1, cut.err);
      assert.equal(cut.out, "");
      assert.match(
        cut.err,
        /^Error: Cannot move into schema relayer as PostgreSQL lost the connection during the move \(.*\): run the move again once the database answers\. Cut before its commit, the transaction rolled back and nothing was moved; /,
      );
      assert.ok(!/\n\s+at /.test(cut.err), cut.err); // no stack
      assert.ok(!cut.err.includes(database.url), cut.err);
      const [row] = await sql`SELECT count(*)::int AS n FROM relayer.intents`;
      assert.equal(row?.n, 0);

      const again = await runMove(env, dir);
      assert.equal(again.code, 0, again.err);
      assert.match(again.out, /^moved {2}50 intents, 50 holds,/);
    }),
});

Deno.test({
  name:
    "deno task kv-to-postgres takes a lease as held for the service's CLOCK_SKEW past its expiry, and refuses a CLOCK_SKEW the service refuses",
  ignore: !postgresAvailable,
  fn: () =>
    inFolderWithDatabase(async ({ dir, path, database }) => {
      const kv = await Deno.openKv(path);
      await new KvStore(kv).createIntent({
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
      // Lapsed 30 s ago by this clock: within a minute of skew, another
      // instance's clock may still show it held.
      const expiresAt = Date.now() - 30_000;
      await kv.set(["relayer", "lease", "pi_0001"], {
        owner: "delivery-1",
        expiresAt,
      });
      kv.close();
      const env = { KV_PATH: path, DATABASE_URL: database.url };

      const held = await runMove({ ...env, CLOCK_SKEW: "1m" }, dir);
      assert.equal(held.code, 1, held.out);
      // It names when a run again is taken, not only the expiry, which is
      // past: waited for alone, the move was refused again.
      assert.equal(
        held.err,
        `BusyError: Cannot move from Deno KV as a delivery holds the lease of intent pi_0001 until ${
          new Date(expiresAt).toISOString()
        }: pause the queue (or stop the service), wait until ${
          new Date(expiresAt + 60_000).toISOString()
        }, its expiry and the clock skew of 1m0s the move allows for another instance's clock, then run the move again. Nothing was moved.\n`,
      );
      const refused = await runMove({ ...env, CLOCK_SKEW: "1h" }, dir);
      assert.equal(refused.code, 2);
      assert.match(refused.err, /^CLOCK_SKEW must be at most 10m0s/);

      const lapsed = await runMove(env, dir); // 5 s, the service's default
      assert.equal(lapsed.code, 0, lapsed.err);
      assert.match(lapsed.out, /^moved {2}1 intent, 1 hold,/);
      assert.match(lapsed.out, /\nleft .* 1 lapsed lease,/);
    }),
});

Deno.test({
  name:
    "deno task kv-to-postgres killed (SIGKILL) mid-copy leaves PostgreSQL holding nothing, and run again moves everything",
  ignore: !postgresAvailable,
  fn: () =>
    inFolderWithDatabase(async ({ dir, path, database, sql }) => {
      const N = 3000;
      const kv = await Deno.openKv(path);
      const store = new KvStore(kv);
      for (let i = 0; i < N; i += 100) {
        await Promise.all(Array.from({ length: 100 }, async (_, j) => {
          const id = `pi_${String(i + j).padStart(5, "0")}`;
          await store.createIntent({
            id,
            state: "authorized",
            hold: "pending",
          });
          await store.admit({ now: Date.now(), count: `${id}/settle` });
        }));
      }
      kv.close();
      const migrating = new PostgresStore(sql);
      await migrating.migrate();
      migrating.close();
      // The holds' first INSERT waits on a lock this test holds: by then
      // every count and intent was sent in the move's transaction.
      await sql.unsafe(`
        CREATE FUNCTION relayer.wait_for_test() RETURNS trigger
          LANGUAGE plpgsql AS $$
          BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END $$;
        CREATE TRIGGER wait_for_test BEFORE INSERT ON relayer.holds
          FOR EACH STATEMENT EXECUTE FUNCTION relayer.wait_for_test()`);
      const env = { KV_PATH: path, DATABASE_URL: database.url };
      const reserved = await sql.reserve();
      let tool: Deno.ChildProcess | undefined;
      try {
        await reserved`SELECT pg_advisory_lock(4242)`;
        tool = new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "--allow-net",
            "--allow-env",
            "--allow-read",
            `--allow-write=${dir}`,
            "tools/kv_to_postgres.ts",
          ],
          cwd: root,
          env,
          stdout: "null",
          stderr: "null",
        }).spawn();
        for (let waited = 0;; waited += 20) {
          const [waiting] = await sql`
            SELECT pid FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event = 'advisory'`;
          if (waiting) break;
          assert.ok(waited < 60_000, "the move never reached the holds");
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        // Every intent written, not committed: pages no read sees yet.
        const [sent] = await sql`
          SELECT pg_relation_size('relayer.intents')::int AS bytes,
            (SELECT count(*) FROM relayer.intents)::int AS seen`;
        assert.ok(Number(sent?.bytes) > 100_000, String(sent?.bytes));
        assert.equal(sent?.seen, 0);
        tool.kill("SIGKILL");
        assert.equal((await tool.status).signal, "SIGKILL");
      } finally {
        await reserved`SELECT pg_advisory_unlock(4242)`;
        reserved.release();
      }
      // The server ends the killed client's session and rolls it back.
      for (let waited = 0;; waited += 20) {
        const [open] = await sql`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()
            AND backend_xid IS NOT NULL`;
        if (open?.n === 0) break;
        assert.ok(waited < 30_000, "the killed move's session lingered");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const [held] = await sql`
        SELECT (SELECT count(*) FROM relayer.intents)::int AS intents,
          (SELECT count(*) FROM relayer.holds)::int AS holds,
          (SELECT count(*) FROM relayer.counters)::int AS counters`;
      assert.deepEqual({ ...held }, { intents: 0, holds: 0, counters: 0 });

      await sql.unsafe(`DROP TRIGGER wait_for_test ON relayer.holds`);
      const again = await runMove(env, dir);
      assert.equal(again.code, 0, again.err);
      assert.equal(
        again.out.split("\n")[0],
        `moved  ${N} intents, ${N} holds, ${N} delivery counts, 0 replay records, 0 dead letters`,
      );
    }),
});

Deno.test({
  name:
    "deno task kv-to-postgres checks the certificate of a server DATABASE_URL names by IP address against that address with ?sslmode=verify-full, as the service does, and without its CA names DENO_CERT in one line",
  ignore: !postgresAvailable,
  fn: async () => {
    // A certificate that names the address alone: postgres.js gives TLS no
    // server name for an address, and the check fell back to "localhost".
    const certificates = await testCertificates(["127.0.0.1"]);
    const server = await startPostgres({ tls: certificates });
    const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_tool_" });
    try {
      const path = `${dir}/relayer.kv`;
      await kvHolding(path, {
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
      const url = new URL(server.url);
      assert.equal(url.hostname, "127.0.0.1");
      // Without the CA: one line naming DENO_CERT, in the service's words,
      // the runtime's first (not the store's, which names Node's too).
      const untrusted = await runMove({
        KV_PATH: path,
        DATABASE_URL: `${url.href}?sslmode=verify-full`,
      }, dir);
      assert.equal(untrusted.code, 2, untrusted.err);
      assert.match(
        untrusted.err,
        /^DATABASE_URL: cannot open PostgreSQL 127\.0\.0\.1:\d+\/postgres, TLS, server verified \(sslmode=verify-full\): unable to verify the first certificate \(the server's TLS certificate does not chain to a CA this process trusts, or names another host: give Deno the CA with DENO_CERT=<file>, and connect by a name the certificate holds\)\n$/,
      );
      // A DENO_CERT mistyped: Deno trusts no CA from it, and says nothing.
      const missing = `${certificates.caFile}.gone`;
      const mistyped = await runMove({
        KV_PATH: path,
        DATABASE_URL: `${url.href}?sslmode=verify-full`,
        DENO_CERT: missing,
      }, dir);
      assert.equal(mistyped.code, 2, mistyped.err);
      assert.equal(
        mistyped.err,
        `DATABASE_URL: cannot open PostgreSQL 127.0.0.1:${url.port}/postgres, TLS, server verified (sslmode=verify-full): unable to verify the first certificate (DENO_CERT names ${
          JSON.stringify(missing)
        }, where there is no file, so Deno trusts no CA from it: set DENO_CERT to the path of the CA's PEM file, and connect by a name the server's certificate holds)\n`,
      );
      const moved = await runMove({
        KV_PATH: path,
        DATABASE_URL: `${url.href}?sslmode=verify-full`,
        DENO_CERT: certificates.caFile,
      }, dir);
      assert.equal(moved.code, 0, moved.err);
      assert.match(moved.out, /^moved {2}1 intent, 1 hold,/);
    } finally {
      await server.stop();
      await certificates.remove();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

for (
  const [where, query, env, named, fix] of [
    [
      "DATABASE_URL's target_session_attrs",
      "?target_session_attrs=read-write",
      {},
      "DATABASE_URL's target_session_attrs=read-write",
      "",
    ],
    [
      "the environment's PGTARGETSESSIONATTRS",
      "",
      { PGTARGETSESSIONATTRS: "read-write" },
      "PGTARGETSESSIONATTRS=read-write (the environment's, which the client reads where DATABASE_URL sets no target_session_attrs)",
      ", or unset PGTARGETSESSIONATTRS",
    ],
  ] as const
) {
  Deno.test({
    name:
      `deno task kv-to-postgres says ${where} ended each connection, and what to look at, where a server that does not fit it (sessions read-only, for read-write) is up, as the service's start says it`,
    ignore: !postgresAvailable,
    fn: async () => {
      const database = await readOnlyDatabase();
      const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_tool_" });
      try {
        const path = `${dir}/relayer.kv`;
        await kvHolding(path, {
          id: "pi_0001",
          state: "authorized",
          hold: "pending",
        });
        const url = new URL(database.url);
        url.search = query;
        const run = await runMove(
          { KV_PATH: path, DATABASE_URL: url.href, ...env },
          dir,
        );
        assert.equal(run.code, 2, run.err);
        assert.equal(run.out, "");
        assert.equal(
          run.err,
          `DATABASE_URL: cannot open PostgreSQL 127.0.0.1:${url.port}${url.pathname}, no TLS: write CONNECTION_DESTROYED 127.0.0.1:${url.port} (the client ended each connection at its start, as ${named} asks of a server that does not fit it: for primary or read-write, a hot standby (an old primary after a failover; SELECT pg_is_in_recovery()), or sessions read-only for the role or database (SHOW default_transaction_read_only); point DATABASE_URL at the primary, or turn that setting off${fix})\n`,
        );
      } finally {
        await Deno.remove(dir, { recursive: true });
        await database.drop();
      }
    },
  });
}

Deno.test({
  name:
    "deno task kv-to-postgres says what to do for a refused password on a server whose words are German (lc_messages), by the server's SQLSTATE, as in English",
  ignore: !postgresAvailable,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_tool_" });
    const server = await startPostgres({
      settings: { lc_messages: "C.UTF-8" },
      env: { LANGUAGE: "de" },
    });
    try {
      const path = `${dir}/relayer.kv`;
      await kvHolding(path, { id: "pi_0001", state: "authorized" });
      const wrong = new URL(server.url);
      wrong.password = "wr0ng-s3cret";
      const denied = await runMove(
        { KV_PATH: path, DATABASE_URL: wrong.href },
        dir,
      );
      assert.equal(denied.code, 2, denied.err);
      // Before: the server's words alone.
      assert.match(
        denied.err,
        /^DATABASE_URL: cannot open PostgreSQL 127\.0\.0\.1:\d+\/\S+, [^:]+: Passwort-Authentifizierung für Benutzer »postgres« fehlgeschlagen \(the server refused this user and password: check them in DATABASE_URL, /,
      );
      assert.ok(!denied.err.includes("wr0ng-s3cret"), denied.err);
    } finally {
      await server.stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
