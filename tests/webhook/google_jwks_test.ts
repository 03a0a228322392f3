import assert from "node:assert/strict";
import { googleJwks } from "../../webhook/google_jwks.ts";
import { makeApp, theGoogle } from "./_app.ts";
import { envelope, fakeGoogle, PUBSUB } from "./_signing.ts";

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

/** A fetch that answers `body` as Google's keys, cached an hour; it counts its calls. */
function answering(body: unknown) {
  const counted = {
    calls: 0,
    fetch: (() => {
      counted.calls++;
      return Promise.resolve(
        Response.json(body, {
          headers: { "cache-control": "public, max-age=3600" },
        }),
      );
    }) as typeof fetch,
  };
  return counted;
}

Deno.test("googleJwks() serves only the entries of Google's answer that are objects, and an answer with none is a failure, not keys", async () => {
  const google = await theGoogle();
  const key = google.jwks[0]!;
  const mixed = googleJwks({
    fetch: answering({ keys: [null, 7, "x", [], key] }).fetch,
    now: () => 0,
  });
  assert.deepEqual(await mixed(), [key]);
  for (const keys of [[null], [1, "x", true, []]]) {
    const none = googleJwks({ fetch: answering({ keys }).fetch, now: () => 0 });
    await assert.rejects(none(), /Google's keys answer has no keys/);
  }
});

Deno.test("createApp() with googleJwks(): an answer from Google with a null among its keys is answered 503 (keys unavailable) when no key is left, and a key beside it still verifies, never a 500 for an hour", async () => {
  const google = await theGoogle();
  const push = async (keys: unknown[]) => {
    const lines: string[] = [];
    const { app, writes } = await makeApp({
      intents: [{ id: "pi_0001", state: "created" }],
      deps: {
        log: (line) => lines.push(line),
        pubsub: {
          audience: PUBSUB.audience,
          jwks: googleJwks({ fetch: answering({ keys }).fetch }),
          serviceAccount: PUBSUB.serviceAccount,
        },
      },
    });
    const res = await app.request("/v1/pubsub", {
      method: "POST",
      body: envelope(job, { deliveryAttempt: 1 }),
      headers: { authorization: `Bearer ${await google.token()}` },
    });
    const answer = await res.json();
    return { status: res.status, answer, lines, writes: writes() };
  };
  const none = await push([null]);
  assert.equal(none.status, 503, JSON.stringify(none.answer));
  assert.equal(none.answer.type, "urn:relayer:problem:keys-unavailable");
  assert.equal(none.writes, 0);
  assert.match(none.lines.join("\n"), /has no keys \(answering 503/);
  // The token verified: the job ran, and its retry is the route's 503.
  const beside = await push([null, google.jwks[0]!]);
  assert.equal(beside.status, 503, JSON.stringify(beside.answer));
  assert.equal(beside.answer.delivery, 1);
});

Deno.test("createApp() with googleJwks() through a rotation: a key Google adds verifies at its first push, a key it withdraws verifies until the cached answer's max-age runs out, then is refused; a failed refresh serves the keys in hand", async () => {
  const first = await theGoogle();
  const second = await fakeGoogle();
  const added = { ...second.jwks[0]!, kid: "added" } as JsonWebKey;
  let served: JsonWebKey[] = [first.jwks[0]!];
  let down = false;
  let fetches = 0;
  let clock = 1_000_000;
  const { app } = await makeApp({
    intents: [{ id: "pi_0001", state: "created" }],
    deps: {
      now: () => clock,
      pubsub: {
        audience: PUBSUB.audience,
        jwks: googleJwks({
          fetch: () => {
            fetches++;
            return Promise.resolve(
              down
                ? new Response("unavailable", { status: 500 })
                : Response.json({ keys: served }, {
                  headers: { "cache-control": "public, max-age=600" },
                }),
            );
          },
          now: () => clock,
        }),
        serviceAccount: PUBSUB.serviceAccount,
      },
    },
  });
  /** 503 with the delivery's number: verified, and retried by the route. */
  const push = async (token: string) => {
    const res = await app.request("/v1/pubsub", {
      method: "POST",
      body: envelope(job, { deliveryAttempt: 1 }),
      headers: { authorization: `Bearer ${token}` },
    });
    const answer = await res.json();
    return res.status === 503 && answer.delivery === 1
      ? "verified"
      : `${res.status} ${answer.type}`;
  };
  const old = () => first.token();
  const fresh = () => second.token({}, { kid: "added" });
  assert.equal(await push(await old()), "verified");
  assert.equal(fetches, 1);
  served = [first.jwks[0]!, added]; // Google lists its next key
  assert.equal(await push(await fresh()), "verified");
  assert.equal(fetches, 2); // fetched again once, for the unknown kid
  served = [added]; // and withdraws the old one
  clock += 599_999;
  assert.equal(await push(await old()), "verified"); // still cached
  assert.equal(fetches, 2);
  clock += 1;
  assert.equal(
    await push(await old()),
    "401 urn:relayer:problem:unauthorized",
  );
  assert.equal(await push(await fresh()), "verified");
  down = true; // Google's endpoint fails when the keys run out again
  clock += 600_000;
  assert.equal(await push(await fresh()), "verified");
  const after = fetches;
  clock += 59_999;
  assert.equal(await push(await fresh()), "verified");
  assert.equal(fetches, after); // the next try waits a minute
});

/**
 * A fetch whose answer is `mib` MiB of JSON whitespace (in 64 KiB chunks)
 * then a valid JWKS, or, with `mib` Infinity, whitespace that never ends
 * (the stream errors itself after 32 MiB, so the test stays bounded even
 * where nothing caps the read). It counts the bytes read of it.
 */
function swelling(mib: number) {
  const chunk = new Uint8Array(64 * 1024).fill(0x20);
  const tail = new TextEncoder().encode(
    JSON.stringify({ keys: [{ kty: "RSA" }] }),
  );
  const counted = {
    read: 0,
    fetch: (() => {
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (counted.read >= 32 * 2 ** 20 && mib === Infinity) {
            controller.error(new Error("the test's own bound: 32 MiB read"));
          } else if (counted.read >= mib * 2 ** 20) {
            counted.read += tail.byteLength;
            controller.enqueue(tail);
            controller.close();
          } else {
            counted.read += chunk.byteLength;
            controller.enqueue(chunk);
          }
        },
      });
      return Promise.resolve(new Response(body, { status: 200 }));
    }) as typeof fetch,
  };
  return counted;
}

