/**
 * `main.ts` started on a Deno KV store made by a newer Deno: its
 * `migration_state` version is above the one this Deno's Deno KV knows.
 * Deno KV runs only the migrations past the file's version, so it opened
 * such a store with no word, and the service served on tables laid out for
 * another Deno (its writes could fail, or its reads miss what the newer one
 * wrote). The start refuses in one line that says to keep the file and run
 * the service with the Deno that made it, or a newer one, and leaves the
 * file as it was.
 */
import assert from "node:assert/strict";
import { assertOneLine, startOnKv } from "./_main_process.ts";
import { moveSchemaOn, namesIn, schemaVersion } from "./_kv_files.ts";
import { timeout } from "./_timeout.ts";

Deno.test(
  "main.ts refuses in one line a Deno KV store made by a newer Deno KV schema, and leaves it as it was",
  timeout(30_000, async (_t, signal) => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    const path = `${dir}/relayer.kv`;
    try {
      // A store this Deno made (its version is this Deno's), then moved one
      // version on, as a newer Deno KV's migration would.
      const kv = await Deno.openKv(path);
      await kv.set(["relayer", "intent", "pi_1"], "kept");
      kv.close();
      const known = moveSchemaOn(path);
      assert.ok(known >= 1, `this Deno's version: ${known}`);

      const { served, code, stderr } = await startOnKv(path, dir, signal);
      assert.equal(served, false, "main.ts served on a newer Deno's store");
      assert.equal(code, 1, stderr);
      assertOneLine(
        stderr,
        new RegExp(
          `^relayer: cannot start: KV_PATH: ${path} was made by a newer Deno KV \\(its schema version ${
            known + 1
          }; Deno ${
            Deno.version.deno.replaceAll(".", "\\.")
          } knows up to ${known}\\): .*Keep the file as it is \\(it may hold every payment's record\\), and run the service with the Deno that made it, or a newer one, then start again\\.$`,
        ),
      );
      assert.doesNotMatch(stderr, /new file/);
      // The file alone: no scratch store of the start's, no -wal or -shm.
      assert.deepEqual(await namesIn(dir), ["relayer.kv"]);
      assert.equal(schemaVersion(path), known + 1, "its version as it was");
      const after = await Deno.openKv(path);
      try {
        assert.equal(
          (await after.get(["relayer", "intent", "pi_1"])).value,
          "kept",
        );
      } finally {
        after.close();
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test(
  "main.ts makes no scratch store to compare when it starts on a store of a schema every Deno that runs it knows",
  timeout(30_000, async (_t, signal) => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    const path = `${dir}/relayer.kv`;
    const watcher = Deno.watchFs(dir);
    try {
      const kv = await Deno.openKv(path);
      await kv.set(["relayer", "intent", "pi_1"], "kept");
      kv.close();
      const made: string[] = [];
      const watching = (async () => {
        for await (const event of watcher) {
          if (event.kind !== "create") continue;
          for (const file of event.paths) {
            const name = file.slice(dir.length + 1);
            if (name.startsWith(".relayer-schema-")) made.push(name);
          }
        }
      })();
      const { served, stderr } = await startOnKv(path, dir, signal);
      assert.ok(served, `main.ts did not serve on its own store\n${stderr}`);
      watcher.close();
      await watching;
      assert.deepEqual(made, [], "a scratch store made at the start");
    } finally {
      try {
        watcher.close();
      } catch {
        // Closed above.
      }
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
