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
      let listening = false;
      const refused = startMain(env, {
        writeDir: dir,
        flags: ["--host", "0.0.0.0"],
        drop: ["--host", "127.0.0.1"],
        onLine(line) {
          // Serving there: end it now, rather than wait for the timeout.
          if (!line.startsWith("relayer: listening on ")) return;
          listening = true;
          refused.kill();
        },
      });
      const { code, stdout, stderr } = await refused.ended();
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
      const refused = startMain({
        SENDER_URL: "http://127.0.0.1:9/",
        RELAYER_INSECURE_DEV: "1",
        KV_PATH: `${dir}/relayer.kv`,
      }, {
        writeDir: dir,
        flags: ["--host", "0.0.0.0"],
        drop: ["--host", "127.0.0.1"],
        // One pipe for both, as a platform's log takes them.
        via: ["sh", "-c", 'exec "$0" "$@" 2>&1'],
      });
      const { code, stdout } = await refused.ended();
      assert.equal(code, 1, stdout);
      const started = stdout.indexOf("relayer: at most ");
      const refusal = stdout.indexOf(
        "relayer: cannot start: RELAYER_INSECURE_DEV",
      );
      assert.ok(started >= 0 && refusal >= 0, stdout);
      assert.ok(started < refusal, stdout);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