Deno.test("googleJwks() refuses an answer over 64 KiB, naming the cap, and reads no more of it: 16 MiB of whitespace before valid keys are not buffered and parsed", async () => {
  const google = swelling(16);
  const keys = googleJwks({ fetch: google.fetch, now: () => 0 });
  await assert.rejects(
    keys(),
    /Google's keys answer is over 65536 bytes \(64 KiB\)/,
  );
  assert.ok(google.read <= 64 * 1024 + 2 * 64 * 1024, `read ${google.read}`);
});

Deno.test("googleJwks() refuses an answer that never ends once it passed 64 KiB, not when memory or the 5 s fetch deadline run out", async () => {
  const google = swelling(Infinity);
  const keys = googleJwks({ fetch: google.fetch, now: () => 0 });
  const started = performance.now();
  await assert.rejects(
    keys(),
    /Google's keys answer is over 65536 bytes \(64 KiB\)/,
  );
  assert.ok(performance.now() - started < 2_000);
  assert.ok(google.read <= 64 * 1024 + 2 * 64 * 1024, `read ${google.read}`);
});

Deno.test("googleJwks() takes an answer of exactly 64 KiB, streamed in pieces or of a declared length, and refuses one byte more", async () => {
  const keysJson = JSON.stringify({ keys: [{ kty: "RSA" }] });
  const sized = (bytes: number, declared: boolean) => {
    const text = " ".repeat(bytes - keysJson.length) + keysJson;
    const encoded = new TextEncoder().encode(text);
    const body = declared ? encoded : new ReadableStream<Uint8Array>({
      start(controller) {
        for (let at = 0; at < encoded.length; at += 1000) {
          controller.enqueue(encoded.subarray(at, at + 1000));
        }
        controller.close();
      },
    });
    return googleJwks({
      fetch: () => Promise.resolve(new Response(body)),
      now: () => 0,
    });
  };
  for (const declared of [false, true]) {
    assert.equal((await sized(64 * 1024, declared)()).length, 1);
    await assert.rejects(
      sized(64 * 1024 + 1, declared)(),
      /Google's keys answer is over 65536 bytes/,
    );
  }
});

// A `fetch` that is no function, or a `url` that is no absolute http(s)
// URL (a path, a number from a JSON config), was taken at construction
// and failed on the first Pub/Sub push, every push refused thereafter.
Deno.test("googleJwks() refuses a fetch that is no function or a url that is no absolute http(s) URL, when built", () => {
  const refusals: [Record<string, unknown>, string][] = [
    [
      { fetch: "fetch" },
      "Cannot build a Google JWKS source as 'fetch' must be a function such as globalThis.fetch: current value is \"fetch\"",
    ],
    [
      { url: "certs" },
      "Cannot build a Google JWKS source as 'url' must be an absolute http(s) URL such as https://www.googleapis.com/oauth2/v3/certs: current value is \"certs\"",
    ],
    [
      { url: 5 },
      "Cannot build a Google JWKS source as 'url' must be an absolute http(s) URL such as https://www.googleapis.com/oauth2/v3/certs: current value is 5",
    ],
    [
      { url: "file:///etc/certs" },
      "Cannot build a Google JWKS source as 'url' must be an absolute http(s) URL such as https://www.googleapis.com/oauth2/v3/certs: current value is \"file:///etc/certs\"",
    ],
  ];
  for (const [options, message] of refusals) {
    assert.throws(() => googleJwks(options as never), (error: Error) => {
      assert.ok(error instanceof TypeError, String(error));
      assert.equal(error.message, message);
      return true;
    });
  }
  // A URL object, and a loopback one for tests, are taken.
  googleJwks({ url: new URL("http://127.0.0.1:9/certs") as never });
  googleJwks({ url: "http://127.0.0.1:9/certs" });
});

