/**
 * The start line on Deno Deploy KV and on a KV Connect database (`KV_URL`)
 * (tests/start_line_test.ts). Run by tests/start_line_test.ts in a process
 * of its own, with `DENO_KV_DEFAULT_PATH=:memory:` and
 * `DENO_KV_ACCESS_TOKEN` set there only: `Deno.openKv()` and
 * `Deno.openKv(url)` read them from the environment alone, which the files
 * of a parallel run share.
 *
 * @module
 */
import assert from "node:assert/strict";
import { loadConfig } from "../webhook/config.ts";
import { startLineOf } from "./_start_line.ts";
import { emptyKv } from "./_echoing_kv.ts";

if (
  Deno.env.get("DENO_KV_DEFAULT_PATH") !== ":memory:" ||
  !Deno.env.get("DENO_KV_ACCESS_TOKEN")
) {
  throw new Error(
    "tests/_start_line_kv.ts runs with DENO_KV_DEFAULT_PATH=:memory: and DENO_KV_ACCESS_TOKEN set: run tests/start_line_test.ts",
  );
}

const BASE = {
  SENDER_URL: "http://127.0.0.1:9/",
  OPS_TOKEN: "start-line-ops-token-0123",
};

/** The start line of `openService()` on `base` and `env`. */
async function startLine(
  env: Record<string, string>,
  base: Record<string, string> = BASE,
): Promise<string> {
  return await startLineOf({ ...base, ...env });
}

Deno.test("openService()'s start line on Deno Deploy KV without QStash names QSTASH_TOKEN alone: KV_QUEUE=1 is refused there", async () => {
  // Deno.openKv() opens what this process's DENO_KV_DEFAULT_PATH names:
  // here memory, on Deploy the database it attached (the URL the settings
  // carry).
  assert.match(
    await startLine({
      WEBHOOK_SECRET: "start-line-secret-0123456789",
      DENO_DEPLOYMENT_ID: "test-deployment",
      DENO_KV_DEFAULT_PATH: "https://kv.test/databases/0123/connect",
    }),
    /; store Deno Deploy KV; no queue for jobs \(POST \/v1\/jobs and redrives answer 503: QSTASH_TOKEN gives them one; Deno Deploy runs no local KV queue\); routes: deliveries, ops$/,
  );
});

Deno.test("openService()'s start line on a KV Connect database (KV_URL) without QStash names QSTASH_TOKEN alone: KV_QUEUE=1 is refused with KV_URL", async () => {
  const server = emptyKv();
  // Deno.openKv(url) takes the access token from the environment only.
  const token = Deno.env.get("DENO_KV_ACCESS_TOKEN")!;
  try {
    const env = {
      ...BASE,
      WEBHOOK_SECRET: "start-line-secret-0123456789",
      KV_URL: `http://127.0.0.1:${server.addr.port}/kv`,
      DENO_KV_ACCESS_TOKEN: token,
    };
    assert.throws(
      () => loadConfig({ ...env, KV_QUEUE: "1" }),
      /KV_QUEUE is refused with KV_URL/,
    );
    assert.match(
      await startLine(env, {}),
      /; store KV Connect; no queue for jobs \(POST \/v1\/jobs and redrives answer 503: QSTASH_TOKEN gives them one; a KV Connect database runs no local KV queue\); routes: deliveries, ops$/,
    );
  } finally {
    await server.shutdown();
  }
});
