/**
 * What no signature covers must not decide a payment. QStash's token
 * (`iss`, `sub`, `iat`, `nbf`, `exp`, `jti`, `body`) signs neither
 * `Upstash-Retried` nor `Upstash-Message-Id`, so a captured token must
 * not be usable a second time with those headers changed, even when its
 * first use was answered 503 because the store failed. Google's keys may
 * name one `kid` twice (a rotation that publishes a new key under an old
 * id): a push signed by either is taken.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore, type Store } from "../../mod.ts";
import { pubsubVerifier } from "../../webhook/_auth.ts";
import { AUTHORIZED, genericRequest, makeApp } from "./_app.ts";
import { job as oversizedJob, post } from "./_oversized_qstash.ts";
import { outage } from "../_outage.ts";
import { fakeGoogle, PUBSUB, rsaKeyPair, signQStash } from "./_signing.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

/** `store` whose first call of a method in `failing` is refused, as a lost connection is. */
function failsOnce(store: Store, failing: ReadonlySet<string>): Store {
  let failed = false;
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (!failed && failing.has(String(key))) {
          failed = true;
          return Promise.reject(
            new Error("connect ECONNREFUSED 10.0.0.5:5432"),
          );
        }
        return value.apply(target, args);
      };
    },
  });
}

Deno.test("a QStash delivery answered 503 because the store failed uses up its token: the same token replayed with Upstash-Retried raised and another Upstash-Message-Id is a 401 replay, and QStash's own retry sends the payment", async () => {
  const memory = new MemoryStore();
  await memory.createIntent(AUTHORIZED);
  const { app, sender } = await makeApp({
    scripts: { pi_0001: { sends: [{ txHash: "0xabc" }] } },
    deps: {
      // The delivery's look at the intent: nothing written, claim unused.
      store: failsOnce(memory, new Set(["getIntent"])),
    },
  });
  const body = JSON.stringify(job);
  const token = await signQStash(body);
  const first = await post(app, "/v1/qstash", body, {
    signature: token,
    messageId: "msg_1",
  });
  assert.equal(first.status, 503, await first.text());
  const forged = await post(app, "/v1/qstash", body, {
    signature: token,
    messageId: "msg_fresh",
    retried: 99,
  });
  const answer = await forged.json();
  assert.equal(forged.status, 401, JSON.stringify(answer));
  assert.match(answer.detail, /already delivered/);
  assert.equal(await memory.getDeadLetter("pi_0001/settle"), null);
  // QStash signs each retry afresh.
  const retry = await post(app, "/v1/qstash", body, {
    signature: await signQStash(body),
    messageId: "msg_1",
    retried: 1,
  });
  assert.equal(retry.status, 503, "sent: waiting for the receipt");
  await retry.body?.cancel();
  assert.deepEqual(sender.calls, [
    { method: "send", intentId: "pi_0001", replace: false },
  ]);
  assert.equal((await memory.getIntent("pi_0001"))?.state, "settling");
});

Deno.test("a QStash delivery answered 503 while the store was down, which could record nothing, is a 401 replay when its token comes again to the same app once the store is back, whatever its Upstash-Retried; QStash's own retry sends the payment", async () => {
  const memory = new MemoryStore();
  await memory.createIntent(AUTHORIZED);
  let down = true;
  const store = outage(memory, () => down);
  const { app, sender } = await makeApp({
    scripts: { pi_0001: { sends: [{ txHash: "0xabc" }] } },
    deps: { store, log: () => {} },
  });
  const body = JSON.stringify(job);
  const token = await signQStash(body);
  const deliver = (signature: string, retried: number) =>
    post(app, "/v1/qstash", body, { signature, messageId: "msg_1", retried });
  const first = await deliver(token, 0);
  assert.equal(first.status, 503);
  await first.body?.cancel();
  down = false;
  for (const retried of [99, 0]) {
    const again = await deliver(token, retried);
    const answer = await again.json();
    assert.equal(again.status, 401, JSON.stringify(answer));
    assert.match(answer.detail, /already delivered/);
  }
  assert.equal(await memory.getDeadLetter("pi_0001/settle"), null);
  const retry = await deliver(await signQStash(body), 1);
  assert.equal(retry.status, 503, "sent: waiting for the receipt");
  await retry.body?.cancel();
  assert.equal(sender.calls.length, 1);
  assert.equal((await memory.getIntent("pi_0001"))?.state, "settling");
});

