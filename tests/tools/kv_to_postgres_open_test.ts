/**
 * `deno task kv-to-postgres` (`tools/kv_to_postgres.ts`) on a `KV_PATH`
 * that is not the store it seems: a store a newer Deno KV made, another
 * program's SQLite database, a file cut to 0 bytes (or gone) beside the
 * `-wal` that holds its records, a link to a missing file. `Deno.openKv`
 * opens each with no word (it reads the newer store as its own, adds its
 * tables to the other database, reads the cut file as a new store and
 * drops its `-wal`, makes a new store at the link's end): the task refuses
 * each as the service's start does, in one line naming `KV_PATH`, before
 * it opens the file or the database, and leaves the files as they were.
 *
 * @module
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import postgres from "postgres";
import { KvStore } from "../../store/kv.ts";
import {
  freshDatabase,
  postgresAvailable,
  postgresUrl,
  sharedClient,
} from "../_postgres.ts";
import { runMove, runTool } from "./_run_tool.ts";
import { startPostgres } from "../../support/postgres_server.ts";
import { ipv6LoopbackAvailable } from "../_tls_postgres.ts";
import { moveSchemaOn, namesIn, schemaVersion } from "../_kv_files.ts";
import { timeout } from "../_timeout.ts";

/**
 * A temporary folder and a fresh database for `body`; the database
 * dropped and the folder removed after. `moved()` says whether the
 * database has a schema `relayer` with an intent in it.
 */
async function inFolder(
  body: (made: {
    dir: string;
    path: string;
    env: Record<string, string>;
    moved: () => Promise<boolean>;
  }) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_open_" });
  const database = await freshDatabase();
  const sql = postgres(database.url, { onnotice: () => {}, max: 1 });
  const path = `${dir}/relayer.kv`;
  try {
    await body({
      dir,
      path,
      env: { KV_PATH: path, DATABASE_URL: database.url },
      async moved() {
        const [row] = await sql`
          SELECT to_regclass('relayer.intents') IS NOT NULL AS migrated`;
        if (row?.migrated !== true) return false;
        const [n] = await sql`SELECT count(*)::int AS n FROM relayer.intents`;
        return (n?.n ?? 0) > 0;
      },
    });
  } finally {
    await sql.end();
    await database.drop();
    await Deno.remove(dir, { recursive: true });
  }
}

/** A store of one intent, its hold pending, at `path`. */
async function aStore(path: string): Promise<void> {
  const kv = await Deno.openKv(path);
  try {
    await new KvStore(kv).createIntent({
      id: "pi_0001",
      state: "authorized",
      hold: "pending",
    });
  } finally {
    kv.close();
  }
}

/** Asserts that the task exited 2 with one line matching `line`, and printed nothing. */
function assertRefused(
  run: { code: number; out: string; err: string },
  line: RegExp,
): void {
  assert.equal(run.code, 2, `${run.out}${run.err}`);
  assert.equal(run.out, "");
  assert.equal(run.err.trimEnd().split("\n").length, 1, run.err);
  assert.match(run.err.trimEnd(), line);
}

Deno.test({
  name:
    "deno task kv-to-postgres refuses a Deno KV store made by a newer Deno KV, as the service's start does, and moves nothing",
  ignore: !postgresAvailable,
  fn: timeout(
    20_000,
    () =>
      inFolder(async ({ dir, path, env, moved }) => {
        await aStore(path);
        const known = moveSchemaOn(path);
        // Before: "moved  1 intent, 1 hold, …", exit 0, from tables laid
        // out for another Deno.
        assertRefused(
          await runMove(env, dir),
          new RegExp(
            `^KV_PATH: ${path} was made by a newer Deno KV \\(its schema version ${
              known + 1
            }; Deno ${
              Deno.version.deno.replaceAll(".", "\\.")
            } knows up to ${known}\\): .*Keep the file as it is \\(it may hold every payment's record\\), and run the move with the Deno that made it, or a newer one\\.$`,
          ),
        );
        assert.equal(await moved(), false);
        // The file alone (no scratch store of the check's), then its version.
        assert.deepEqual(await namesIn(dir), ["relayer.kv"]);
        assert.equal(schemaVersion(path), known + 1);
      }),
  ),
});

Deno.test({
  name:
    "deno task kv-to-postgres refuses another program's SQLite database, and adds no table of Deno KV's to it",
  ignore: !postgresAvailable,
  fn: timeout(
    20_000,
    () =>
      inFolder(async ({ dir, path, env }) => {
        const db = new DatabaseSync(path);
        db.exec(
          "CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT); INSERT INTO accounts (owner) VALUES ('kept')",
        );
        db.close();
        // Before: Deno KV added its tables (kv, migration_state, …) to the
        // file, then the move found nothing under the prefix.
        assertRefused(
          await runMove(env, dir),
          new RegExp(
            `^KV_PATH: ${path} is another program's SQLite database \\(its tables: accounts; none of Deno KV's\\): Deno KV would add its tables to it, and the move find none of the service's payments' records\\. Check that KV_PATH names this service's store, then run the move again \\(leave that file as it is\\)\\.$`,
          ),
        );
        const after = new DatabaseSync(path, { readOnly: true });
        try {
          assert.deepEqual(
            after.prepare(
              "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
            ).all().map((row) => row.name),
            ["accounts"],
          );
        } finally {
          after.close();
        }
      }),
  ),
});

