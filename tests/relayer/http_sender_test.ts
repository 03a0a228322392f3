import assert from "node:assert/strict";
import {
  createRelayer,
  HttpSender,
  type Intent,
  isNotSent,
  isPoison,
  MemoryStore,
} from "../../mod.ts";

/** A request as the signer stub received it. */
interface Received {
  readonly method: string;
  readonly path: string;
  readonly headers: Headers;
  readonly body: string;
}

type Handler = (
  request: Request,
  release: Promise<void>,
) => Response | Promise<Response>;

/**
 * Runs `body` against a signer stub on a loopback port the system picks.
 * `release` resolves when the test ends, so a handler that waits on it
 * never outlives the server.
 */
async function withSigner(
  handler: Handler,
  body: (url: string, received: Received[]) => Promise<void>,
): Promise<void> {
  const received: Received[] = [];
  const { promise: release, resolve } = Promise.withResolvers<void>();
  const server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen() {} },
    async (request) => {
      received.push({
        method: request.method,
        path: new URL(request.url).pathname,
        headers: request.headers,
        body: await request.text(),
      });
      return await handler(request, release);
    },
  );
  try {
    await body(`http://127.0.0.1:${server.addr.port}`, received);
  } finally {
    resolve();
    await server.shutdown();
  }
}

/** A handler that answers only when the test ends: longer than any timeout here. */
const hang: Handler = async (_request, release) => {
  await release;
  return Response.json({ txHash: "0xlate" });
};

const intent = (id = "pi_0001"): Promise<Intent> =>
  new MemoryStore().createIntent({
    id,
    state: "settling",
    hold: "pending",
    settlingSince: 0,
  });

/** Asserts `error` is an Error whose message matches and which carries no mark. */
function unknown(message: RegExp | string): (error: unknown) => boolean {
  return (error) => {
    assert.ok(error instanceof Error);
    if (typeof message === "string") assert.equal(error.message, message);
    else assert.match(error.message, message);
    assert.equal(isNotSent(error), false, "must not be marked notSent");
    assert.equal(isPoison(error), false, "must not be marked poison");
    return true;
  };
}

/**
 * Asserts `error` is an Error with `message`, marked notSent and poison
 * as `marks` says (and named `marks.name`, if given): a declared answer.
 */
function declared(
  message: string,
  marks: { notSent: boolean; poison: boolean; name?: string },
): (error: unknown) => boolean {
  return (error) => {
    assert.ok(error instanceof Error);
    assert.equal(error.message, message);
    if (marks.name !== undefined) assert.equal(error.name, marks.name);
    assert.equal(isNotSent(error), marks.notSent);
    assert.equal(isPoison(error), marks.poison);
    return true;
  };
}

/** Asserts a send to a signer stub answering with `handler` rejects as `check` says. */
async function sendRejects(
  handler: Handler,
  check: (error: Error) => boolean,
): Promise<void> {
  await withSigner(handler, async (url) => {
    const sender = new HttpSender({ url });
    await assert.rejects(
      sender.send(await intent(), { replace: false }),
      check,
    );
  });
}

Deno.test("HttpSender.send() returns the txHash of a 2xx answer", async () => {
  await withSigner(() => Response.json({ txHash: "0xabc" }), async (url) => {
    const sender = new HttpSender({ url });
    assert.deepEqual(await sender.send(await intent(), { replace: false }), {
      txHash: "0xabc",
    });
  });
});

Deno.test("HttpSender.send() posts intentId, replace, the intent and the configured headers", async () => {
  await withSigner(
    () => Response.json({ txHash: "0xabc" }),
    async (url, received) => {
      const sent = await intent("pi_0042");
      await new HttpSender({
        url: `${url}/v1/`,
        headers: { authorization: "Bearer s3cret" },
      }).send(sent, { replace: true });
      assert.equal(received.length, 1);
      const [request] = received;
      assert.equal(request?.method, "POST");
      assert.equal(request?.path, "/v1/send");
      assert.equal(request?.headers.get("authorization"), "Bearer s3cret");
      assert.equal(request?.headers.get("content-type"), "application/json");
      assert.deepEqual(JSON.parse(request?.body ?? ""), {
        intentId: "pi_0042",
        replace: true,
        intent: JSON.parse(JSON.stringify(sent)),
      });
    },
  );
});

