/**
 * A request body has `bodyTimeoutMs` to arrive once its route begins to
 * read it: a client that sends headers that pass the early checks and then
 * holds its body back (or trickles it) is answered 408 with `Connection:
 * close`, its read stopped, nothing written, and the refusal logged at
 * most once a minute per route. Before, nothing bounded the read: the
 * handler and its connection were held for as long as the client liked
 * (Deno.serve never times a request out).
 *
 * @module
 */

import assert from "node:assert/strict";
import { type Intent, MemoryStore, ScriptedSender } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { loadConfig, routeOptions } from "../../webhook/config.ts";
import { makeApp, OPS, SECRET, theGoogle } from "./_app.ts";
import { signHmac, signQStash } from "./_signing.ts";

const encoder = new TextEncoder();

/**
 * A body whose first part comes at once and the rest only when `more` is
 * called: `cancelled` says whether the reader gave up on it.
 */
function stalled(first: string): {
  readonly body: ReadableStream<Uint8Array>;
  readonly cancelled: boolean;
  more(text: string): void;
} {
  let cancelled = false;
  let control: ReadableStreamDefaultController<Uint8Array> | undefined;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      control = controller;
      if (first !== "") controller.enqueue(encoder.encode(first));
    },
    pull: () => new Promise(() => {}),
    cancel() {
      cancelled = true;
    },
  }, { highWaterMark: 0 });
  return {
    body,
    get cancelled() {
      return cancelled;
    },
    more: (text) => control!.enqueue(encoder.encode(text)),
  };
}

/** Lets the reads a chunk just woke run. */
const settled = () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * A body that comes one byte every `everyMs`, for ever (until cancelled:
 * `cancelled` resolves then).
 */
function trickle(everyMs: number): {
  readonly body: ReadableStream<Uint8Array>;
  readonly cancelled: Promise<void>;
} {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let cancelled!: () => void;
  const done = new Promise<void>((resolve) => cancelled = resolve);
  const body = new ReadableStream<Uint8Array>({
    pull: (controller) =>
      new Promise((resolve) => {
        timer = setTimeout(() => {
          controller.enqueue(encoder.encode(" "));
          resolve();
        }, everyMs);
      }),
    cancel: () => {
      clearTimeout(timer);
      cancelled();
    },
  }, { highWaterMark: 0 });
  return { body, cancelled: done };
}

/** The HMAC header a generic delivery needs to be read: well formed, and of now. */
function signatureNow(): string {
  return signHmac(SECRET, "{}", Math.floor(Date.now() / 1000));
}

const PENDING: Intent["id"] = "pi_0001";

Deno.test("a body held back on any route that reads one is answered 408 at bodyTimeoutMs, with Connection: close, its read stopped and nothing written", async () => {
  const g = await theGoogle();
  const { app, writes } = await makeApp({
    intents: [{ id: PENDING }],
    deps: { bodyTimeoutMs: 100, now: Date.now },
  });
  const routes: Array<[string, Record<string, string>]> = [
    ["/v1/deliveries", { "x-signature": signatureNow() }],
    ["/v1/qstash", { "upstash-signature": await signQStash("{}") }],
    ["/v1/pubsub", { authorization: `Bearer ${await g.token()}` }],
    ["/v1/intents", { authorization: `Bearer ${OPS}` }],
    ["/v1/jobs", { authorization: `Bearer ${OPS}` }],
  ];
  for (const [path, headers] of routes) {
    for (const framing of ["length", "chunked"] as const) {
      const body = stalled('{"intentId":"pi_00');
      const started = performance.now();
      const res = await app.request(path, {
        method: "POST",
        body: body.body,
        headers: {
          "content-type": "application/json",
          ...headers,
          ...(framing === "length"
            ? { "content-length": "100" }
            : { "transfer-encoding": "chunked" }),
        },
      });
      const took = performance.now() - started;
      assert.equal(res.status, 408, `${path} ${framing}`);
      assert.equal(res.headers.get("connection"), "close");
      const problem = await res.json();
      assert.equal(problem.type, "urn:relayer:problem:body-timeout");
      assert.equal(
        problem.detail,
        "The request body did not arrive within 100ms of its route beginning to read it: send the request again.",
      );
      assert.ok(took >= 95 && took < 2_000, `${path} ${framing}: ${took} ms`);
      // Nothing is cancelled before the answer is out (Deno.serve would
      // then read the rest and use the connection again); a read chunk by
      // chunk stops, cancelled by the next chunk. `arrayBuffer()` cannot
      // be, and ends with the body or the connection.
      assert.equal(body.cancelled, false, path);
      if (framing === "chunked") {
        body.more('01"}');
        await settled();
        assert.ok(body.cancelled, path);
      }
    }
  }
  assert.equal(writes(), 0);
});

