/**
 * `KV_PATH=:memory:` keeps the store in memory: no file, folder or disk to
 * check, whatever the working folder holds (here, a folder that happens
 * to be named `:memory:`, which a path on disk would be refused as).
 *
 * Run by tests/start_memory_store_test.ts in a process of its own: the
 * working folder is the process's, and the files of a parallel run share
 * one process, so a folder changed in the run's would be where every other
 * file's relative path, and each child it starts without a `cwd`, went
 * meanwhile.
 *
 * @module
 */

import assert from "node:assert/strict";
import { openService } from "../main.ts";
import { loadConfig } from "../webhook/config.ts";

Deno.test("openService() with KV_PATH=:memory: starts in a working folder that holds a folder named :memory:", async () => {
  const dir = await Deno.makeTempDir();
  await Deno.mkdir(`${dir}/:memory:`);
  Deno.chdir(dir);
  try {
    const service = await openService(
      loadConfig({
        SENDER_URL: "http://127.0.0.1:9/",
        OPS_TOKEN: "memory-store-ops-token-0123",
        KV_PATH: ":memory:",
        WEBHOOK_SECRET: "memory-store-webhook-secret-0123456789",
      }),
      { log: () => {} },
    );
    await service.close();
    // The store wrote nothing there.
    const names: string[] = [];
    for await (const entry of Deno.readDir(dir)) names.push(entry.name);
    assert.deepEqual(names, [":memory:"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
