/**
 * `POST /v1/deliveries` checks an `X-Signature`'s MAC before its `t`, so a
 * well-formed header with a `t` out of time (or in milliseconds) is read
 * with its body. Two edges of that order: a body over the limit cannot be
 * MAC'd, and a `t` out of time is answered in the same words whoever
 * signed it, so such a request is refused for its `t` (401), as the
 * headers alone tell, not for its size; and a body held back behind such
 * a header is waited for only up to `bodyTimeoutMs`, then answered 408, as
 * one behind a `t` in time is.
 *
 * @module
 */

import assert from "node:assert/strict";
import { makeApp, NOW, SECRET } from "./_app.ts";
import { signHmac } from "./_signing.ts";

const encoder = new TextEncoder();

/** A body of `text`, framed by its Content-Length or chunked. */
function framed(framing: "length" | "chunked", text: string) {
  return framing === "length"
    ? { body: text, headers: { "content-length": String(text.length) } }
    : {
      body: new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(encoder.encode(text));
          controller.close();
        },
      }),
      headers: { "transfer-encoding": "chunked" },
    };
}

const NOW_S = Math.floor(NOW / 1000);
const JOB = { intentId: "pi_0001", kind: "settle" };

Deno.test("POST /v1/deliveries refuses a t out of time or in milliseconds with a body over the limit 401, in the words it gives one within the limit, by Content-Length as when chunked; its log line says the MAC was not checked; a t in time over the limit is still 413", async () => {
  const lines: string[] = [];
  const { app, writes } = await makeApp({
    intents: [{ id: "pi_0001" }],
    deps: { log: (line) => lines.push(line), maxBodyBytes: 1024 },
  });
  const small = JSON.stringify({ job: JOB });
  const big = JSON.stringify({ job: JOB, pad: "x".repeat(2048) });
  const logged: string[] = [];
  const post = async (
    text: string,
    signature: string,
    framing: "length" | "chunked",
  ) => {
    const { body, headers } = framed(framing, text);
    const res = await app.request("/v1/deliveries", {
      method: "POST",
      body,
      headers: { ...headers, "x-signature": signature },
    });
    return { status: res.status, problem: await res.json() };
  };
  for (
    const [name, timeS] of [
      ["10 minutes old", NOW_S - 600],
      ["31 s ahead", NOW_S + 31],
      // 13 digits: Date.now() sent as it is.
      ["in milliseconds", 1_764_504_000_000],
    ] as const
  ) {
    // The words a sender gets for its own t within the limit.
    const own = await post(small, signHmac(SECRET, small, timeS), "length");
    assert.equal(own.status, 401, name);
    assert.match(
      own.problem.detail,
      name === "in milliseconds" ? /in milliseconds/ : /more than 5 minutes/,
    );
    for (const framing of ["length", "chunked"] as const) {
      for (
        const signature of [
          signHmac(SECRET, big, timeS),
          `t=${timeS},v1=${"ab".repeat(32)}`,
        ]
      ) {
        lines.length = 0;
        const { status, problem } = await post(big, signature, framing);
        assert.equal(status, 401, `${name} ${framing}: ${problem.detail}`);
        assert.equal(problem.detail, own.problem.detail, `${name} ${framing}`);
        logged.push(...lines);
      }
    }
  }
  // Logged (once a minute: the clock stands still), as a refusal the MAC
  // could not tell the sender's, under the unverified kind.
  assert.equal(logged.length, 1, logged.join("\n"));
  assert.match(
    logged[0]!,
    /^relayer POST \/v1\/deliveries refused 401: The X-Signature timestamp is more than 5 minutes old.* Its body was over the limit, so not read, and its MAC not checked/,
  );
  assert.doesNotMatch(logged[0]!, /the signature verifies/);
  // In time, to the bounds the MAC's path keeps (5 minutes old, 30 s
  // ahead), the size is what is wrong; a second past either, the t.
  for (const framing of ["length", "chunked"] as const) {
    for (
      const [timeS, expected] of [
        [NOW_S, 413],
        [NOW_S - 300, 413],
        [NOW_S + 30, 413],
        [NOW_S - 301, 401],
        [NOW_S + 31, 401],
      ] as const
    ) {
      const { status } = await post(big, signHmac(SECRET, big, timeS), framing);
      assert.equal(status, expected, `${framing} t ${timeS - NOW_S} s`);
    }
  }
  assert.equal(writes(), 0);
});

/** A body whose first part comes at once and the rest never. */
function heldBack(first: string): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(encoder.encode(first));
    },
    pull: () => new Promise(() => {}),
  }, { highWaterMark: 0 });
}

