/**
 * `main.ts` with `RELAYER_INSECURE_DEV=1`, no keys and no `PUBLIC_URL`:
 * served on loopback, as the docs run it, with every route open to
 * unsigned requests, the ops routes too; refused at start when it listens
 * where others reach it (`--host 0.0.0.0`), as the docs' local-run secrets
 * are.
 *
 * @module
 */

import assert from "node:assert/strict";
import { startMain } from "./_main_process.ts";
import { assertStartLineFirst, startOffLoopback } from "./_off_loopback.ts";
import { timeout } from "./_timeout.ts";

Deno.test(
  "main.ts with RELAYER_INSECURE_DEV and no keys serves on loopback, ops routes open, and refuses to start listening on 0.0.0.0, naming the routes it would open",
  timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_insecure_" });
    try {
      const env = {
        SENDER_URL: "http://127.0.0.1:9/",
        RELAYER_INSECURE_DEV: "1",
        KV_PATH: `${dir}/relayer.kv`,
      };
      const { code, stdout, stderr, listening } = await startOffLoopback(
        env,
        dir,
      );
      assert.equal(listening, false, "it served on 0.0.0.0");
      assert.equal(code, 1, stdout + stderr);
      assert.match(
        stderr,
        /^relayer: cannot start: RELAYER_INSECURE_DEV is for local runs, and this service listens on http:\/\/0\.0\.0\.0:\d+\/, off this machine: it would take requests with no signature or token, from anyone who reaches it, on \/v1\/qstash and \/v1\/qstash\/failed, \/v1\/pubsub, \/v1\/pubsub\/dead-letter, \/v1\/deliveries, the ops routes \(which create and resolve intents, and publish, redrive and discard jobs\)\. Unset RELAYER_INSECURE_DEV \(each route whose keys are not set then answers 503: set the keys of those you use, and OPS_TOKEN for the ops routes\), or run on your own machine: PUBLIC_URL unset or on localhost, 127\.0\.0\.1 or \[::1\], and served on loopback \(deno task start\)$/m,
      );

      // On loopback it serves, and the ops routes take a call with no token.
      const served = startMain(env, { writeDir: dir });
      try {
        const base = (await served.base()) ?? "";
        assert.match(base, /^http:\/\/127\.0\.0\.1:/);
        const res = await fetch(`${base}/v1/intents`, {
          method: "POST",
          body: JSON.stringify({ id: "pi_0001", state: "authorized" }),
        });
        await res.body?.cancel();
        assert.equal(res.status, 201);
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
  "main.ts refused on 0.0.0.0 for RELAYER_INSECURE_DEV writes its start line before the refusal, where both streams go to one log",
  timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_insecure_" });
    try {
      await assertStartLineFirst(
        {
          SENDER_URL: "http://127.0.0.1:9/",
          RELAYER_INSECURE_DEV: "1",
          KV_PATH: `${dir}/relayer.kv`,
        },
        dir,
        "RELAYER_INSECURE_DEV",
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