Deno.test("HttpSender.send() maps a declared notSent to notSent()", async () => {
  await sendRejects(
    () =>
      Response.json({ error: "nonce too low", notSent: true }, { status: 409 }),
    declared("signer answered 409: nonce too low", {
      notSent: true,
      poison: false,
    }),
  );
});

Deno.test("HttpSender.send() maps a declared poison to poison()", async () => {
  await sendRejects(
    () =>
      Response.json({ error: "unknown chain id", poison: true }, {
        status: 422,
      }),
    declared("signer answered 422: unknown chain id", {
      notSent: false,
      poison: true,
    }),
  );
});

Deno.test("HttpSender.send() maps notSent and poison together to poison(notSent())", async () => {
  await sendRejects(
    () =>
      Response.json(
        { error: "chain id mismatch", notSent: true, poison: true },
        { status: 422 },
      ),
    declared("signer answered 422: chain id mismatch", {
      notSent: true,
      poison: true,
      name: "PoisonError",
    }),
  );
});

Deno.test("HttpSender.send() counts only flags that are exactly true", async () => {
  await sendRejects(
    () =>
      Response.json({ error: "maybe", notSent: "true", poison: 1 }, {
        status: 400,
      }),
    unknown("signer answered 400: maybe"),
  );
});

Deno.test("HttpSender.send() treats a 2xx without a txHash as unknown", async () => {
  for (
    const answer of [
      () => Response.json({ ok: true }),
      () => Response.json({ txHash: "" }),
      () => Response.json({ txHash: 42 }),
      () => new Response("not json", { status: 200 }),
      () => new Response(null, { status: 204 }),
      // A declared flag on a 2xx is not an error answer: still unknown.
      () => Response.json({ error: "x", notSent: true }, { status: 202 }),
    ]
  ) {
    await sendRejects(
      answer,
      unknown(/^signer answered 20[024] without a txHash: /),
    );
  }
});

Deno.test("HttpSender.send() treats a bare 500 as unknown", async () => {
  await sendRejects(
    () => new Response(null, { status: 500 }),
    unknown("signer answered 500: Internal Server Error"),
  );
});

Deno.test("HttpSender.send() treats a 503 with a non-JSON body as unknown", async () => {
  await sendRejects(
    () =>
      new Response("<html><body>upstream down</body></html>", {
        status: 503,
        headers: { "content-type": "text/html" },
      }),
    unknown("signer answered 503: Service Unavailable"),
  );
});

Deno.test("HttpSender.send() treats a 400 with an error but no flags as unknown", async () => {
  await sendRejects(
    () => Response.json({ error: "bad request" }, { status: 400 }),
    unknown("signer answered 400: bad request"),
  );
});

Deno.test("HttpSender.send() does not follow a redirect and treats it as unknown, whatever flags its body declares", async () => {
  const answers = [
    () =>
      new Response(null, {
        status: 307,
        headers: { location: "http://127.0.0.1:1/elsewhere" },
      }),
    // 303 See Other: the POST was processed; a "not sent" here is no proof.
    () =>
      Response.json({ error: "moved", notSent: true, poison: true }, {
        status: 303,
        headers: { location: "http://127.0.0.1:1/elsewhere" },
      }),
  ];
  for (const [i, answer] of answers.entries()) {
    await withSigner(answer, async (url, received) => {
      const sender = new HttpSender({ url });
      await assert.rejects(
        sender.send(await intent(), { replace: false }),
        unknown(
          `signer answered ${
            i === 0 ? 307 : 303
          } (a redirect, not followed): the broadcast may have been sent`,
        ),
      );
      assert.equal(received.length, 1);
    });
  }
});

Deno.test("HttpSender.send() treats a timeout as unknown and says so", async () => {
  await withSigner(hang, async (url) => {
    const sender = new HttpSender({ url, timeoutMs: 50 });
    const started = performance.now();
    await assert.rejects(
      sender.send(await intent(), { replace: false }),
      unknown("signer timed out after 50ms"),
    );
    assert.ok(performance.now() - started < 5_000);
  });
});

