/**
 * `main.ts` with the secrets the docs give for a local run and no
 * `PUBLIC_URL`: served on loopback, as the docs run it, and refused at
 * start when it listens where others reach it (`--host 0.0.0.0`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { startMain } from "./_main_process.ts";
import { assertStartLineFirst, startOffLoopback } from "./_off_loopback.ts";
import { timeout } from "./_timeout.ts";

const LOCAL = {
  SENDER_URL: "http://127.0.0.1:9/",
  WEBHOOK_SECRET: "local-secret-0123456789",
  OPS_TOKEN: "local-ops-token-0123456789",
};

Deno.test(
  "main.ts with the docs' local-run secrets serves on loopback, and refuses to start listening on 0.0.0.0, naming the setting, never its value",
  timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_published_" });
    try {
      const env = { ...LOCAL, KV_PATH: `${dir}/relayer.kv` };
      const { code, stdout, stderr, listening } = await startOffLoopback(
        env,
        dir,
      );
      assert.equal(listening, false, "it served on 0.0.0.0");
      assert.equal(code, 1, stdout + stderr);
      assert.match(
        stderr,
        /^relayer: cannot start: WEBHOOK_SECRET is a value the docs give for a local run, which anyone can read, and this service listens on http:\/\/0\.0\.0\.0:\d+\/, off this machine: generate a random one, such as with: openssl rand -base64 32$/m,
      );
      assert.ok(!(stdout + stderr).includes(LOCAL.WEBHOOK_SECRET));
      assert.ok(!(stdout + stderr).includes(LOCAL.OPS_TOKEN));

      const served = startMain(env, { writeDir: dir });
      try {
        assert.match((await served.base()) ?? "", /^http:\/\/127\.0\.0\.1:/);
      } finally {
        served.kill();
        await served.ended();
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test(
  "main.ts refused on 0.0.0.0 for the docs' local-run secrets writes its start line before the refusal, not after it, where both streams go to one log",
  timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_published_" });
    try {
      await assertStartLineFirst(
        { ...LOCAL, KV_PATH: `${dir}/relayer.kv` },
        dir,
        "WEBHOOK_SECRET",
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
