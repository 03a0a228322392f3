/**
 * `openService()` on a KV Connect database (`KV_URL`) reads it once
 * before it serves: a database that opens but refuses that read is
 * refused, and the handle it opened is closed (the test's resource
 * sanitizer fails on a `Deno.Kv` left open).
 */
import assert from "node:assert/strict";
import { ConfigError, loadConfig } from "../webhook/config.ts";
import { openService } from "../main.ts";
import { readRefusingKv } from "./_echoing_kv.ts";

const TOKEN = "kv-url-probe-token-0123456789";

Deno.test("openService() refuses a KV_URL database whose first read is refused, and leaves no KV handle open", async () => {
  const server = readRefusingKv();
  // Deno.openKv(url) takes the access token from the environment only.
  const before = Deno.env.get("DENO_KV_ACCESS_TOKEN");
  Deno.env.set("DENO_KV_ACCESS_TOKEN", TOKEN);
  try {
    await assert.rejects(
      openService(
        loadConfig({
          SENDER_URL: "http://127.0.0.1:9/",
          WEBHOOK_SECRET: "kv-url-probe-secret-0123456789",
          KV_URL: `http://127.0.0.1:${server.addr.port}/kv`,
          DENO_KV_ACCESS_TOKEN: TOKEN,
        }),
        { log: () => {} },
      ),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.match(
          error.message,
          /^KV_URL: cannot open the KV Connect database \(.*403.*\): check KV_URL and DENO_KV_ACCESS_TOKEN\.$/,
        );
        assert.doesNotMatch(error.message, new RegExp(TOKEN));
        return true;
      },
    );
  } finally {
    if (before === undefined) Deno.env.delete("DENO_KV_ACCESS_TOKEN");
    else Deno.env.set("DENO_KV_ACCESS_TOKEN", before);
    await server.shutdown();
  }
});