Deno.test("the deadline is for the whole body, not between its chunks: a body trickled in is answered 408 too", async () => {
  const { app, writes } = await makeApp({
    deps: { bodyTimeoutMs: 150, now: Date.now },
  });
  const trickled = trickle(10);
  const res = await app.request("/v1/deliveries", {
    method: "POST",
    body: trickled.body,
    headers: {
      "x-signature": signatureNow(),
      "transfer-encoding": "chunked",
    },
  });
  assert.equal(res.status, 408);
  await res.body?.cancel();
  // Its next byte stops the read: the stream is cancelled.
  await trickled.cancelled;
  assert.equal(writes(), 0);
});

Deno.test("an authenticated oversized body being hashed is bounded by the deadline too: a Pub/Sub push and a QStash message that stall past the limit are answered 408, and no letter is kept", async () => {
  const g = await theGoogle();
  const { app, writes } = await makeApp({
    deps: { bodyTimeoutMs: 100, now: Date.now },
  });
  const big = "x".repeat(200_000);
  for (
    const [path, headers] of [
      ["/v1/pubsub", { authorization: `Bearer ${await g.token()}` }],
      ["/v1/qstash", { "upstash-signature": await signQStash(big + "y") }],
    ] as const
  ) {
    for (const framing of ["length", "chunked"] as const) {
      const body = stalled(big);
      const res = await app.request(path, {
        method: "POST",
        body: body.body,
        headers: {
          ...headers,
          ...(framing === "length"
            ? { "content-length": String(big.length + 1) }
            : { "transfer-encoding": "chunked" }),
        },
      });
      assert.equal(res.status, 408, `${path} ${framing}`);
      await res.body?.cancel();
      // Hashed as it comes (both framings, over the limit): the next
      // chunk stops the read.
      assert.equal(body.cancelled, false, `${path} ${framing}`);
      body.more("y");
      await settled();
      assert.ok(body.cancelled, `${path} ${framing}`);
    }
  }
  assert.equal(writes(), 0);
});

Deno.test("a body that comes in time is read as before, and its deadline's timer is cleared (the test's sanitizer would see it)", async () => {
  const { app, store } = await makeApp({
    intents: [{ id: PENDING, state: "authorized", hold: "pending" }],
    scripts: {
      [PENDING]: { sends: [{ txHash: "0xabc" }], receipts: ["confirmed"] },
    },
    deps: { bodyTimeoutMs: 1_000, now: Date.now },
  });
  const job = JSON.stringify({ job: { intentId: PENDING, kind: "settle" } });
  const res = await app.request("/v1/deliveries", {
    method: "POST",
    body: new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(encoder.encode(job.slice(0, 10)));
        await new Promise((resolve) => setTimeout(resolve, 50));
        controller.enqueue(encoder.encode(job.slice(10)));
        controller.close();
      },
    }),
    headers: {
      "x-signature": signHmac(SECRET, job, Math.floor(Date.now() / 1000)),
      "transfer-encoding": "chunked",
    },
  });
  // Read whole and acted on: sent, and waiting for its receipt.
  assert.equal(res.status, 503, await res.clone().text());
  assert.equal(
    (await res.json()).reason,
    "sent 0xabc, waiting for confirmation",
  );
  assert.deepEqual((await store.getIntent(PENDING))?.txHashes, ["0xabc"]);
});