Deno.test("a QStash token seen while the store was down is a 401 replay when it comes again while the store is still down, not a second 503", async () => {
  const memory = new MemoryStore();
  await memory.createIntent(AUTHORIZED);
  const { app, sender } = await makeApp({
    deps: { store: outage(memory, () => true), log: () => {} },
  });
  const body = JSON.stringify(job);
  const signature = await signQStash(body);
  const send = (retried: number) =>
    post(app, "/v1/qstash", body, { retried, messageId: "msg_1", signature });
  const first = await send(0);
  assert.equal(first.status, 503);
  await first.body?.cancel();
  const again = await send(99);
  const answer = await again.json();
  assert.equal(again.status, 401, JSON.stringify(answer));
  assert.match(answer.detail, /already delivered/);
  assert.deepEqual(sender.calls, []);
});

/** `store`, whose `admit` lands only after `ms`, as a slow commit does. */
function slowAdmit(store: Store, ms: number): Store {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (key !== "admit") return value.bind(target);
      return async (...args: unknown[]) => {
        await new Promise((resolve) => setTimeout(resolve, ms));
        return await value.apply(target, args);
      };
    },
  });
}

Deno.test("a QStash token one instance saw while the store was down, and refused when it came again with the store back, is refused only once its record has landed: another instance sharing the store, sent it right after, refuses it as a 401 replay and sends nothing (the record landing at once, or 50 ms late)", async () => {
  for (const lateMs of [0, 50]) {
    const memory = new MemoryStore();
    await memory.createIntent(AUTHORIZED);
    let down = true;
    const store = outage(memory, () => down);
    const a = await makeApp({
      deps: { store: slowAdmit(store, lateMs), log: () => {} },
    });
    const b = await makeApp({
      scripts: { pi_0001: { sends: [{ txHash: "0xabc" }] } },
      deps: { store, log: () => {} },
    });
    const body = JSON.stringify(job);
    const signature = await signQStash(body);
    const send = (app: typeof a.app, messageId: string) =>
      post(app, "/v1/qstash", body, { retried: 0, messageId, signature });
    const first = await send(a.app, "msg_1");
    assert.equal(first.status, 503);
    await first.body?.cancel();
    down = false;
    const again = await send(a.app, "msg_1");
    assert.equal(again.status, 401, await again.text());
    const elsewhere = await send(b.app, "msg_made_up");
    const answer = await elsewhere.json();
    assert.equal(
      elsewhere.status,
      401,
      `${lateMs} ms: ${JSON.stringify(answer)}`,
    );
    assert.match(answer.detail, /already delivered/);
    assert.deepEqual(b.sender.calls, []);
    assert.equal((await memory.getIntent("pi_0001"))?.state, "authorized");
  }
});

Deno.test("an app remembers at most 10,000 QStash tokens it saw while the store was down, the oldest forgotten first: once the store is back, the 10,001st and the second are 401 replays, and the first is taken", async () => {
  const memory = new MemoryStore();
  await memory.createIntent(AUTHORIZED);
  let down = true;
  const { app } = await makeApp({
    deps: { store: outage(memory, () => down), log: () => {} },
  });
  const body = JSON.stringify(job);
  const send = async (jti: string) =>
    await post(app, "/v1/qstash", body, {
      messageId: "msg_1",
      signature: await signQStash(body, { jti }),
    });
  for (let i = 0; i <= 10_000; i++) {
    const res = await send(`jwt_${i}`);
    assert.equal(res.status, 503);
    await res.body?.cancel();
  }
  down = false;
  for (const i of [10_000, 1]) {
    const again = await send(`jwt_${i}`);
    assert.equal(again.status, 401, `jwt_${i}: ${await again.text()}`);
  }
  const first = await send("jwt_0");
  assert.notEqual(first.status, 401, await first.text());
});

