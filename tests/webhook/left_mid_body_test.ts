/**
 * A client that leaves while it sends its body. Deno.serve, Bun.serve and
 * Node 24 fail the body's read; `@hono/node-server` on Node 20 and 22 ends
 * it early instead, as if it were whole (empty, or cut where the client
 * left), and aborts the request's signal. A body so cut is not the message
 * the queue sent: it must be refused as unreadable, not kept as an
 * unreadable message's dead letter, logged as acked, nor refused 401.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { NewIntent } from "../../mod.ts";
import { signQStash } from "./_signing.ts";
import { makeApp, NOW, SECRET, theGoogle } from "./_app.ts";
import { signHmac } from "./_signing.ts";

const settling: NewIntent = {
  id: "pi_0002",
  state: "authorized",
  hold: "pending",
};

/**
 * `sent` bytes of `x`, in 16 KiB chunks, then the end of the body, with
 * `signal` aborted first: what `@hono/node-server` gives on Node 20 and
 * 22 once the client left (ended cleanly, the request's signal aborted).
 */
function leftAfter(
  sent: number,
  left: AbortController,
): ReadableStream<Uint8Array> {
  const bytes = new Uint8Array(sent).fill(0x78);
  let at = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= bytes.length) {
        left.abort(new Error("Client connection prematurely closed."));
        controller.close();
        return;
      }
      controller.enqueue(bytes.subarray(at, at + 16_384));
      at += 16_384;
    },
  }, { highWaterMark: 0 });
}

Deno.test("a body whose client left mid-way and that the server ended early (@hono/node-server on Node 20 and 22) is refused 400 unreadable on every route: no dead letter, no 'acked' or 401 line", async () => {
  const lines: string[] = [];
  const { app, writes } = await makeApp({
    intents: [settling],
    deps: { log: (line: string) => lines.push(line) },
  });
  const google = await theGoogle();
  const bearer = `Bearer ${await google.token()}`;
  const body = "x".repeat(1000);
  const cases: [string, Record<string, string>, number][] = [
    // Under the limit by its Content-Length: read whole, or so it seems.
    ["/v1/pubsub", { authorization: bearer, "content-length": "1000" }, 0],
    ["/v1/pubsub", { authorization: bearer, "content-length": "1000" }, 500],
    // Over it: hashed as it streams.
    ["/v1/pubsub", { authorization: bearer, "content-length": "200000" }, 0],
    [
      "/v1/pubsub",
      { authorization: bearer, "content-length": "200000" },
      150_000,
    ],
    // Chunked: nothing but the signal tells that it was cut.
    [
      "/v1/pubsub",
      { authorization: bearer, "transfer-encoding": "chunked" },
      500,
    ],
    [
      "/v1/pubsub",
      { authorization: bearer, "transfer-encoding": "chunked" },
      150_000,
    ],
    ["/v1/qstash", {
      "upstash-signature": await signQStash(body),
      "content-length": "1000",
    }, 500],
    ["/v1/qstash", {
      "upstash-signature": await signQStash("x".repeat(100_000)),
      "content-length": "100000",
    }, 70_000],
    ["/v1/deliveries", {
      "x-signature": signHmac(SECRET, body, NOW / 1000),
      "content-length": "1000",
    }, 500],
  ];
  for (const [path, headers, sent] of cases) {
    const left = new AbortController();
    const res = await app.request(path, {
      method: "POST",
      body: leftAfter(sent, left),
      headers,
      signal: left.signal,
    });
    const name = `${path} ${Object.keys(headers).join(",")} ${sent} bytes`;
    assert.equal(res.status, 400, `${name}: ${await res.clone().text()}`);
    assert.equal(
      ((await res.json()) as { type: string }).type,
      "urn:relayer:problem:unreadable-body",
      name,
    );
  }
  assert.deepEqual(lines, []);
  assert.equal(writes(), 0);
});

Deno.test("a body that ends short of its Content-Length is refused 400 unreadable even where the request's signal never says the client left", async () => {
  const lines: string[] = [];
  const { app, writes } = await makeApp({
    intents: [settling],
    deps: { log: (line: string) => lines.push(line) },
  });
  const bearer = `Bearer ${await (await theGoogle()).token()}`;
  for (
    const [length, sent] of [
      [1000, 0],
      [1000, 500],
      // One byte short is short.
      [1000, 999],
      [200_000, 0],
      [200_000, 150_000],
      [200_000, 199_999],
    ] as const
  ) {
    const res = await app.request("/v1/pubsub", {
      method: "POST",
      // Never aborted: the signal is a second controller's.
      body: leftAfter(sent, new AbortController()),
      headers: { authorization: bearer, "content-length": `${length}` },
    });
    assert.equal(res.status, 400, `${length} ${sent}: ${await res.text()}`);
  }
  assert.deepEqual(lines, []);
  assert.equal(writes(), 0);
});

Deno.test("a whole body whose request's signal is not aborted is read as before: the check is of a client that left, not of the stream's end", async () => {
  const { app, store } = await makeApp({ intents: [settling] });
  const google = await theGoogle();
  const push = JSON.stringify({
    message: {
      data: btoa(JSON.stringify({ intentId: "pi_0002", kind: "settle" })),
      messageId: "17000000000001",
    },
    subscription: "projects/p/subscriptions/relayer",
    deliveryAttempt: 1,
  });
  const res = await app.request("/v1/pubsub", {
    method: "POST",
    body: push,
    headers: { authorization: `Bearer ${await google.token()}` },
    signal: new AbortController().signal,
  });
  assert.notEqual(res.status, 400, await res.clone().text());
  await res.body?.cancel();
  assert.notEqual((await store.getIntent("pi_0002"))?.state, "authorized");
});