Deno.test("a 408 is logged at most once a minute per route, with the count since the last line", async () => {
  const lines: string[] = [];
  let clock = Date.now();
  const { app } = await makeApp({
    deps: {
      bodyTimeoutMs: 20,
      now: () => clock,
      log: (line: string) => lines.push(line),
    },
  });
  const held = async () => {
    const res = await app.request("/v1/deliveries", {
      method: "POST",
      body: stalled("").body,
      headers: {
        "x-signature": signHmac(SECRET, "{}", Math.floor(clock / 1000)),
        "transfer-encoding": "chunked",
      },
    });
    assert.equal(res.status, 408);
    await res.body?.cancel();
  };
  await held();
  await held();
  clock += 60_000;
  await held();
  const logged = lines.filter((line) => / refused 408/.test(line));
  assert.deepEqual(logged, [
    "relayer POST /v1/deliveries refused 408: The request body did not arrive within 20ms of its route beginning to read it: send the request again.",
    "relayer POST /v1/deliveries refused 408 (2 refused since the last line): The request body did not arrive within 20ms of its route beginning to read it: send the request again.",
  ]);
});

Deno.test("on a real Deno.serve, a client that sends its headers and part of its body gets its 408 at the deadline, however the body is framed", async () => {
  const { app } = await makeApp({
    deps: { bodyTimeoutMs: 200, now: Date.now },
  });
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    app.fetch,
  );
  for (
    const [framing, head, part] of [
      ["length", "Content-Length: 100", "0123456789"],
      ["chunked", "Transfer-Encoding: chunked", "5\r\nhello\r\n"],
    ] as const
  ) {
    using conn = await Deno.connect({
      hostname: "127.0.0.1",
      port: server.addr.port,
    });
    await conn.write(encoder.encode(
      `POST /v1/deliveries HTTP/1.1\r\nHost: relayer.test\r\nX-Signature: ${signatureNow()}\r\n${head}\r\n\r\n${part}`,
    ));
    const started = performance.now();
    let answer = "";
    const buffer = new Uint8Array(4096);
    const decoder = new TextDecoder();
    // Read to the end of the problem's JSON, and its newline (every JSON
    // answer ends in one). Deno.serve keeps the socket open after it,
    // waiting for the rest of the body (it has no read timeout:
    // denoland/deno#3515), so the client closes it here.
    while (!answer.endsWith("}\n")) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const read = await Promise.race([
        conn.read(buffer),
        new Promise<"hung">((resolve) => {
          timer = setTimeout(() => resolve("hung"), 5_000);
        }),
      ]).finally(() => clearTimeout(timer));
      assert.notEqual(read, "hung", `${framing}: ${answer}`);
      assert.notEqual(read, null, `${framing}: ${answer}`);
      answer += decoder.decode(buffer.subarray(0, read as number));
    }
    const took = performance.now() - started;
    assert.match(answer, /^HTTP\/1\.1 408 /, framing);
    assert.match(answer, /\r\nconnection: close\r\n/, framing);
    assert.match(answer, /"type":"urn:relayer:problem:body-timeout"/, framing);
    assert.ok(took >= 150 && took < 5_000, `${framing}: ${took} ms`);
  }
});

