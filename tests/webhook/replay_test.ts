/**
 * Replays are refused: a signed request is good for one delivery. The
 * replay record rides in the delivery's first write, so a refused replay
 * does nothing at all.
 *
 * @module
 */

import assert from "node:assert/strict";
import { genericRequest, makeApp, NOW, SENT_WAITING } from "./_app.ts";
import { QSTASH, signQStash } from "./_signing.ts";
import { KvStore } from "../../store/kv.ts";
import { resendingKv } from "../store/_resending_kv.ts";
import { BACKENDS } from "../_stores.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;
const settling = SENT_WAITING;

Deno.test("POST /v1/qstash refuses a replayed request (401), even one claiming 99 retries, and the payment mid-settlement stays as it was", async () => {
  const { app, store } = await makeApp({ intents: [settling] });
  const body = JSON.stringify(job);
  const signature = await signQStash(body);
  const first = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers: { "upstash-signature": signature, "upstash-retried": "0" },
  });
  assert.equal(first.status, 503, "waiting for the receipt: a retry");
  await first.body?.cancel();
  const before = await store.getIntent("pi_0001");
  const replay = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers: { "upstash-signature": signature, "upstash-retried": "99" },
  });
  assert.equal(replay.status, 401);
  assert.match((await replay.json()).detail, /already delivered/);
  assert.deepEqual(await store.getIntent("pi_0001"), before);
  assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
});

Deno.test("POST /v1/qstash refuses a replayed look-only delivery before it reaches the signer", async () => {
  const { app, sender } = await makeApp({
    intents: [settling],
    scripts: { pi_0001: { sends: [], receipts: ["pending"] } },
  });
  const body = JSON.stringify(job);
  const headers = {
    "upstash-signature": await signQStash(body),
    "upstash-retried": "1",
  };
  const first = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers,
  });
  assert.equal(first.status, 503, "waiting for the receipt: a retry");
  await first.body?.cancel();
  const replay = await app.request("/v1/qstash", {
    method: "POST",
    body,
    headers,
  });
  assert.equal(replay.status, 401);
  await replay.body?.cancel();
  assert.deepEqual(sender.calls, [{ method: "receipt", txHash: "0xabc" }]);
});

Deno.test("POST /v1/qstash keeps a token's replay record for as long as the token verifies: past its exp within the clock tolerance, and with the app's clock ahead of the wall clock", async () => {
  const created = { id: "pi_0001", state: "created" } as const;
  const body = JSON.stringify(job);
  const wallS = Math.floor(Date.now() / 1000);
  const cases: [string, () => number, string][] = [
    // QStash's clock ahead of ours: its token expired 10 s ago by our clock.
    [
      "a token 10 s past its exp",
      Date.now,
      await signQStash(body, { nowS: wallS - 310, ttlS: 300 }),
    ],
    // The Receiver reads the wall clock; the store expires records by the app's.
    [
      "the app's clock 10 minutes ahead",
      () => Date.now() + 600_000,
      await signQStash(body, { nowS: wallS, ttlS: 300 }),
    ],
  ];
  for (const [name, now, signature] of cases) {
    const { app } = await makeApp({ intents: [created], deps: { now } });
    const headers = { "upstash-signature": signature, "upstash-retried": "0" };
    const first = await app.request("/v1/qstash", {
      method: "POST",
      body,
      headers,
    });
    assert.equal(first.status, 503, `${name}: not authorized yet, a retry`);
    await first.body?.cancel();
    const replay = await app.request("/v1/qstash", {
      method: "POST",
      body,
      headers,
    });
    assert.equal(replay.status, 401, `${name}: the replay`);
    await replay.body?.cancel();
  }
});

Deno.test("POST /v1/deliveries takes a captured signed request once: 9 replays in a second get 401 and spend no delivery", async () => {
  const { app, store } = await makeApp({ intents: [settling] });
  const init = await genericRequest(JSON.stringify({ job }));
  const statuses: number[] = [];
  for (let i = 0; i < 10; i++) {
    const res = await app.request("/v1/deliveries", { ...init });
    statuses.push(res.status);
    await res.body?.cancel();
  }
  assert.deepEqual(statuses, [503, ...Array(9).fill(401)]);
  assert.equal(await store.deliveries("pi_0001/settle"), 1);
  assert.equal((await store.getIntent("pi_0001"))?.state, "settling");
});

