import assert from "node:assert/strict";
import { HttpSender, MemoryStore } from "../../mod.ts";

// Deno's op sanitizer is off by default: these tests turn it on, so a timer
// left behind by a request fails them.
const timers = { sanitizeOps: true } as const;

const intent = () =>
  new MemoryStore().createIntent({
    id: "pi_0001",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
  });

Deno.test({
  name: "HttpSender leaves no timer behind a send that was answered",
  ...timers,
  fn: async () => {
    const sender = new HttpSender({
      url: "https://signer.example",
      timeoutMs: 60_000,
      fetch: () => Promise.resolve(Response.json({ txHash: "0xabc" })),
    });
    assert.deepEqual(await sender.send(await intent(), { replace: false }), {
      txHash: "0xabc",
    });
  },
});

Deno.test({
  name: "HttpSender leaves no timer behind a receipt that failed",
  ...timers,
  fn: async () => {
    const sender = new HttpSender({
      url: "https://signer.example",
      timeoutMs: 60_000,
      fetch: () =>
        Promise.resolve(Response.json({ error: "busy" }, { status: 500 })),
    });
    await assert.rejects(sender.receipt("0xabc"), /signer answered 500: busy/);
    const refused = new HttpSender({
      url: "https://signer.example",
      timeoutMs: 60_000,
      fetch: () => Promise.reject(new TypeError("connection refused")),
    });
    await assert.rejects(refused.receipt("0xabc"), /signer unreachable/);
  },
});

Deno.test({
  name: "HttpSender leaves no timer behind a request that timed out",
  ...timers,
  fn: async () => {
    const sender = new HttpSender({
      url: "https://signer.example",
      timeoutMs: 20,
      fetch: () => new Promise<Response>(() => {}),
    });
    await assert.rejects(
      sender.receipt("0xabc"),
      /signer timed out after 20ms/,
    );
  },
});

Deno.test("HttpSender holds nothing of a request once it is answered, whatever its timeout", async () => {
  // A timeout's timer that outlives its request holds the request's signal,
  // and all that hangs on it, until it fires: with the longest timeout,
  // every request's for 24 days. Counted after a garbage collection, in a
  // process of its own (the flag that allows one is V8's).
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--v8-flags=--expose-gc",
      new URL("_sender_gc.ts", import.meta.url).pathname,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  assert.equal(code, 0, text.decode(stderr));
  const { requests, held } = JSON.parse(text.decode(stdout));
  assert.equal(requests, 300);
  // Nothing, in practice; a few would be a collection that ran early.
  assert.ok(
    held < 30,
    `${held} of ${requests} signals of answered requests are still held`,
  );
});

Deno.test({
  name:
    "HttpSender stops a receipt when its signal aborts, rejecting with the signal's reason, and leaves no timer behind",
  ...timers,
  fn: async () => {
    const called = Promise.withResolvers<void>();
    let requestSignal: AbortSignal | undefined;
    const sender = new HttpSender({
      url: "https://signer.example",
      timeoutMs: 2_000,
      // A signer that answers nothing until the request is aborted.
      fetch: (_, init) => {
        requestSignal = init?.signal ?? undefined;
        called.resolve();
        return new Promise<Response>((_, reject) =>
          init?.signal?.addEventListener(
            "abort",
            () => reject(init.signal?.reason),
          )
        );
      },
    });
    const stop = new AbortController();
    const reading = sender.receipt("0xabc", { signal: stop.signal });
    await called.promise;
    const reason = new Error("not wanted any more");
    stop.abort(reason);
    await assert.rejects(reading, (error) => error === reason);
    assert.equal(requestSignal?.aborted, true);
  },
});

Deno.test("HttpSender asks nothing for a receipt whose signal aborted before it began", async () => {
  let calls = 0;
  const sender = new HttpSender({
    url: "https://signer.example",
    fetch: () => {
      calls++;
      return Promise.resolve(Response.json({ status: "confirmed" }));
    },
  });
  const reason = new Error("not wanted");
  await assert.rejects(
    sender.receipt("0xabc", { signal: AbortSignal.abort(reason) }),
    (error) => error === reason,
  );
  assert.equal(calls, 0);
  // Not aborted, it reads the receipt as before.
  assert.equal(
    await sender.receipt("0xabc", { signal: new AbortController().signal }),
    "confirmed",
  );
  assert.equal(calls, 1);
});

Deno.test("HttpSender refuses a receipt's signal that is not an AbortSignal, naming it", async () => {
  const sender = new HttpSender({
    url: "https://signer.example",
    fetch: () => Promise.resolve(Response.json({ status: "confirmed" })),
  });
  await assert.rejects(
    sender.receipt("0xabc", {
      signal: { aborted: false } as unknown as AbortSignal,
    }),
    (error) =>
      error instanceof TypeError &&
      error.message ===
        "Cannot read receipt as 'options.signal' must be an AbortSignal: current value is {\"aborted\":false}",
  );
});

Deno.test("HttpSender gives up on a request at its timeoutMs, neither before nor long after", async () => {
  const sender = new HttpSender({
    url: "https://signer.example",
    timeoutMs: 1_000,
    fetch: () => new Promise<Response>(() => {}),
  });
  const started = performance.now();
  await assert.rejects(sender.receipt("0xabc"), /signer timed out after 1s/);
  const waited = performance.now() - started;
  assert.ok(waited >= 990 && waited < 1_900, `waited ${waited} ms`);
});
