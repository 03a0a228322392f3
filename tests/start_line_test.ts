/**
 * The start line says where `POST /v1/jobs` and a redrive put a job: on
 * QStash, on the local queue, or nowhere (both then answer 503), so a
 * QStash deployment that left out QSTASH_TOKEN shows it before its first
 * job is refused.
 */
import assert from "node:assert/strict";
import { loadConfig } from "../webhook/config.ts";
import { startLineOf } from "./_start_line.ts";
import { freshDatabase, postgresAvailable } from "./_postgres.ts";
import { testInOwnProcess } from "./_own_process.ts";

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
  return await startLineOf({ ...base, ...env });
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

Deno.test("loadConfig() refuses KV_QUEUE=1 on Deno Deploy, beside the database it attached", () => {
  assert.throws(
    () =>
      loadConfig({
        ...BASE_NO_KV_PATH,
        WEBHOOK_SECRET: "start-line-secret-0123456789",
        DENO_DEPLOYMENT_ID: "test-deployment",
        DENO_KV_DEFAULT_PATH: "https://kv.test/databases/0123/connect",
        KV_QUEUE: "1",
      }),
    /KV_QUEUE is refused on Deno Deploy/,
  );
});

Deno.test("openService()'s start line on Deno Deploy KV, and on a KV Connect database (KV_URL), without QStash names QSTASH_TOKEN alone (with DENO_KV_DEFAULT_PATH and DENO_KV_ACCESS_TOKEN set in a process of their own)", async () => {
  await testInOwnProcess("tests/_start_line_kv.ts", {
    // Deno.openKv() opens what DENO_KV_DEFAULT_PATH names: here memory, on
    // Deploy the database it attached (the URL the settings carry).
    DENO_KV_DEFAULT_PATH: ":memory:",
    // Deno.openKv(url) takes the access token from the environment only.
    DENO_KV_ACCESS_TOKEN: "start-line-kv-token-0123456789",
  });
});

Deno.test("openService()'s start line says a rotation is under way only while WEBHOOK_SECRET_NEXT differs from WEBHOOK_SECRET, and names one equal to it as left to unset", async () => {
  const secret = "start-line-secret-0123456789";
  assert.match(
    await startLine({
      WEBHOOK_SECRET: secret,
      WEBHOOK_SECRET_NEXT: "start-line-next-0123456789",
    }),
    /; routes: deliveries \(two secrets: WEBHOOK_SECRET_NEXT, a rotation under way\), ops$/,
  );
  // The rotation's last step half done: one secret, so no rotation runs.
  assert.match(
    await startLine({ WEBHOOK_SECRET: secret, WEBHOOK_SECRET_NEXT: secret }),
    /; routes: deliveries \(WEBHOOK_SECRET_NEXT equals WEBHOOK_SECRET: a rotation over, unset it\), ops$/,
  );
});

Deno.test("openService()'s start line says an ops token rotation is under way only while OPS_TOKEN_NEXT differs from OPS_TOKEN, and names one equal to it as left to unset", async () => {
  const secret = "start-line-secret-0123456789";
  assert.match(
    await startLine({
      WEBHOOK_SECRET: secret,
      OPS_TOKEN_NEXT: "start-line-ops-next-4567",
    }),
    /; routes: deliveries, ops \(two tokens: OPS_TOKEN_NEXT, a rotation under way\)$/,
  );
  // The rotation's last step half done: one token, so no rotation runs.
  assert.match(
    await startLine({ WEBHOOK_SECRET: secret, OPS_TOKEN_NEXT: BASE.OPS_TOKEN }),
    /; routes: deliveries, ops \(OPS_TOKEN_NEXT equals OPS_TOKEN: a rotation over, unset it\)$/,
  );
});

Deno.test("openService()'s start line in insecure dev mode names as open each route whose keys are not set, and no route whose keys are", async () => {
  const { OPS_TOKEN: _ops, ...noOps } = BASE;
  const cases: [Record<string, string>, Record<string, string>, string][] = [
    [
      BASE,
      { WEBHOOK_SECRET: "start-line-secret-0123456789" },
      "/v1/qstash and /v1/qstash/failed, /v1/pubsub, /v1/pubsub/dead-letter",
    ],
    [
      noOps,
      { WEBHOOK_SECRET: "start-line-secret-0123456789" },
      "/v1/qstash and /v1/qstash/failed, /v1/pubsub, /v1/pubsub/dead-letter, the ops routes",
    ],
    [
      BASE,
      // Taken on this machine only.
      { ...QSTASH, PUBLIC_URL: "http://localhost:8000" },
      "/v1/pubsub, /v1/pubsub/dead-letter, /v1/deliveries",
    ],
  ];
  for (const [base, env, open] of cases) {
    const line = await startLine({ ...env, RELAYER_INSECURE_DEV: "1" }, base);
    assert.ok(
      line.includes(
        `INSECURE DEV MODE (unsigned requests accepted on ${open})`,
      ),
      line,
    );
  }
});