Deno.test("POST /v1/deliveries: a fresh signature of the same body is a new delivery", async () => {
  const { app, store } = await makeApp({ intents: [settling] });
  const body = JSON.stringify({ job });
  for (const timeS of [NOW / 1000 - 2, NOW / 1000 - 1]) {
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(body, { timeS }),
    );
    assert.equal(res.status, 503);
    await res.body?.cancel();
  }
  assert.equal(await store.deliveries("pi_0001/settle"), 2);
});

Deno.test("POST /v1/deliveries on a KV whose client sent each commit again (the answer lost) takes a genuine delivery as one, counted once, and still refuses its replay", async () => {
  using kv = await Deno.openKv(":memory:");
  // Every commit lands, and is answered { ok: false }: a KV Connect
  // client's second send of it failed the checks the first passed.
  const lossy = resendingKv(kv);
  const store = new KvStore(lossy);
  await new KvStore(kv).createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const { app, sender } = await makeApp({
    deps: { store },
    scripts: { pi_0001: { sends: [{ txHash: "0xabc" }] } },
  });
  const init = await genericRequest(JSON.stringify({ job }));
  const first = await app.request("/v1/deliveries", { ...init });
  const answer = await first.json();
  assert.notEqual(first.status, 401, JSON.stringify(answer));
  assert.ok(lossy.lost >= 3, `${lossy.lost} commits answered as lost`);
  const sent = await store.getIntent("pi_0001");
  assert.equal(sent?.state, "settling");
  assert.equal(sent?.lastBroadcast?.txHash, "0xabc");
  assert.equal(await store.deliveries("pi_0001/settle"), 1);
  const replay = await app.request("/v1/deliveries", { ...init });
  assert.equal(replay.status, 401);
  assert.match((await replay.json()).detail, /already delivered/);
  assert.equal(sender.calls.filter((c) => c.method === "send").length, 1);
  assert.equal(await store.deliveries("pi_0001/settle"), 1);
});

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: copies of one signed give-up racing on an authorized intent: one drops the job, the others get 401 and write nothing, its mark among them (generic route and QStash's failure callback)`, async () => {
    const routes = [
      {
        path: "/v1/deliveries",
        mark: "givingup/generic/pi_0001/settle/message/m1",
        init: () =>
          genericRequest(
            JSON.stringify({ job, gaveUp: { deliveries: 3, messageId: "m1" } }),
          ),
      },
      {
        path: "/v1/qstash/failed",
        mark: "givingup/qstash/message/msg_1",
        init: async (): Promise<RequestInit> => {
          const body = JSON.stringify({
            retried: 2,
            sourceMessageId: "msg_1",
            sourceBody: btoa(JSON.stringify(job)),
          });
          return {
            method: "POST",
            body,
            headers: {
              "upstash-signature": await signQStash(body, {
                url: `${QSTASH.url}/failed`,
              }),
            },
          };
        },
      },
    ];
    for (const { path, mark, init } of routes) {
      const { store, close } = await backend.open();
      try {
        await store.createIntent({
          id: "pi_0001",
          state: "authorized",
          hold: "pending",
        });
        const { app } = await makeApp({ deps: { store } });
        const request = await init();
        const statuses = await Promise.all(
          Array.from({ length: 6 }, async () => {
            const res = await app.request(path, { ...request });
            await res.body?.cancel();
            return res.status;
          }),
        );
        assert.deepEqual(
          statuses.toSorted(),
          [200, 401, 401, 401, 401, 401],
          path,
        );
        // Each copy that wrote its mark counted it once more: only the
        // copy acted on may have.
        assert.equal(await store.deliveries(mark, NOW), 1, path);
        const letter = await store.getDeadLetter("pi_0001/settle");
        assert.equal(letter?.cause, "exhausted", path);
      } finally {
        await close();
      }
    }
  });
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: six copies of one signed delivery racing over two instances act once: the send, the receipt look and the last delivery's poison each happen once, the other five copies get 401`, async () => {
    const cases = [
      {
        name: "a first delivery (QStash)",
        intent: { id: "pi_0001", state: "authorized", hold: "pending" },
        route: "qstash",
        delivery: 1,
        signer: ["send"],
        answer: 503,
        state: "settling",
      },
      {
        name: "a look at a pending receipt (generic)",
        intent: settling,
        route: "generic",
        delivery: 1,
        signer: ["receipt"],
        answer: 503,
        state: "settling",
      },
      {
        name: "the last delivery, poisoned (generic)",
        intent: settling,
        route: "generic",
        delivery: 3,
        signer: ["receipt"],
        answer: 200,
        state: "needs_review",
      },
    ] as const;
    for (const c of cases) {
      const { store, close } = await backend.open();
      try {
        await store.createIntent(c.intent);
        const scripts = { pi_0001: { sends: [{ txHash: "0xdef" }] } };
        const instances = [
          await makeApp({ deps: { store }, scripts }),
          await makeApp({ deps: { store }, scripts }),
        ];
        let path = "/v1/deliveries";
        let init = await genericRequest(
          JSON.stringify({ job, delivery: c.delivery }),
        );
        if (c.route === "qstash") {
          const body = JSON.stringify(job);
          path = "/v1/qstash";
          init = {
            method: "POST",
            body,
            headers: {
              "upstash-signature": await signQStash(body),
              "upstash-retried": String(c.delivery - 1),
            },
          };
        }
        const statuses = await Promise.all(
          Array.from({ length: 6 }, async (_, i) => {
            const res = await instances[i % 2]!.app.request(path, { ...init });
            await res.body?.cancel();
            return res.status;
          }),
        );
        assert.deepEqual(
          statuses.toSorted(),
          [c.answer, 401, 401, 401, 401, 401].toSorted(),
          c.name,
        );
        assert.deepEqual(
          instances.flatMap(({ sender }) =>
            sender.calls.map((call) => call.method)
          ),
          c.signer,
          c.name,
        );
        assert.equal(
          (await store.getIntent("pi_0001"))?.state,
          c.state,
          c.name,
        );
      } finally {
        await close();
      }
    }
  });
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name}: two copies of one signed delivery sent at the same instant to one app, counted by the store: one is taken, the other is refused as a replay, and nothing is written twice (the count, the send, the tx)`, async () => {
    const { store, close } = await backend.open();
    try {
      const { app, sender } = await makeApp({
        deps: { store },
        scripts: {
          pi_0001: { sends: [{ txHash: "0xa1" }] },
          pi_0002: { sends: [{ txHash: "0xa2" }] },
          pi_0003: { sends: [{ txHash: "0xa3" }] },
        },
      });
      for (const id of ["pi_0001", "pi_0002", "pi_0003"]) {
        await store.createIntent({ id, state: "authorized", hold: "pending" });
        const one = { intentId: id, kind: "settle" } as const;
        // No delivery number: the store counts it, in the claim's commit.
        const init = await genericRequest(JSON.stringify({ job: one }));
        const answers = await Promise.all(
          [0, 1].map(async () => {
            const res = await app.request("/v1/deliveries", { ...init });
            const body = await res.json();
            return `${res.status} ${body.reason ?? body.detail}`;
          }),
        );
        assert.deepEqual(answers.toSorted(), [
          "401 This signed request was already delivered: a replay is refused. Each delivery must carry a fresh signature.",
          `503 sent 0xa${id.at(-1)}, waiting for confirmation`,
        ], id);
        assert.equal(await store.deliveries(`${id}/settle`, NOW), 1, id);
        const intent = await store.getIntent(id);
        assert.equal(intent?.state, "settling", id);
        assert.deepEqual(intent?.txHashes, [`0xa${id.at(-1)}`], id);
      }
      assert.deepEqual(
        sender.calls.map((call) =>
          call.method === "send" ? call.intentId : call.method
        ),
        ["pi_0001", "pi_0002", "pi_0003"],
      );
    } finally {
      await close();
    }
  });
}