Deno.test("HttpSender.send() that times out reading a 2xx answer's body says the signer answered (it broadcast), and is unknown", async () => {
  const stalled: Handler = (_request, release) =>
    new Response(
      new ReadableStream({
        async start(controller) {
          controller.enqueue(new TextEncoder().encode('{"txHash":'));
          await release;
          controller.close();
        },
      }),
      { status: 200, headers: { "content-type": "application/json" } },
    );
  await withSigner(stalled, async (url) => {
    await assert.rejects(
      new HttpSender({ url, timeoutMs: 50 }).send(await intent(), {
        replace: false,
      }),
      unknown(
        "signer timed out after 50ms, its 200 answer's body unread: the broadcast may have been sent",
      ),
    );
  });
});

Deno.test("HttpSender.send() keeps its timeout when an injected fetch ignores the signal", async () => {
  const sender = new HttpSender({
    url: "https://signer.example",
    timeoutMs: 20,
    fetch: () => new Promise<Response>(() => {}),
  });
  await assert.rejects(
    sender.send(await intent(), { replace: false }),
    unknown("signer timed out after 20ms"),
  );
});

Deno.test("HttpSender.send() treats a refused connection as unknown", async () => {
  const server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen() {} },
    () => new Response(),
  );
  const port = server.addr.port;
  await server.shutdown();
  const sender = new HttpSender({ url: `http://127.0.0.1:${port}` });
  await assert.rejects(
    sender.send(await intent(), { replace: false }),
    unknown(/^signer unreachable: \S/),
  );
});

Deno.test("HttpSender.send() treats any fetch rejection as unknown", async () => {
  const sender = new HttpSender({
    url: "https://signer.example",
    fetch: () => Promise.reject(new TypeError("network down")),
  });
  await assert.rejects(
    sender.send(await intent(), { replace: false }),
    unknown("signer unreachable: network down"),
  );
});

Deno.test("HttpSender.send() cuts a hostile error text to one short line", async () => {
  const hostile = `line one\r\nline two\u0000${"x".repeat(10_000)}`;
  await sendRejects(
    () => Response.json({ error: hostile, notSent: true }, { status: 409 }),
    (error: Error) => {
      assert.match(
        error.message,
        /^signer answered 409: line one line two x+…$/,
      );
      assert.ok(error.message.length <= 230, `${error.message.length}`);
      assert.equal(isNotSent(error), true);
      return true;
    },
  );
});

Deno.test("HttpSender.send() reads at most 64 KiB of an endless error body", async () => {
  let pulled = 0;
  let cancelled = false;
  const endless = new ReadableStream<Uint8Array>({
    pull(controller) {
      pulled += 16_384;
      controller.enqueue(new TextEncoder().encode("{".repeat(16_384)));
    },
    cancel() {
      cancelled = true;
    },
  });
  const sender = new HttpSender({
    url: "https://signer.example",
    fetch: () =>
      Promise.resolve(
        new Response(endless, { status: 500, statusText: "Boom" }),
      ),
  });
  await assert.rejects(
    sender.send(await intent(), { replace: false }),
    unknown("signer answered 500: Boom"),
  );
  assert.ok(pulled <= 64 * 1024 + 2 * 16_384, `pulled ${pulled} bytes`);
  await Promise.resolve();
  assert.equal(cancelled, true);
});

Deno.test("HttpSender.receipt() returns the status the signer reports", async () => {
  for (const status of ["confirmed", "pending", "dropped"] as const) {
    await withSigner(() => Response.json({ status }), async (url) => {
      assert.equal(await new HttpSender({ url }).receipt("0xabc"), status);
    });
  }
});

Deno.test("HttpSender.receipt() gets the encoded txHash under the base path", async () => {
  await withSigner(
    () => Response.json({ status: "pending" }),
    async (url, received) => {
      const sender = new HttpSender({
        url: new URL(`${url}/v1`),
        headers: [["authorization", "Bearer s3cret"]],
      });
      await sender.receipt("0x/../a b?c");
      assert.equal(received.length, 1);
      assert.equal(received[0]?.method, "GET");
      assert.equal(received[0]?.path, "/v1/receipt/0x%2F..%2Fa%20b%3Fc");
      assert.equal(received[0]?.headers.get("authorization"), "Bearer s3cret");
      assert.equal(received[0]?.headers.get("accept"), "application/json");
    },
  );
});