Deno.test("on a real Deno.serve, a connection answered 408 is not used again: once more of a chunked body comes, it is closed, and a request after it is not answered", async () => {
  const { app, writes } = await makeApp({
    intents: [{ id: PENDING, state: "authorized", hold: "pending" }],
    deps: { bodyTimeoutMs: 200, now: Date.now },
  });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    app.fetch,
  );
  const conn = await Deno.connect({
    hostname: "127.0.0.1",
    port: server.addr.port,
  });
  const decoder = new TextDecoder();
  const buffer = new Uint8Array(65_536);
  /** What the server sends within `ms`, and how it ended: "open", "eof" or "reset". */
  const readFor = async (ms: number) => {
    let text = "";
    let timer: ReturnType<typeof setTimeout> | undefined;
    const quiet = new Promise<"open">((resolve) => {
      timer = setTimeout(() => resolve("open"), ms);
    });
    try {
      for (;;) {
        const read = await Promise.race([
          conn.read(buffer).catch(() => "reset" as const),
          quiet,
        ]);
        if (read === "open" || read === "reset") return { text, end: read };
        if (read === null) return { text, end: "eof" };
        text += decoder.decode(buffer.subarray(0, read));
        if (text.endsWith("}\n")) return { text, end: "open" };
      }
    } finally {
      clearTimeout(timer);
    }
  };
  try {
    const job = JSON.stringify({ job: { intentId: PENDING, kind: "settle" } });
    await conn.write(encoder.encode(
      `POST /v1/deliveries HTTP/1.1\r\nHost: relayer.test\r\nX-Signature: ${
        signHmac(SECRET, job, Math.floor(Date.now() / 1000))
      }\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n${job.slice(0, 5)}\r\n`,
    ));
    const first = await readFor(5_000);
    assert.match(first.text, /^HTTP\/1\.1 408 /);
    // The rest of the body, late, and a signed delivery after it on the
    // same connection: the 408 said Connection: close, so neither is read.
    const rest = job.slice(5);
    await conn.write(encoder.encode(
      `${
        rest.length.toString(16)
      }\r\n${rest}\r\n0\r\n\r\nPOST /v1/deliveries HTTP/1.1\r\nHost: relayer.test\r\nX-Signature: ${
        signHmac(SECRET, job, Math.floor(Date.now() / 1000))
      }\r\nContent-Length: ${job.length}\r\n\r\n${job}`,
    ));
    const after = await readFor(1_000);
    assert.equal(after.text, "", "a request after the 408 was answered");
    assert.notEqual(after.end, "open", "the connection was kept");
    assert.equal(writes(), 0);
  } finally {
    conn.close();
    await server.shutdown();
  }
});

Deno.test("createApp refuses a bodyTimeoutMs that is not a whole number of milliseconds a timer keeps", () => {
  for (const value of [0, -1, 1.5, Number.NaN, 2 ** 31, "30000"]) {
    assert.throws(
      () =>
        createApp({
          store: new MemoryStore(),
          sender: new ScriptedSender({}),
          bodyTimeoutMs: value as number,
        }),
      (error: unknown) =>
        error instanceof RangeError &&
        error.message.startsWith(
          "Cannot create app as 'bodyTimeoutMs' must be an integer from 1 to 2147483647 (milliseconds): current value is ",
        ),
      String(value),
    );
  }
});

Deno.test("BODY_TIMEOUT sets the deadline (a duration, 30s by default), and routeOptions passes it on", () => {
  const env = { SENDER_URL: "http://127.0.0.1:9000", WEBHOOK_SECRET: SECRET };
  assert.equal(routeOptions(loadConfig(env)).bodyTimeoutMs, 30_000);
  assert.equal(
    routeOptions(loadConfig({ ...env, BODY_TIMEOUT: "2m" })).bodyTimeoutMs,
    120_000,
  );
  assert.throws(
    () => loadConfig({ ...env, BODY_TIMEOUT: "30" }),
    /BODY_TIMEOUT/,
  );
  assert.throws(
    () => loadConfig({ ...env, BODY_TIMEOUT: "600h" }),
    /^ConfigError: BODY_TIMEOUT must be from 1ms to 2147483647ms/,
  );
});

Deno.test("on Cloudflare Workers (navigator.userAgent), each body read keeps its own timer, and a body held back is answered 408 all the same", async () => {
  const had = Object.getOwnPropertyDescriptor(globalThis, "navigator");
  Object.defineProperty(globalThis, "navigator", {
    value: { userAgent: "Cloudflare-Workers" },
    configurable: true,
  });
  try {
    const { app, writes } = await makeApp({
      deps: { bodyTimeoutMs: 50, now: Date.now },
    });
    // Two reads at once: neither waits on a timer the other set.
    const held = () =>
      app.request("/v1/deliveries", {
        method: "POST",
        body: stalled("{").body,
        headers: {
          "x-signature": signatureNow(),
          "transfer-encoding": "chunked",
        },
      });
    const answers = await Promise.all([held(), held()]);
    for (const res of answers) {
      assert.equal(res.status, 408);
      await res.body?.cancel();
    }
    assert.equal(writes(), 0);
  } finally {
    if (had) Object.defineProperty(globalThis, "navigator", had);
    else delete (globalThis as { navigator?: unknown }).navigator;
  }
});
