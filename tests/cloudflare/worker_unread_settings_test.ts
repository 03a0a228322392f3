/**
 * docs/queues.md tells an operator which of the service's settings to leave
 * out of a Worker's environment, as the example Workers never read them
 * and say nothing of them: held here to what `loadConfig` makes of each
 * (the `Config` field it fills) and to the fields each example Worker uses.
 *
 * @module
 */

import assert from "node:assert/strict";
import { loadConfig } from "../../webhook/config.ts";

const ROOT = new URL("../../", import.meta.url);

const base = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-webhook-secret-16",
};

/** The `Config` field each setting fills, and an env that sets it. */
const FIELDS: Record<string, [field: string, env: Record<string, string>]> = {
  KV_PATH: ["kv", { KV_PATH: "./data/other.kv" }],
  KV_URL: ["kv", { KV_URL: "https://kv.example.test/db" }],
  DENO_KV_ACCESS_TOKEN: ["kv", {
    KV_URL: "https://kv.example.test/db",
    DENO_KV_ACCESS_TOKEN: "a-kv-connect-token",
  }],
  KV_QUEUE: ["kvQueue", { KV_QUEUE: "1" }],
  QSTASH_TOKEN: ["qstashPublish", {
    QSTASH_TOKEN: "a-qstash-token-0123",
    PUBLIC_URL: "https://relayer.example.test",
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
  }],
  QSTASH_URL: ["qstashPublish", {
    QSTASH_TOKEN: "a-qstash-token-0123",
    QSTASH_URL: "http://127.0.0.1:8080",
    PUBLIC_URL: "https://relayer.example.test",
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
  }],
  DATABASE_URL: ["database", { DATABASE_URL: "postgres://u:p@db.test/r" }],
};

Deno.test("the settings docs/queues.md says the example Workers ignore fill only Config fields those Workers never use", async () => {
  const doc = (await Deno.readTextFile(new URL("docs/queues.md", ROOT)))
    .replace(/\s+/g, " ");
  const sentence = /Leave out the settings only `main\.ts` reads: (.*?)\. /
    .exec(doc);
  assert.ok(sentence, "docs/queues.md no longer lists them");
  const named = [...sentence[1]!.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]!);
  assert.deepEqual(named.sort(), Object.keys(FIELDS).sort());
  const plain = loadConfig(base) as unknown as Record<string, unknown>;
  const sources = {
    "worker.ts": await Deno.readTextFile(
      new URL("examples/cloudflare/worker.ts", ROOT),
    ),
    "postgres_worker.ts": await Deno.readTextFile(
      new URL("examples/cloudflare/postgres_worker.ts", ROOT),
    ),
  };
  for (const [name, [field, env]] of Object.entries(FIELDS)) {
    // The setting changes that field, and no other the Workers use.
    const set = loadConfig({ ...base, ...env }) as unknown as Record<
      string,
      unknown
    >;
    assert.notDeepEqual(set[field], plain[field], `${name} fills ${field}`);
    for (const [file, source] of Object.entries(sources)) {
      const code = source.replace(/\/\*\*[\s\S]*?\*\//g, "");
      const used = new RegExp(`\\b(config\\.${field}\\b|${field}\\b.*= config)`)
        .test(code) || new RegExp(`\\{[^}]*\\b${field}\\b[^}]*\\} = config`)
        .test(code);
      const read = name === "DATABASE_URL" && file === "postgres_worker.ts";
      assert.equal(used, read, `${file} and ${name} (${field})`);
    }
  }
});
