/**
 * `main.ts` started on a Deno KV file that holds a store but is damaged:
 * its pages overwritten (SQLite: "database disk image is malformed"), its
 * header overwritten ("file is not a database"), or cut short. The file
 * may hold every payment's record (the write-aheads of the sends), so the
 * refusal says it is damaged and to keep it and restore it, never to point
 * `KV_PATH` at a new file: a service started afresh could send a payment
 * a second time.
 */
import assert from "node:assert/strict";
import { overwrite } from "./_overwrite.ts";
import { assertOneLine, startMain } from "./_main_process.ts";
import { timeout } from "./_timeout.ts";

const SETTINGS = {
  SENDER_URL: "http://127.0.0.1:9/",
  WEBHOOK_SECRET: "start-secret-0123456789abcdef",
};

/** A store at `path` with a few hundred records, closed cleanly (no WAL). */
async function makeStore(path: string): Promise<void> {
  const kv = await Deno.openKv(path);
  for (let i = 0; i < 200; i++) {
    await kv.set(["relayer", "intent", i], "x".repeat(500));
  }
  kv.close();
}

const DAMAGES: [string, (path: string) => void][] = [
  [
    "its pages overwritten",
    (path) => overwrite(path, 2 * 4096, 3 * 4096, 0xab),
  ],
  ["its header overwritten", (path) => overwrite(path, 0, 100, 0x41)],
  [
    "cut short",
    (path) => Deno.truncateSync(path, Math.floor(Deno.statSync(path).size / 2)),
  ],
];

for (const [damage, apply] of DAMAGES) {
  Deno.test(
    `main.ts refuses a damaged Deno KV file (${damage}) in one line that says to keep and restore it, not to start on a new file`,
    timeout(30_000, async () => {
      const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
      const path = `${dir}/relayer.kv`;
      try {
        await makeStore(path);
        apply(path);
        const service = startMain({ ...SETTINGS, KV_PATH: path }, {
          writeDir: dir,
        });
        const { code, stderr } = await service.ended().finally(service.kill);
        assert.equal(code, 1, stderr);
        assertOneLine(
          stderr,
          new RegExp(
            `^relayer: cannot start: KV_PATH: ${path} is damaged, or is not a SQLite file \\((Type)?Error: (file is not a database|database disk image is malformed)\\): keep it as it is \\(it may hold every payment's record\\)\\. Check that KV_PATH names this service's store; if it does, restore the store from a backup \\(or recover its rows: sqlite3 ${path} \\.recover\\), then start again\\.$`,
          ),
        );
        assert.doesNotMatch(stderr, /new file/);
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    }),
  );
}
