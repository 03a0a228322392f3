/**
 * `main.ts` refusing a `KV_PATH` it can write but cannot use as a store:
 * the refusal says what is wrong there, not that the volume is read-only
 * (which would send the operator to remount a volume that is fine). Two
 * paths reach the read-only words only on the errors that mean it: the
 * store's write probe, and the folder's write probe after an open failed.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { openService } from "../main.ts";
import { loadConfig } from "../webhook/config.ts";
import { assertOneLine, startMain } from "./_main_process.ts";
import { timeout } from "./_timeout.ts";

const SETTINGS = {
  SENDER_URL: "http://127.0.0.1:9/",
  WEBHOOK_SECRET: "start-secret-0123456789abcdef",
};

/** Starts `main.ts` on `kvPath`, writing `dir`; its exit code and stderr. */
async function refusal(
  kvPath: string,
  dir: string,
): Promise<{ code: number; stderr: string }> {
  const service = startMain(
    { ...SETTINGS, KV_PATH: kvPath },
    { writeDir: dir },
  );
  try {
    return await service.ended();
  } finally {
    service.kill();
  }
}

/**
 * A Deno KV store at `path` whose table another program changed: Deno KV
 * opens it (its migrations are done), and its first read of a key fails,
 * "no such column: version".
 */
async function storeWithoutVersion(path: string): Promise<void> {
  const kv = await Deno.openKv(path);
  await kv.set(["made"], 1);
  kv.close();
  const db = new DatabaseSync(path);
  db.exec("alter table kv drop column version");
  db.close();
}

Deno.test(
  "main.ts refuses a Deno KV file whose write probe fails for another reason than read-only (another program changed its table) as no store it can open, not as read-only",
  timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    try {
      const path = `${dir}/relayer.kv`;
      await storeWithoutVersion(path);
      const { code, stderr } = await refusal(path, dir);
      assert.equal(code, 1, stderr);
      assertOneLine(
        stderr,
        new RegExp(
          `^relayer: cannot start: KV_PATH: cannot open ${path} as a Deno KV store \\(.*no such column.*\\): check that KV_PATH names this service's store, a file this process can open, and keep that file as it is \\(it may hold every payment's record\\)\\.$`,
        ),
      );
      assert.ok(!stderr.includes("read-only"), stderr);
      // The file holds the store's records: never start afresh beside it.
      assert.doesNotMatch(stderr, /new file/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test(
  "main.ts refuses a KV_PATH whose folder is a link to a missing folder without calling it read-only",
  timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    try {
      // A volume's mount point linked in, the volume not there.
      await Deno.symlink(`${dir}/volume-not-mounted`, `${dir}/data`);
      const path = `${dir}/data/relayer.kv`;
      const { code, stderr } = await refusal(path, dir);
      assert.equal(code, 1, stderr);
      assertOneLine(
        stderr,
        new RegExp(
          `^relayer: cannot start: KV_PATH: cannot open ${path} as a Deno KV store \\(.*\\)`,
        ),
      );
      assert.ok(!stderr.includes("read-only"), stderr);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test(
  "openService() refusing a Deno KV file whose write probe fails for another reason than read-only closes the store it opened (the sanitizer sees no database left open)",
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    try {
      const path = `${dir}/relayer.kv`;
      await storeWithoutVersion(path);
      await assert.rejects(
        openService(
          loadConfig({ ...SETTINGS, KV_PATH: path, RELAYER_INSECURE_DEV: "1" }),
          { log: () => {} },
        ),
        /KV_PATH: cannot open .* as a Deno KV store \(.*no such column/,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);