Deno.test("HttpSender.receipt() throws a plain Error on a bad answer", async () => {
  for (
    const [answer, message] of [
      [
        () => Response.json({ status: "lost" }),
        /^signer answered 200 without a valid receipt status: /,
      ],
      [
        () => new Response("ok", { status: 200 }),
        /^signer answered 200 without a valid receipt status: ok$/,
      ],
      [
        // `notSent` means nothing on a receipt: retried like any failure.
        () =>
          Response.json({ error: "no such tx", notSent: true }, {
            status: 404,
          }),
        /^signer answered 404: no such tx$/,
      ],
      [
        // Nor does a redirect's body, whatever it flags.
        () =>
          Response.json({ error: "moved", poison: true }, {
            status: 302,
            headers: { location: "/elsewhere" },
          }),
        /^signer answered 302: moved$/,
      ],
      [
        () => new Response(null, { status: 502 }),
        /^signer answered 502: Bad Gateway$/,
      ],
    ] as const
  ) {
    await withSigner(answer, async (url) => {
      await assert.rejects(
        new HttpSender({ url }).receipt("0xabc"),
        unknown(message),
      );
    });
  }
  await assert.rejects(
    new HttpSender({ url: "https://signer.example" }).receipt(""),
    TypeError,
  );
});

Deno.test("HttpSender.receipt() throws poison when the signer declares it (a tx mined but reverted), so the intent goes to review at once, never settled", async () => {
  await withSigner(
    () =>
      Response.json({ error: "reverted in block 43", poison: true }, {
        status: 409,
      }),
    async (url) => {
      await assert.rejects(
        new HttpSender({ url }).receipt("0xabc"),
        declared("signer answered 409: reverted in block 43", {
          notSent: false,
          poison: true,
        }),
      );
    },
  );
});

Deno.test("HttpSender.receipt() treats a timeout as an error", async () => {
  await withSigner(hang, async (url) => {
    await assert.rejects(
      new HttpSender({ url, timeoutMs: 50 }).receipt("0xabc"),
      unknown("signer timed out after 50ms"),
    );
  });
});

Deno.test("HttpSender() checks its options", () => {
  const invalid: [unknown, ErrorConstructor, string][] = [
    [
      null,
      TypeError,
      `Cannot create HttpSender as its options must be an object such as { url: "https://signer.internal" }: current value is null`,
    ],
    [
      { url: "https://signer.local", timeoutMS: 30_000 },
      TypeError,
      'Cannot create HttpSender as "timeoutMS" is not one of its options (url, timeoutMs, fetch, headers): check its spelling',
    ],
    [
      { url: "signer.local" },
      TypeError,
      `Cannot create HttpSender as 'url' must be an absolute http(s) URL without credentials, query or fragment: current value is "signer.local"`,
    ],
    [
      { url: "ftp://signer.local" },
      TypeError,
      `Cannot create HttpSender as 'url' must be an absolute http(s) URL without credentials, query or fragment: current value is "ftp://signer.local/"`,
    ],
    [
      { url: "https://signer.local/?key=1" },
      TypeError,
      `Cannot create HttpSender as 'url' must be an absolute http(s) URL without credentials, query or fragment: current value is "https://signer.local/?***"`,
    ],
    [
      { url: 42 },
      TypeError,
      "Cannot create HttpSender as 'url' must be an absolute http(s) URL without credentials, query or fragment: current value is 42",
    ],
    [
      { url: "https://signer.local", timeoutMs: 0 },
      RangeError,
      "Cannot create HttpSender as 'timeoutMs' must be an integer from 1 to 2147483647: current value is 0",
    ],
    [
      { url: "https://signer.local", timeoutMs: 1.5 },
      RangeError,
      "Cannot create HttpSender as 'timeoutMs' must be an integer from 1 to 2147483647: current value is 1.5",
    ],
    [
      { url: "https://signer.local", timeoutMs: 2 ** 31 },
      RangeError,
      "Cannot create HttpSender as 'timeoutMs' must be an integer from 1 to 2147483647: current value is 2147483648",
    ],
    [
      { url: "https://signer.local", timeoutMs: NaN },
      RangeError,
      "Cannot create HttpSender as 'timeoutMs' must be an integer from 1 to 2147483647: current value is NaN",
    ],
    [
      { url: "https://signer.local", fetch: "fetch" },
      TypeError,
      `Cannot create HttpSender as 'fetch' must be a function: current value is "fetch"`,
    ],
  ];
  for (const [options, type, message] of invalid) {
    assert.throws(
      () =>
        new HttpSender(options as ConstructorParameters<typeof HttpSender>[0]),
      (error: Error) => {
        assert.ok(error instanceof type, `${error.name} for ${message}`);
        assert.equal(error.message, message);
        return true;
      },
    );
  }
  assert.ok(new HttpSender({ url: "http://127.0.0.1:8000", timeoutMs: 1 }));
});

