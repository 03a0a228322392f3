/**
 * `main.ts` started with `KV_PATH` naming another program's SQLite
 * database (tables, none of Deno KV's): a path mistyped, a volume mounted
 * in the wrong place. Deno KV opened it, added its own tables to it, and
 * the service started as on a new store, with none of its payments'
 * records (a payment it had sent could be sent again). The start refuses
 * in one line, and leaves the file as it was.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { assertOneLine, startOnKv } from "./_main_process.ts";
import { namesIn } from "./_kv_files.ts";
import { timeout } from "./_timeout.ts";

/** The names of the tables of the SQLite file at `path`. */
function tables(path: string): string[] {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return db.prepare(
      "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
    ).all().map((row) => String(row.name));
  } finally {
    db.close();
  }
}

for (const journal of ["delete", "wal"]) {
  Deno.test(
    `main.ts refuses in one line a KV_PATH that names another program's SQLite database (journal mode ${journal}), and leaves it as it was`,
    timeout(30_000, async (_t, signal) => {
      const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
      const path = `${dir}/app.db`;
      const db = new DatabaseSync(path);
      db.exec(
        `PRAGMA journal_mode = ${journal}; CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT); CREATE TABLE orders (id INTEGER PRIMARY KEY); INSERT INTO accounts VALUES (1, 'a')`,
      );
      db.close();
      // Closed cleanly: the file alone, no -wal or -shm beside it.
      assert.deepEqual(await namesIn(dir), ["app.db"]);
      try {
        const { served, code, stderr } = await startOnKv(path, dir, signal);
        assert.equal(
          served,
          false,
          "main.ts served on another program's database",
        );
        assert.equal(code, 1, stderr);
        assertOneLine(
          stderr,
          new RegExp(
            `^relayer: cannot start: KV_PATH: ${path} is another program's SQLite database \\(its tables: accounts, orders; none of Deno KV's\\): .*Check that KV_PATH names this service's store.*$`,
          ),
        );
        assert.doesNotMatch(stderr, /new file/);
        // No -wal or -shm of the start's left beside it (looked at first:
        // the read-only handle of tables() leaves them).
        assert.deepEqual(await namesIn(dir), ["app.db"]);
        assert.deepEqual(tables(path), ["accounts", "orders"]);
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    }),
  );
}

/** Starts main.ts on `path`, in `dir`; asserts it serves, then ends it. */
async function assertServes(
  dir: string,
  path: string,
  signal: AbortSignal,
): Promise<void> {
  const { served, stderr } = await startOnKv(path, dir, signal);
  assert.ok(served, `main.ts did not serve on ${path}\n${stderr}`);
  assert.doesNotMatch(stderr, /another program's SQLite database/);
}

Deno.test(
  "main.ts starts on its own Deno KV store, each of whose tables is Deno KV's (its queue's too), not as on another program's database",
  timeout(30_000, async (_t, signal) => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    const path = `${dir}/relayer.kv`;
    try {
      const kv = await Deno.openKv(path);
      await kv.set(["relayer", "intent", "pi_1"], { sent: true });
      kv.close();
      const made = tables(path);
      assert.ok(made.length > 2, made.join(", "));
      await assertServes(dir, path, signal);
      assert.deepEqual(
        await Deno.openKv(path).then(async (kv) => {
          try {
            return (await kv.get(["relayer", "intent", "pi_1"])).value;
          } finally {
            kv.close();
          }
        }),
        { sent: true },
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test(
  "main.ts starts on a SQLite file with no table yet (a store whose making stopped before its tables, or one another instance makes at that moment), not as on another program's database",
  timeout(30_000, async (_t, signal) => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    const path = `${dir}/relayer.kv`;
    try {
      // Deno KV's open first switches a new file to WAL, which writes its
      // header, and only then makes its tables.
      const db = new DatabaseSync(path);
      db.exec("PRAGMA journal_mode = WAL");
      db.close();
      assert.ok((await Deno.stat(path)).size > 0);
      assert.deepEqual(tables(path), []);
      await assertServes(dir, path, signal);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