Deno.test("POST /v1/deliveries answers a body held back behind a t out of time 408 within bodyTimeoutMs and a quarter of it, as behind a t in time, whoever signed it, nothing written; sent whole, it is the 401 of its t", async () => {
  const lines: string[] = [];
  const timeoutMs = 100;
  const { app, writes } = await makeApp({
    intents: [{ id: "pi_0001" }],
    deps: { log: (line) => lines.push(line), bodyTimeoutMs: timeoutMs },
  });
  const text = JSON.stringify({ job: JOB });
  for (
    const [name, signature] of [
      ["the sender's, 10 minutes old", signHmac(SECRET, text, NOW_S - 600)],
      ["a forger's, 10 minutes old", `t=${NOW_S - 600},v1=${"ab".repeat(32)}`],
      ["the sender's, in time", signHmac(SECRET, text, NOW_S)],
    ] as const
  ) {
    for (const framing of ["length", "chunked"] as const) {
      const started = performance.now();
      const res = await app.request("/v1/deliveries", {
        method: "POST",
        body: heldBack(text.slice(0, 10)),
        headers: {
          "x-signature": signature,
          ...(framing === "length"
            ? { "content-length": String(text.length) }
            : { "transfer-encoding": "chunked" }),
        },
      });
      const took = performance.now() - started;
      const problem = await res.json();
      assert.equal(res.status, 408, `${name} ${framing}: ${problem.detail}`);
      assert.equal(problem.type, "urn:relayer:problem:body-timeout");
      // The bound the docs give (a quarter more, the deadlines' tick), and
      // 100 ms for a loaded machine's timers.
      assert.ok(
        took >= timeoutMs - 5 && took < timeoutMs * 1.25 + 100,
        `${name} ${framing}: ${took} ms`,
      );
    }
  }
  assert.equal(writes(), 0);
  assert.ok(
    lines.length > 0 && lines.every((line) => / refused 408: /.test(line)),
    lines.join(),
  );
  // Sent whole, the stale one is refused for its t.
  const whole = await app.request("/v1/deliveries", {
    method: "POST",
    body: text,
    headers: { "x-signature": signHmac(SECRET, text, NOW_S - 600) },
  });
  assert.equal(whole.status, 401);
  assert.match((await whole.json()).detail, /more than 5 minutes old/);
});

Deno.test("POST /v1/deliveries refuses a bridge's give-up past the limit, in the room it has there, with a t out of time 401 as its MAC says (the sender's, its clock): it was read and MAC'd, and once signed in time it is taken", async () => {
  const giveUp = JSON.stringify({
    job: { ...JOB, note: "x".repeat(1100) },
    gaveUp: { deliveries: 5, messageId: "m-1" },
  });
  for (
    const [name, timeS] of [
      ["10 minutes old", NOW_S - 600],
      ["in milliseconds", 1_764_504_000_000],
    ] as const
  ) {
    const lines: string[] = [];
    const { app } = await makeApp({
      intents: [{ id: "pi_0001" }],
      deps: { log: (line) => lines.push(line), maxBodyBytes: 1024 },
    });
    assert.ok(giveUp.length > 1024 && giveUp.length <= 2048);
    for (const framing of ["length", "chunked"] as const) {
      lines.length = 0;
      const { body, headers } = framed(framing, giveUp);
      const res = await app.request("/v1/deliveries", {
        method: "POST",
        body,
        headers: { ...headers, "x-signature": signHmac(SECRET, giveUp, timeS) },
      });
      const problem = await res.json();
      assert.equal(res.status, 401, `${name} ${framing}: ${problem.detail}`);
      // Logged once a minute: the first framing's line says it.
      if (framing === "chunked") continue;
      assert.equal(lines.length, 1, lines.join("\n"));
      // Not the words for a body left unread: this one was MAC'd, and
      // once its t is right, it is taken, not refused 413.
      assert.doesNotMatch(lines[0]!, /MAC not checked|refused 413/, name);
      if (name === "10 minutes old") {
        assert.match(lines[0]!, /the signature verifies/);
      }
    }
  }
  const { app, writes } = await makeApp({
    intents: [{ id: "pi_0001" }],
    deps: { maxBodyBytes: 1024 },
  });
  // A forger's, t in time: 413, as past the limit before, nothing written.
  const forged = await app.request("/v1/deliveries", {
    method: "POST",
    body: giveUp,
    headers: { "x-signature": `t=${NOW_S},v1=${"ab".repeat(32)}` },
  });
  assert.equal(forged.status, 413);
  await forged.body?.cancel();
  assert.equal(writes(), 0);
  const res = await app.request("/v1/deliveries", {
    method: "POST",
    body: giveUp,
    headers: { "x-signature": signHmac(SECRET, giveUp, NOW_S) },
  });
  assert.equal(res.status, 200, await res.clone().text());
  await res.body?.cancel();
});
