import assert from "node:assert/strict";
import { googleJwks } from "../../webhook/google_jwks.ts";
import { makeApp } from "./_app.ts";
import { envelope } from "./_signing.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

/** A fetch that always fails, as one does while Google cannot be reached; it counts its calls. */
function unreachable() {
  const counted = {
    calls: 0,
    fetch: (() => {
      counted.calls++;
      return Promise.reject(
        new TypeError("error sending request: connection refused"),
      );
    }) as typeof fetch,
  };
  return counted;
}

Deno.test("googleJwks() with no keys yet, after a failed fetch, throws that failure again for 5 s without fetching, then tries again", async () => {
  let clock = 0;
  const google = unreachable();
  const keys = googleJwks({ fetch: google.fetch, now: () => clock });
  for (let i = 0; i < 10; i++) {
    await assert.rejects(keys(), /connection refused/);
  }
  await assert.rejects(keys({ refresh: true }), /connection refused/);
  assert.equal(google.calls, 1);
  clock = 4_999;
  await assert.rejects(keys(), /connection refused/);
  assert.equal(google.calls, 1);
  clock = 5_000;
  await assert.rejects(keys(), /connection refused/);
  assert.equal(google.calls, 2);
});

Deno.test("createApp() with googleJwks(): a flood of forged pushes while Google cannot be reached costs one fetch of its keys every 5 s, not one per push", async () => {
  const google = unreachable();
  let clock = 1_000_000;
  const { app, writes } = await makeApp({
    intents: [{ id: "pi_0001", state: "created" }],
    deps: {
      now: () => clock,
      pubsub: {
        audience: "https://relayer.example.test/v1/pubsub",
        jwks: googleJwks({ fetch: google.fetch, now: () => clock }),
        serviceAccount: "pusher@project.iam.gserviceaccount.com",
      },
    },
  });
  // Anyone can make up a token that names a key: only its signature is Google's to give.
  const part = (value: unknown) =>
    btoa(JSON.stringify(value)).replaceAll("=", "").replaceAll("+", "-")
      .replaceAll("/", "_");
  const forged = `${part({ alg: "RS256", kid: "made-up", typ: "JWT" })}.${
    part({ aud: "https://relayer.example.test/v1/pubsub" })
  }.c2ln`;
  const statuses = new Set<number>();
  for (let i = 0; i < 50; i++) {
    const res = await app.request("/v1/pubsub", {
      method: "POST",
      body: envelope(job, { deliveryAttempt: 1 }),
      headers: { authorization: `Bearer ${forged}` },
    });
    statuses.add(res.status);
    await res.body?.cancel();
    clock += 100;
  }
  assert.deepEqual([...statuses], [503]);
  assert.equal(google.calls, 1);
  assert.equal(writes(), 0);
});