Deno.test("a generic delivery answered 503 because the store failed keeps its signature: sent again as it was once the store is back, it is delivered (the route signs its delivery number and message id, so nothing of it can be changed)", async () => {
  const memory = new MemoryStore();
  await memory.createIntent(AUTHORIZED);
  const { app, sender } = await makeApp({
    scripts: { pi_0001: { sends: [{ txHash: "0xabc" }] } },
    deps: {
      store: failsOnce(memory, new Set(["getIntent"])),
      log: () => {},
    },
  });
  const request = await genericRequest(JSON.stringify({ job, delivery: 1 }));
  const first = await app.request("/v1/deliveries", request);
  assert.equal(first.status, 503, await first.text());
  const again = await app.request("/v1/deliveries", request);
  assert.notEqual(again.status, 401, await again.text());
  assert.deepEqual(sender.calls, [
    { method: "send", intentId: "pi_0001", replace: false },
  ]);
});

Deno.test("an unreadable QStash message whose dead letter the store failed (503) uses up its token: sent again under another Upstash-Message-Id it is a 401 replay, and no letter is kept under the made-up id", async () => {
  const memory = new MemoryStore();
  const { app } = await makeApp({
    deps: {
      store: failsOnce(memory, new Set(["putDeadLetter"])),
      log: () => {},
    },
  });
  const body = "not a job";
  const token = await signQStash(body);
  const deliver = (messageId: string) =>
    post(app, "/v1/qstash", body, { signature: token, messageId });
  const first = await deliver("msg_1");
  assert.equal(first.status, 503, await first.text());
  const again = await deliver("msg_made_up");
  const answer = await again.json();
  assert.equal(again.status, 401, JSON.stringify(answer));
  assert.match(answer.detail, /already delivered/);
  assert.deepEqual((await memory.listDeadLetters()).items, []);
});

Deno.test("a QStash message over the limit answered 503 while the store was down is a 401 replay when its token comes again under another Upstash-Message-Id once the store is back, and no letter is kept under the made-up id", async () => {
  const memory = new MemoryStore();
  let down = true;
  const store = outage(memory, () => down);
  const { app } = await makeApp({ deps: { store, log: () => {} } });
  const body = oversizedJob(80_048);
  const signature = await signQStash(body);
  const first = await post(app, "/v1/qstash", body, {
    signature,
    messageId: "msg_1",
  });
  assert.equal(first.status, 503, await first.text());
  down = false;
  const again = await post(app, "/v1/qstash", body, {
    signature,
    messageId: "msg_made_up",
    retried: 2,
  });
  const answer = await again.json();
  assert.equal(again.status, 401, JSON.stringify(answer));
  assert.match(answer.detail, /already delivered/);
  assert.deepEqual((await memory.listDeadLetters()).items, []);
});

Deno.test("pubsubVerifier() takes a token signed by either of two Google keys that share a kid, and refuses one signed by neither", async () => {
  const google = await fakeGoogle();
  const other = {
    ...(await crypto.subtle.exportKey("jwk", (await rsaKeyPair()).publicKey)),
    kid: "test-key-1", // fakeGoogle's
    alg: "RS256",
    use: "sig",
  } as JsonWebKey;
  const token = await google.token();
  for (
    const [name, jwks] of [
      ["the signing key first", [...google.jwks, other]],
      ["the signing key second", [other, ...google.jwks]],
    ] as const
  ) {
    const verify = pubsubVerifier({
      audience: PUBSUB.audience,
      jwks,
      serviceAccount: PUBSUB.serviceAccount,
    });
    assert.equal((await verify(`Bearer ${token}`)).ok, true, name);
    const forger = await fakeGoogle();
    assert.equal(
      (await verify(`Bearer ${await forger.token()}`)).ok,
      false,
      name,
    );
  }
});
