/**
 * Refusals that must hold whatever else is set: insecure dev mode never
 * waives a key that is configured, and a redrive path that is not a job id
 * is a 400 problem before the store is asked (never a 500).
 */
import assert from "node:assert/strict";
import { ScriptedSender } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { createApp } from "../../webhook/app.ts";
import { AUTHORIZED, makeApp, NOW, OPS, SECRET } from "./_app.ts";
import { envelope, signHmac, signQStash } from "./_signing.ts";
import { withTimeout } from "../_timeout.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

Deno.test("createApp() in insecure dev mode still requires every key that is configured", async () => {
  const { app, writes, store } = await makeApp({
    intents: [AUTHORIZED],
    deps: { insecureDev: true },
  });
  const body = JSON.stringify({ job, delivery: 1 });
  const requests: [string, RequestInit][] = [
    ["/v1/deliveries", { method: "POST", body }],
    ["/v1/deliveries", {
      method: "POST",
      body,
      headers: { "x-signature": signHmac("not-the-secret", body, NOW / 1000) },
    }],
    ["/v1/qstash", { method: "POST", body: JSON.stringify(job) }],
    ["/v1/qstash", {
      method: "POST",
      body: JSON.stringify(job),
      headers: {
        "upstash-signature": await signQStash(JSON.stringify(job), {
          key: "sig_not_the_key_000",
        }),
      },
    }],
    ["/v1/pubsub", { method: "POST", body: envelope(job) }],
    ["/v1/pubsub", {
      method: "POST",
      body: envelope(job),
      headers: { authorization: "Bearer a.b.c" },
    }],
    ["/v1/intents", {
      method: "POST",
      body: JSON.stringify({ id: "pi_0002" }),
    }],
    ["/v1/intents/pi_0001", { method: "GET" }],
    ["/v1/dead-letters", { method: "GET" }],
    ["/v1/dead-letters/pi_0001%2Fsettle/redrive", { method: "POST" }],
    ["/v1/jobs", { method: "POST", body: JSON.stringify(job) }],
  ];
  for (const [path, init] of requests) {
    const res = await app.request(path, init);
    assert.equal(res.status, 401, `${init.method} ${path}`);
    await res.body?.cancel();
  }
  assert.equal(writes(), 0);
  assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
  // The same app takes a signed delivery: the keys, not the mode, decide.
  const signed = await app.request("/v1/deliveries", {
    method: "POST",
    body,
    headers: { "x-signature": signHmac(SECRET, body, NOW / 1000) },
  });
  assert.equal(signed.status, 503);
  await signed.body?.cancel();
  assert.equal((await store.getIntent("pi_0001"))?.state, "settling");
});

Deno.test("createApp() answers a redrive path that is not <intentId>/settle with a 400 problem, on Deno KV too", async () => {
  await withTimeout(async () => {
    const kv = await Deno.openKv(":memory:");
    try {
      const app = createApp({
        store: new KvStore(kv),
        sender: new ScriptedSender({}),
        opsToken: OPS,
        redriveTo: { publish: () => Promise.resolve() },
      });
      const ops = { authorization: `Bearer ${OPS}` };
      const bad = [
        `p${"i".repeat(3000)}/settle`, // over Deno KV's key limit: was a 500
        `pi_0001/settle${"x".repeat(3000)}`,
        "pi_0001",
        "pi_0001/refund",
        "pi_0001/settle/again",
        "/settle",
        "pi 0001/settle",
        "pubsub/2070443601311540/unreadable",
      ];
      for (const jobId of bad) {
        const res = await app.request(
          `/v1/dead-letters/${encodeURIComponent(jobId)}/redrive`,
          { method: "POST", headers: ops },
        );
        assert.equal(res.status, 400, jobId.slice(0, 40));
        assert.equal(
          res.headers.get("content-type"),
          "application/problem+json",
        );
        const problem = await res.json();
        assert.equal(problem.title, "Bad job id");
        assert.ok(problem.detail.length < 300);
      }
      // Both spellings of a good job id reach the store: no dead letter there.
      for (
        const path of [
          "/v1/dead-letters/pi_0001%2Fsettle/redrive",
          "/v1/dead-letters/pi_0001/settle/redrive",
        ]
      ) {
        const res = await app.request(path, { method: "POST", headers: ops });
        assert.equal(res.status, 404, path);
        assert.match((await res.json()).detail, /pi_0001\/settle/);
      }
      const wrongMethod = await app.request(
        "/v1/dead-letters/pi_0001/settle/redrive",
      );
      assert.equal(wrongMethod.status, 405);
      await wrongMethod.body?.cancel();
    } finally {
      kv.close();
    }
  });
});