Deno.test("HttpSender() never shows a secret in an error or when inspected", () => {
  for (
    const options of [
      { url: "https://user:s3cret@signer.local" },
      { url: "notaurl://user:s3cret@" },
      { url: "https://user:s3cret@signer.local/a@b" },
      { url: new URL("https://user:s3cret@signer.local") },
      {
        url: "https://signer.local",
        headers: { authorization: "Bearer s3cret\u0000" },
      },
    ]
  ) {
    assert.throws(() => new HttpSender(options), (error: Error) => {
      assert.ok(error instanceof TypeError);
      assert.ok(!error.message.includes("s3cret"), error.message);
      assert.ok(!String(error.cause ?? "").includes("s3cret"));
      return true;
    });
  }
  const sender = new HttpSender({
    url: "https://signer.local",
    headers: { authorization: "Bearer s3cret" },
  });
  assert.ok(!Deno.inspect(sender, { depth: 10 }).includes("s3cret"));
});

/**
 * Delivers pi_0001's settle once, authorized with its hold pending, by a
 * relayer whose Sender is `sender`; its outcome and the intent after.
 */
async function deliverOnce(sender: HttpSender) {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const relayer = createRelayer({
    store,
    sender,
    now: () => 0,
    random: () => 0.5,
  });
  const outcome = await relayer.deliver(
    { intentId: "pi_0001", kind: "settle" },
    1,
  );
  return { outcome, stored: await store.getIntent("pi_0001") };
}

Deno.test("createRelayer() with an HttpSender fails the intent on a declared notSent and poison", async () => {
  await withSigner(
    () =>
      Response.json(
        { error: "chain id mismatch", notSent: true, poison: true },
        { status: 422 },
      ),
    async (url) => {
      const { outcome, stored } = await deliverOnce(new HttpSender({ url }));
      assert.deepEqual(outcome, {
        action: "poison",
        delivery: 1,
        cause: "declared",
        reason: "retrying will not help",
        resolution: "nothing was sent, so the intent failed",
      });
      assert.equal(stored?.state, "failed");
      assert.equal(stored?.hold, "voided");
    },
  );
});

Deno.test("createRelayer() with an HttpSender retries a timed-out send", async () => {
  await withSigner(hang, async (url) => {
    const { outcome, stored } = await deliverOnce(
      new HttpSender({ url, timeoutMs: 50 }),
    );
    assert.equal(outcome.action, "retry");
    assert.ok(
      outcome.action === "retry" &&
        outcome.reason.startsWith("send: signer timed out"),
      JSON.stringify(outcome),
    );
    assert.equal(stored?.state, "settling");
    assert.equal(stored?.hold, "pending");
    assert.equal(stored?.lastBroadcast?.outcome, "unknown");
  });
});

Deno.test("HttpSender.receipt() reads no more than 64 KiB of a body whose declared length is smaller", async () => {
  const sender = new HttpSender({
    url: "https://signer.example",
    fetch: () =>
      Promise.resolve(
        new Response(`{"status":"pending"}${" ".repeat(70_000)}x`, {
          headers: { "content-length": "20" },
        }),
      ),
  });
  await assert.rejects(
    sender.receipt("0xabc"),
    /signer answered 200 without a valid receipt status/,
  );
});

Deno.test("HttpSender says what a bare 404 on /send most often means, a url the signer does not serve, so a wrong SENDER_URL is found from the first review's reason", async () => {
  await withSigner(
    () => new Response("", { status: 404, statusText: "Not Found" }),
    async (url) => {
      const sender = new HttpSender({ url: `${url}/wrong-path` });
      await assert.rejects(
        sender.send(await intent(), { replace: false }),
        unknown(
          "signer answered 404: Not Found (no such route: is the Sender's url the signer's base URL? It posts to <url>/send and reads <url>/receipt/<txHash>)",
        ),
      );
      // On a receipt, a bare 404 may only mean a tx the node does not know.
      await assert.rejects(
        sender.receipt("0xabc"),
        unknown("signer answered 404: Not Found"),
      );
    },
  );
});
