/**
 * How the routes answer the forms of a request an operator or a queue's
 * setup gets slightly wrong: HEAD on a GET route, a slash at the end of a
 * path or a doubled one.
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeApp, OPS } from "./_app.ts";

const ops = { authorization: `Bearer ${OPS}` };

Deno.test("createApp() answers HEAD on its GET routes as GET without a body, and names HEAD in the Allow of their 405s", async () => {
  const { app } = await makeApp({
    intents: [{ id: "pi_0001", state: "created" }],
  });
  for (
    const [path, headers] of [["/healthz", {}], ["/readyz", {}], [
      "/v1/dead-letters",
      ops,
    ], [
      "/v1/intents/pi_0001",
      ops,
    ]] as const
  ) {
    const head = await app.request(path, { method: "HEAD", headers });
    assert.equal(head.status, 200, path);
    assert.equal(await head.text(), "", path);
    const wrong = await app.request(path, { method: "PUT", headers });
    assert.equal(wrong.status, 405, path);
    assert.equal(wrong.headers.get("allow"), "GET, HEAD", path);
    assert.equal((await wrong.json()).detail.includes("GET, HEAD"), true);
  }
  // An ops route's HEAD needs its token, as its GET does.
  const unauthenticated = await app.request("/v1/dead-letters", {
    method: "HEAD",
  });
  assert.equal(unauthenticated.status, 401);
  await unauthenticated.body?.cancel();
});

Deno.test("createApp() answers a route's path with a slash at its end or a doubled slash 404, naming the route to send it to", async () => {
  const { app, writes } = await makeApp();
  const cases = [
    ["POST", "/v1/deliveries/", "/v1/deliveries"],
    ["POST", "//v1/qstash", "/v1/qstash"],
    ["POST", "/v1//pubsub/dead-letter", "/v1/pubsub/dead-letter"],
    ["GET", "/healthz/", "/healthz"],
    ["GET", "/v1/dead-letters/", "/v1/dead-letters"],
    [
      "POST",
      "/v1/dead-letters/pi_0001/settle/redrive/",
      "/v1/dead-letters/pi_0001/settle/redrive",
    ],
    [
      "DELETE",
      "/v1/dead-letters/pi_0001/settle/",
      "/v1/dead-letters/pi_0001/settle",
    ],
  ] as const;
  for (const [method, path, route] of cases) {
    const res = await app.request(path, {
      method,
      headers: ops,
      ...(method === "POST" ? { body: "{}" } : {}),
    });
    const problem = await res.json();
    assert.equal(res.status, 404, path);
    assert.equal(
      problem.detail,
      `Nothing answers ${method} ${path}. Send it to ${route}: the routes take no slash at the end and no doubled slash.`,
    );
  }
  // A path no route has, however its slashes are mended, is told no more:
  // nor one that holds a route's path after a prefix, or before a suffix,
  // or a parameter with a slash in it.
  for (
    const path of [
      "/v1/nothing/",
      "/v1/deliveries/extra/",
      "/base/v1/deliveries/",
      "/v1/intents/pi_0001/extra/",
    ]
  ) {
    const none = await app.request(path, { method: "POST" });
    assert.equal(none.status, 404, path);
    assert.equal(
      (await none.json()).detail,
      `Nothing answers POST ${path}.`,
    );
  }
  assert.equal(writes.length, 0);
});

Deno.test("on a real Deno.serve, a route's method sent in lower case (curl -X post) is a 405 that says methods are case-sensitive", async () => {
  const { app, writes } = await makeApp({ deps: { log: () => {} } });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    app.fetch,
  );
  try {
    const answer = async (head: string) => {
      const conn = await Deno.connect({
        hostname: "127.0.0.1",
        port: server.addr.port,
      });
      let read = "";
      try {
        await conn.write(new TextEncoder().encode(
          `${head}\r\nHost: relayer\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}`,
        ));
        const buffer = new Uint8Array(8192);
        for (;;) {
          const n = await conn.read(buffer);
          if (n === null) break;
          read += new TextDecoder().decode(buffer.subarray(0, n));
        }
      } finally {
        conn.close();
      }
      const [status, body] = [
        /^HTTP\/1\.1 (\d{3})/.exec(read)?.[1],
        read.slice(read.indexOf("\r\n\r\n") + 4),
      ];
      return { status, detail: JSON.parse(body).detail as string };
    };
    assert.deepEqual(await answer("post /v1/deliveries HTTP/1.1"), {
      status: "405",
      detail:
        "/v1/deliveries answers POST only. Methods are case-sensitive: send POST.",
    });
    assert.deepEqual(await answer("get /healthz HTTP/1.1"), {
      status: "405",
      detail:
        "/healthz answers GET, HEAD only. Methods are case-sensitive: send GET.",
    });
    // A method no route takes in any case is told no more.
    assert.deepEqual(await answer("patch /v1/deliveries HTTP/1.1"), {
      status: "405",
      detail: "/v1/deliveries answers POST only.",
    });
  } finally {
    await server.shutdown();
  }
  assert.equal(writes.length, 0);
});

Deno.test("createApp() answers a wrong method on an ops path 405, naming the route to send instead: a dead letter's GET names the list", async () => {
  const { app, writes } = await makeApp({
    intents: [{ id: "pi_0001", state: "created" }],
  });
  const cases = [
    [
      "GET",
      "/v1/dead-letters/pi_0001/settle",
      "/v1/dead-letters/:intentId/:kind answers DELETE only (DELETE /v1/dead-letters/pi_0001/settle removes the letter). To read the dead letters: GET /v1/dead-letters. To redrive this one: POST /v1/dead-letters/pi_0001/settle/redrive.",
    ],
    [
      "GET",
      "/v1/dead-letters/pi_0001%2Fsettle",
      "/v1/dead-letters/:jobId answers DELETE only (DELETE /v1/dead-letters/pi_0001%2Fsettle removes the letter). To read the dead letters: GET /v1/dead-letters. To redrive this one: POST /v1/dead-letters/pi_0001%2Fsettle/redrive.",
    ],
    [
      "GET",
      "/v1/dead-letters/pubsub/m-1/unreadable",
      "/v1/dead-letters/:queue/:name/unreadable answers DELETE only (DELETE /v1/dead-letters/pubsub/m-1/unreadable removes the letter). To read the dead letters: GET /v1/dead-letters. To redrive this one: POST /v1/dead-letters/pubsub/m-1/unreadable/redrive.",
    ],
    [
      "GET",
      "/v1/dead-letters/pi_0001/settle/redrive",
      "/v1/dead-letters/:intentId/:kind/redrive answers POST only (POST /v1/dead-letters/pi_0001/settle/redrive redrives the letter). To read the dead letters: GET /v1/dead-letters. To remove this one: DELETE /v1/dead-letters/pi_0001/settle.",
    ],
    [
      "POST",
      "/v1/dead-letters",
      "/v1/dead-letters answers GET, HEAD only (GET /v1/dead-letters lists the dead letters). To redrive one: POST /v1/dead-letters/<jobId>/redrive. To remove one: DELETE /v1/dead-letters/<jobId>.",
    ],
    [
      "GET",
      "/v1/intents",
      "/v1/intents answers POST only (POST /v1/intents creates an intent). To read one: GET /v1/intents/<id>.",
    ],
    [
      "DELETE",
      "/v1/intents/pi_0001",
      "/v1/intents/:id answers GET, HEAD only (GET /v1/intents/pi_0001 reads the intent). To resolve it: POST /v1/intents/pi_0001/resolve.",
    ],
    [
      "GET",
      "/v1/intents/pi_0001/resolve",
      "/v1/intents/:id/resolve answers POST only (POST /v1/intents/pi_0001/resolve resolves the intent). To read it: GET /v1/intents/pi_0001.",
    ],
    [
      "GET",
      "/v1/jobs",
      "/v1/jobs answers POST only (POST /v1/jobs queues a job). To read an intent and its deliveries: GET /v1/intents/<id>.",
    ],
  ] as const;
  for (const [method, path, detail] of cases) {
    const res = await app.request(path, { method, headers: ops });
    assert.equal(res.status, 405, `${method} ${path}`);
    assert.equal((await res.json()).detail, detail);
  }
  assert.equal(writes.length, 0);
});

Deno.test("on a real Deno.serve, HEAD answers the Content-Length its GET would send (RFC 9110 §9.3.2), not 0, and no body", async () => {
  const { app, writes } = await makeApp({
    intents: [{ id: "pi_0001", state: "created" }],
    deps: { log: () => {} },
  });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    app.fetch,
  );
  try {
    const base = `http://127.0.0.1:${server.addr.port}`;
    for (
      const [path, headers, status] of [
        ["/healthz", {}, 200],
        ["/readyz", {}, 200],
        ["/v1/dead-letters", ops, 200],
        ["/v1/intents/pi_0001", ops, 200],
        ["/v1/intents/pi_0001", {}, 401],
        ["/v1/intents/pi_9999", ops, 404],
        ["/v1/dead-letters/pi_0001/settle", ops, 405],
        // The 404 names the method: a HEAD's length is still its GET's.
        ["/v1/nothing", {}, 404],
        ["/v1/deliveries/", {}, 404],
      ] as const
    ) {
      const get = await fetch(`${base}${path}`, { headers });
      const bytes = (await get.arrayBuffer()).byteLength;
      assert.equal(get.status, status, path);
      assert.notEqual(bytes, 0, path);
      const head = await fetch(`${base}${path}`, { method: "HEAD", headers });
      assert.equal(head.status, status, path);
      assert.equal(
        head.headers.get("content-length"),
        String(bytes),
        path,
      );
      assert.equal(await head.text(), "", path);
    }
  } finally {
    await server.shutdown();
  }
  assert.equal(writes.length, 0);
});
