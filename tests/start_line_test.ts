/**
 * The start line says where `POST /v1/jobs` and a redrive put a job: on
 * QStash, on the local queue, or nowhere (both then answer 503), so a
 * QStash deployment that left out QSTASH_TOKEN shows it before its first
 * job is refused.
 */
import assert from "node:assert/strict";
import { openService } from "../main.ts";
import { loadConfig } from "../webhook/config.ts";
import { freshDatabase, postgresAvailable } from "./_postgres.ts";
import { emptyKv } from "./_echoing_kv.ts";

const BASE = {
  SENDER_URL: "http://127.0.0.1:9/",
  OPS_TOKEN: "start-line-ops-token-0123",
  KV_PATH: ":memory:",
};
const QSTASH = {
  QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
  QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789abc",
  PUBLIC_URL: "https://relayer.example.test",
};

/** {@linkcode BASE} without KV_PATH, for a store named otherwise. */
const { KV_PATH: _, ...BASE_NO_KV_PATH } = BASE;

/** The start line of `openService()` on `base` and `env`. */
async function startLine(
  env: Record<string, string>,
  base: Record<string, string> = BASE,
): Promise<string> {
  const service = await openService(loadConfig({ ...base, ...env }), {
    log: () => {},
  });
  try {
    return service.description;
  } finally {
    await service.close();
  }
}

Deno.test("openService()'s start line says where POST /v1/jobs and a redrive put a job", async () => {
  assert.match(
    await startLine({ ...QSTASH, QSTASH_TOKEN: "qstash-token" }),
    /; jobs to QStash \(9 retries\); routes: qstash and its failure callback, ops$/,
  );
  assert.match(
    await startLine(QSTASH),
    /; no queue for jobs \(POST \/v1\/jobs and redrives answer 503: QSTASH_TOKEN, or KV_QUEUE=1 locally, gives them one\); routes: qstash and its failure callback, ops$/,
  );
  assert.match(
    await startLine({
      WEBHOOK_SECRET: "start-line-secret-0123456789",
      KV_QUEUE: "1",
    }),
    /; jobs to the local KV queue; routes: deliveries, ops, local KV queue$/,
  );
});

Deno.test({
  name:
    "openService()'s start line on PostgreSQL without QStash names QSTASH_TOKEN alone: KV_QUEUE=1 is refused there",
  ignore: !postgresAvailable,
  fn: async () => {
    const database = await freshDatabase();
    try {
      // Before, it said "QSTASH_TOKEN, or KV_QUEUE=1 locally, gives them
      // one", and KV_QUEUE=1 then stopped the start.
      assert.match(
        await startLine({
          WEBHOOK_SECRET: "start-line-secret-0123456789",
          DATABASE_URL: database.url,
        }, BASE_NO_KV_PATH),
        /; no queue for jobs \(POST \/v1\/jobs and redrives answer 503: QSTASH_TOKEN gives them one; the local KV queue does not run with DATABASE_URL\); routes: deliveries, ops$/,
      );
    } finally {
      await database.drop();
    }
  },
});

Deno.test("openService()'s start line on Deno Deploy KV without QStash names QSTASH_TOKEN alone: KV_QUEUE=1 is refused there", async () => {
  // Deno.openKv() opens what DENO_KV_DEFAULT_PATH names: here memory, on
  // Deploy the database it attached (the URL the settings carry).
  const env = {
    WEBHOOK_SECRET: "start-line-secret-0123456789",
    DENO_DEPLOYMENT_ID: "test-deployment",
    DENO_KV_DEFAULT_PATH: "https://kv.test/databases/0123/connect",
  };
  assert.throws(
    () => loadConfig({ ...BASE_NO_KV_PATH, ...env, KV_QUEUE: "1" }),
    /KV_QUEUE is refused on Deno Deploy/,
  );
  const before = Deno.env.get("DENO_KV_DEFAULT_PATH");
  Deno.env.set("DENO_KV_DEFAULT_PATH", ":memory:");
  try {
    // Before, it said "QSTASH_TOKEN, or KV_QUEUE=1 locally, gives them
    // one", a setting that then stopped the start.
    assert.match(
      await startLine(env, BASE_NO_KV_PATH),
      /; store Deno Deploy KV; no queue for jobs \(POST \/v1\/jobs and redrives answer 503: QSTASH_TOKEN gives them one; Deno Deploy runs no local KV queue\); routes: deliveries, ops$/,
    );
  } finally {
    if (before === undefined) Deno.env.delete("DENO_KV_DEFAULT_PATH");
    else Deno.env.set("DENO_KV_DEFAULT_PATH", before);
  }
});

Deno.test("openService()'s start line on a KV Connect database (KV_URL) without QStash names QSTASH_TOKEN alone: KV_QUEUE=1 is refused with KV_URL", async () => {
  const server = emptyKv();
  const token = "start-line-kv-token-0123456789";
  // Deno.openKv(url) takes the access token from the environment only.
  const before = Deno.env.get("DENO_KV_ACCESS_TOKEN");
  Deno.env.set("DENO_KV_ACCESS_TOKEN", token);
  try {
    const env = {
      ...BASE_NO_KV_PATH,
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
    if (before === undefined) Deno.env.delete("DENO_KV_ACCESS_TOKEN");
    else Deno.env.set("DENO_KV_ACCESS_TOKEN", before);
    await server.shutdown();
  }
});