Deno.test("googleJwks() refuses a plain http url off this machine, naming it without its secrets: whoever is on the path could serve keys of their own and sign any push; https anywhere, and http on loopback (a local stand-in), are taken", () => {
  for (
    const [url, said] of [
      ["http://keys.example/certs", '"http://keys.example/certs"'],
      [
        "http://relay:hunter2@keys.internal:8080/certs?key=hunter3",
        '"http://keys.internal:8080/certs" (its credentials, query and fragment left unsaid)',
      ],
      ["http://10.0.0.7/certs", '"http://10.0.0.7/certs"'],
      ["HTTP://KEYS.EXAMPLE/certs", '"HTTP://KEYS.EXAMPLE/certs"'],
      // A name under .localhost is looked up in DNS by Deno (the system's
      // resolver), which whoever is on the path answers.
      ["http://keys.localhost:9/certs", '"http://keys.localhost:9/certs"'],
      // Names that read as loopback and are not: a host under another's
      // domain, a trailing dot, an IPv4-mapped IPv6 address, a user part.
      [
        "http://127.0.0.1.evil.example/certs",
        '"http://127.0.0.1.evil.example/certs"',
      ],
      ["http://localhost./certs", '"http://localhost./certs"'],
      ["http://[::ffff:127.0.0.1]/certs", '"http://[::ffff:127.0.0.1]/certs"'],
      [
        "http://127.0.0.1@evil.example/certs",
        '"http://evil.example/certs" (its credentials, query and fragment left unsaid)',
      ],
    ] as const
  ) {
    assert.throws(() => googleJwks({ url }), (error: Error) => {
      assert.ok(error instanceof TypeError, String(error));
      assert.equal(
        error.message,
        `Cannot build a Google JWKS source as 'url' is plain http off this machine: current value is ${said}. Whoever is on the path could serve keys of their own and sign any Pub/Sub push with them: serve the keys over https (plain http is taken on localhost, 127.0.0.1 or [::1] only, for a local stand-in)`,
      );
      return true;
    });
  }
  for (
    const url of [
      "https://keys.internal/certs",
      "http://127.0.0.1:9/certs",
      "http://localhost:9/certs",
      "http://[::1]:9/certs",
    ]
  ) googleJwks({ url });
});

Deno.test("googleJwks() refuses a url that is no http(s) URL without echoing a password or a query in it: a mirror's URL may carry a key", () => {
  const refusals: [unknown, string][] = [
    [
      "ftp://relay:hunter2@keys.example/certs?key=hunter3#hunter4",
      '"ftp://keys.example/certs" (its credentials, query and fragment left unsaid)',
    ],
    [
      new URL("ftp://relay:hunter2@keys.example/certs?key=hunter3"),
      '"ftp://keys.example/certs" (its credentials, query and fragment left unsaid)',
    ],
    [
      // A colon left out: no URL at all, cut as text.
      "https//relay:hunter2@keys.example/certs?key=hunter3",
      '"https//keys.example/certs" (its credentials, query and fragment left unsaid)',
    ],
    // A scheme with no host: as the URL parser writes it, no "//" added.
    [
      "mailto:keys@example.test?key=hunter3",
      '"mailto:keys@example.test" (its credentials, query and fragment left unsaid)',
    ],
    // Nothing to leave out: said whole, as before.
    ["ftp://keys.example/certs", '"ftp://keys.example/certs"'],
  ];
  for (const [url, said] of refusals) {
    assert.throws(() => googleJwks({ url: url as never }), (error: Error) => {
      assert.ok(error instanceof TypeError, String(error));
      for (const secret of ["hunter2", "hunter3", "hunter4"]) {
        assert.ok(!error.message.includes(secret), error.message);
      }
      assert.equal(
        error.message,
        `Cannot build a Google JWKS source as 'url' must be an absolute http(s) URL such as https://www.googleapis.com/oauth2/v3/certs: current value is ${said}`,
      );
      return true;
    });
  }
});
