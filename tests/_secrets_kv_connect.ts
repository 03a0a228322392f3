/**
 * `withoutToken()` on a real `Deno.openKv(url)` handle (tests/secrets_test.ts).
 * Run by tests/secrets_test.ts in a process of its own, with
 * `DENO_KV_ACCESS_TOKEN` set there only: `Deno.openKv(url)` reads it from
 * the environment alone, which the files of a parallel run share.
 *
 * @module
 */
import assert from "node:assert/strict";
import { withoutToken } from "../main.ts";
import { KvStore } from "../store/kv.ts";
import { dataEchoingKv } from "./_echoing_kv.ts";
import { timeout } from "./_timeout.ts";

if (!Deno.env.get("DENO_KV_ACCESS_TOKEN")) {
  throw new Error(
    "tests/_secrets_kv_connect.ts runs with DENO_KV_ACCESS_TOKEN set: run tests/secrets_test.ts",
  );
}

Deno.test(
  "withoutToken() keeps the data-path token of KV Connect's metadata out of an error that quotes the data endpoint's refusal",
  timeout(30_000, async () => {
    // Deno's error quotes the data endpoint's answer ("KV Connect failed to
    // call '…/data/snapshot_read' (status=401 Unauthorized): …"), which may
    // echo the Authorization header: the token the metadata exchange gave,
    // a credential to the database until the metadata expires.
    const server = dataEchoingKv();
    // Deno.openKv(url) takes it from the environment only.
    const token = Deno.env.get("DENO_KV_ACCESS_TOKEN")!;
    let kv: Deno.Kv | undefined;
    try {
      kv = await Deno.openKv(`http://127.0.0.1:${server.addr.port}/kv`);
      const store = new KvStore(withoutToken(kv, token));
      await assert.rejects(store.getIntent("pi_1"), (error: Error) => {
        assert.match(error.message, /status=401/);
        assert.ok(!error.message.includes("data-path-token"), error.message);
        assert.ok(!String(error.stack).includes("data-path-token"));
        assert.match(error.message, /you sent Bearer <KV Connect token>/);
        return true;
      });
    } finally {
      kv?.close();
      await server.shutdown();
    }
  }),
);