for (
  const { name, lose, line } of [
    {
      name: "cut to 0 bytes",
      lose: (path: string) => Deno.truncate(path, 0),
      line: (path: string, bytes: number) =>
        `^KV_PATH: ${path} is empty \\(0 bytes\\) and its -wal file holds ${bytes} bytes: the file was cut short, and its records may be in the -wal\\. Keep both files as they are \\(they may hold every payment's record\\), restore the store from a backup, then run the move again\\.$`,
    },
    {
      name: "removed",
      lose: (path: string) => Deno.remove(path),
      line: (path: string, bytes: number) =>
        `^KV_PATH: ${path} is missing and its -wal file holds ${bytes} bytes: the file was moved or removed without it, and its records may be in the -wal\\. .*then run the move again\\.$`,
    },
  ]
) {
  Deno.test({
    name:
      `deno task kv-to-postgres refuses a Deno KV file ${name} whose -wal holds its records, and leaves the -wal as it was`,
    ignore: !postgresAvailable,
    fn: timeout(
      20_000,
      () =>
        inFolder(async ({ dir, path, env, moved }) => {
          // The files as a crash leaves them, the WAL not yet checkpointed.
          const live = await Deno.openKv(`${dir}/live.kv`);
          try {
            await new KvStore(live).createIntent({
              id: "pi_0001",
              state: "authorized",
              hold: "pending",
            });
            for (const suffix of ["", "-wal", "-shm"]) {
              await Deno.copyFile(
                `${dir}/live.kv${suffix}`,
                `${path}${suffix}`,
              );
            }
          } finally {
            live.close();
          }
          await lose(path);
          const wal = await Deno.readFile(`${path}-wal`);
          assert.ok(wal.length > 0);
          // Before, cut to 0 bytes: Deno KV read it as a new store, dropped
          // the -wal, and the move found nothing under the prefix.
          assertRefused(
            await runMove(env, dir),
            new RegExp(line(path, wal.length)),
          );
          assert.deepEqual(await Deno.readFile(`${path}-wal`), wal);
          assert.equal(await moved(), false);
        }),
    ),
  });
}

Deno.test({
  name:
    "deno task kv-to-postgres refuses a KV_PATH that links to a missing file, and makes no store at its end",
  ignore: !postgresAvailable,
  fn: timeout(
    20_000,
    () =>
      inFolder(async ({ dir, path, env }) => {
        await Deno.mkdir(`${dir}/volume`);
        await Deno.symlink(`${dir}/volume/relayer.kv`, path);
        assertRefused(
          await runMove(env, dir),
          new RegExp(
            `^KV_PATH: ${path} is a link to ${dir}/volume/relayer\\.kv, which does not exist: the store it points to is missing \\(a volume not mounted, a file moved\\)\\. Mount or restore the store there, then run the move again\\.$`,
          ),
        );
        assert.deepEqual(await namesIn(`${dir}/volume`), []);
      }),
  ),
});

Deno.test({
  name:
    "deno task kv-to-postgres, its read or write narrowed away from KV_PATH's folder, names the flags that folder lacks",
  fn: timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_open_" });
    const elsewhere = await Deno.makeTempDir({
      prefix: "kv_to_postgres_open_",
    });
    try {
      const path = `${dir}/relayer.kv`;
      await aStore(path);
      const run = async (
        read: string,
        write: string,
        more: string[] = [],
      ) => {
        const { code, stdout, stderr } = await runTool(
          "kv_to_postgres.ts",
          [],
          {
            permissions: ["--allow-net", "--allow-env", read, write, ...more],
            env: {
              KV_PATH: path,
              // Not reached: the open is refused first.
              DATABASE_URL: "postgres://relayer@127.0.0.1:1/payments",
            },
          },
        );
        return { code, out: stdout, err: stderr };
      };
      // Why: the write, if it lacks it (with or without the read), or the read.
      const said = (flags: string, lacks: "read" | "write") =>
        new RegExp(
          `^KV_PATH: this process may not open ${path} \\(${
            lacks === "read"
              ? `it may not read ${dir}/`
              : "deno task kv-to-postgres may write \\./data only"
          }\\): run the tool with ${flags}$`,
        );
      // Before: "… run the tool with --allow-write=<dir>/", which it had.
      assertRefused(
        await run(`--allow-read=${elsewhere}`, `--allow-write=${dir}`),
        said(`--allow-read=${dir}/`, "read"),
      );
      assertRefused(
        await run("--allow-read", `--allow-write=${elsewhere}`),
        said(`--allow-write=${dir}/`, "write"),
      );
      assertRefused(
        await run(`--allow-read=${elsewhere}`, `--allow-write=${elsewhere}`),
        said(`--allow-read=${dir}/ --allow-write=${dir}/`, "write"),
      );
      // The folder granted both, the file itself denied: its write, which
      // Deno KV's open needs.
      assertRefused(
        await run("--allow-read", `--allow-write=${dir}`, [
          `--deny-write=${path}`,
        ]),
        said(`--allow-write=${dir}/`, "write"),
      );
      // The file alone, as it was.
      assert.deepEqual(await namesIn(dir), ["relayer.kv"]);
    } finally {
      await Deno.remove(dir, { recursive: true });
      await Deno.remove(elsewhere, { recursive: true });
    }
  }),
});

Deno.test({
  name:
    "deno task kv-to-postgres, KV_PATH a bare file name it may not open, names the flags for the folder it runs in (.), and those flags open it",
  fn: timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_open_" });
    const elsewhere = await Deno.makeTempDir({
      prefix: "kv_to_postgres_open_",
    });
    try {
      await aStore(`${dir}/relayer.kv`);
      const run = async (read: string, write: string) => {
        const { code, stdout, stderr } = await runTool(
          "kv_to_postgres.ts",
          [],
          {
            permissions: ["--allow-net", "--allow-env", read, write],
            env: {
              KV_PATH: "relayer.kv",
              // Not reached: the open is refused first.
              DATABASE_URL: "postgres://relayer@127.0.0.1:1/payments",
            },
            cwd: dir,
          },
        );
        return { code, out: stdout, err: stderr };
      };
      // The file's folder is the one the tool runs in: "." (no "/" to cut
      // the name at), not an empty flag ("--allow-write=").
      assertRefused(
        await run(`--allow-read=${elsewhere}`, `--allow-write=${elsewhere}`),
        /^KV_PATH: this process may not open relayer\.kv \(deno task kv-to-postgres may write \.\/data only\): run the tool with --allow-read=\. --allow-write=\.$/,
      );
      assertRefused(
        await run("--allow-read", `--allow-write=${elsewhere}`),
        /^KV_PATH: this process may not open relayer\.kv \(deno task kv-to-postgres may write \.\/data only\): run the tool with --allow-write=\.$/,
      );
      // With the flags it named, the store opens: the refusal is the
      // database's, the next step.
      const given = await run("--allow-read=.", "--allow-write=.");
      assert.equal(given.code, 2, `${given.out}${given.err}`);
      assert.match(given.err, /^DATABASE_URL: cannot open /);
    } finally {
      await Deno.remove(dir, { recursive: true });
      await Deno.remove(elsewhere, { recursive: true });
    }
  }),
});

Deno.test({
  name:
    "deno task kv-to-postgres moves into a database whose name holds an '@' written %40, as the service connects to it",
  ignore: !postgresAvailable,
  fn: timeout(20_000, async () => {
    const admin = await sharedClient();
    const name = `pay@${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    await admin.unsafe(`CREATE DATABASE "${name}"`);
    const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_open_" });
    const path = `${dir}/relayer.kv`;
    const url = new URL(await postgresUrl());
    url.pathname = `/${name.replace("@", "%40")}`;
    // The name given decoded: postgres.js sends the URL's path as it is.
    const sql = postgres(url.href, {
      database: name,
      onnotice: () => {},
      max: 1,
    });
    try {
      await aStore(path);
      // Before: 'database "pay%40…" does not exist', exit 2.
      const run = await runMove({ KV_PATH: path, DATABASE_URL: url.href }, dir);
      assert.equal(run.code, 0, `${run.out}${run.err}`);
      const [n] = await sql`SELECT count(*)::int AS n FROM relayer.intents`;
      assert.equal(n?.n, 1);
    } finally {
      await sql.end();
      await admin.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await Deno.remove(dir, { recursive: true });
    }
  }),
});

Deno.test({
  name:
    "deno task kv-to-postgres moves into a database at an IPv6 address in brackets ([::1]), as the service connects to it",
  ignore: !postgresAvailable || !await ipv6LoopbackAvailable(),
  fn: timeout(30_000, async () => {
    const server = await startPostgres({
      settings: { listen_addresses: "127.0.0.1,::1" },
    });
    const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_open_" });
    const path = `${dir}/relayer.kv`;
    const sql = postgres(server.url, { onnotice: () => {}, max: 1 });
    try {
      await aStore(path);
      // Before: "getaddrinfo ENOTFOUND [", exit 2.
      const run = await runMove({
        KV_PATH: path,
        DATABASE_URL:
          `postgres://postgres:${server.password}@[::1]:${server.port}/postgres`,
      }, dir);
      assert.equal(run.code, 0, `${run.out}${run.err}`);
      const [n] = await sql`SELECT count(*)::int AS n FROM relayer.intents`;
      assert.equal(n?.n, 1);
    } finally {
      await sql.end();
      await server.stop();
      await Deno.remove(dir, { recursive: true });
    }
  }),
});
