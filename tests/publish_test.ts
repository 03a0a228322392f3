/**
 * Publishing right by construction: with `QSTASH_TOKEN`, the service
 * publishes new and redriven jobs through QStash's API (here a local
 * stand-in that records each publish) with the retries the start-up check
 * accepted and the failure callback. No test reaches the internet.
 *
 * @module
 */

import { catchTimers } from "./_armed_timer.ts";
import assert from "node:assert/strict";
import { openService } from "../main.ts";
import { MemoryStore, ScriptedSender } from "../mod.ts";
import { createApp } from "../webhook/app.ts";
import { ConfigError, loadConfig } from "../webhook/config.ts";
import { qstashPublisher } from "../webhook/qstash_publisher.ts";
import { withTimeout } from "./_timeout.ts";
import { closeEach, type RawAnswer, rawHttpServer } from "./_raw_http.ts";
import { dotnetEscaped, lowerPercent, unicodeEscaped } from "./_echo_forms.ts";
import {
  type Publication,
  startQStashStandIn,
} from "../tools/_qstash_stand_in.ts";

interface Publish {
  readonly path: string;
  readonly headers: Headers;
  readonly body: unknown;
}

/**
 * A local stand-in for QStash's publish API. Like QStash, it refuses a
 * deduplication id with a colon (400 "DeduplicationId cannot contain ':'",
 * as reported in lobehub/lobehub#18778 and superset-sh/superset#3591).
 */
function standIn() {
  const publishes: Publish[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      if (req.headers.get("upstash-deduplication-id")?.includes(":")) {
        await req.body?.cancel();
        return Response.json({ error: "DeduplicationId cannot contain ':'" }, {
          status: 400,
        });
      }
      publishes.push({
        path: decodeURIComponent(new URL(req.url).pathname),
        headers: req.headers,
        body: await req.json(),
      });
      return Response.json({ messageId: `msg_${publishes.length}` });
    },
  );
  return { publishes, server, url: `http://127.0.0.1:${server.addr.port}` };
}

const OPS = "an-ops-token-of-16+";

Deno.test("the service publishes POST /v1/jobs and redrives through QStash, with QSTASH_RETRIES, the failure callback and a deduplication id", async () => {
  await withTimeout(async () => {
    const qstash = standIn();
    const service = await openService(
      loadConfig({
        SENDER_URL: "http://127.0.0.1:9",
        KV_PATH: ":memory:",
        QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
        QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
        PUBLIC_URL: "https://relayer.example.test",
        QSTASH_TOKEN: "qstash-token-for-tests",
        QSTASH_URL: qstash.url,
        OPS_TOKEN: OPS,
      }),
      { log: () => {} },
    );
    try {
      const ops = { authorization: `Bearer ${OPS}` };
      const job = { intentId: "pi_0001", kind: "settle" };
      await service.store.createIntent({ id: "pi_0001" });
      const posted = await service.app.request("/v1/jobs", {
        method: "POST",
        headers: ops,
        body: JSON.stringify(job),
      });
      assert.equal(posted.status, 202);
      await posted.body?.cancel();
      const [first] = qstash.publishes;
      assert.ok(first);
      assert.equal(
        first.path,
        "/v2/publish/https://relayer.example.test/v1/qstash",
      );
      assert.deepEqual(first.body, job);
      assert.equal(first.headers.get("upstash-retries"), "9"); // MAX_DELIVERIES − 1
      assert.equal(
        first.headers.get("upstash-failure-callback"),
        "https://relayer.example.test/v1/qstash/failed",
      );
      // The failure callback is retried as often as the message: the
      // start-up check counts its retries so (QSTASH_RETRIES).
      assert.equal(first.headers.get("upstash-failure-callback-retries"), "9");
      assert.equal(
        first.headers.get("authorization"),
        "Bearer qstash-token-for-tests",
      );

      // A dead letter, then its redrive: published before the letter is removed.
      await service.store.createIntent({ id: "pi_0002" });
      const kv = service.kv!; // KV_PATH: a KvStore service
      await kv.set(["relayer", "dead", "pi_0002/settle"], {
        jobId: "pi_0002/settle",
        intentId: "pi_0002",
        deliveries: 10,
        cause: "exhausted",
        reason: "no luck after 10 deliveries",
        resolution: "job dropped, intent still created",
        lastError: "signer unreachable",
        poisonedAt: 1,
      });
      const redriven = await service.app.request(
        "/v1/dead-letters/pi_0002%2Fsettle/redrive",
        { method: "POST", headers: ops },
      );
      assert.equal(redriven.status, 202);
      assert.equal((await redriven.json()).enqueued, true);
      const second = qstash.publishes[1];
      assert.deepEqual(second?.body, { intentId: "pi_0002", kind: "settle" });
      // QStash refuses a colon: the id (pi_0002/settle:<version>) goes hashed.
      assert.match(
        second?.headers.get("upstash-deduplication-id") ?? "",
        /^[0-9a-f]{64}$/,
      );
      assert.equal(
        (await kv.get(["relayer", "dead", "pi_0002/settle"])).value,
        null,
      );
    } finally {
      service.close();
      await qstash.server.shutdown();
    }
  }, 20_000);
});

Deno.test("loadConfig() refuses QSTASH_TOKEN without PUBLIC_URL or the signing keys, QSTASH_URL alone, and QSTASH_TOKEN with KV_QUEUE", () => {
  const base = {
    SENDER_URL: "http://127.0.0.1:9",
    WEBHOOK_SECRET: "a-webhook-secret-16",
  };
  const keys = {
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
  };
  // Its jobs come back to /v1/qstash, which takes only signed deliveries.
  const publishing = {
    ...base,
    QSTASH_TOKEN: "t",
    PUBLIC_URL: "https://relayer.example.test",
  };
  assert.throws(
    () => loadConfig(publishing),
    (error) =>
      error instanceof ConfigError &&
      error.setting === "QSTASH_CURRENT_SIGNING_KEY" &&
      /QSTASH_TOKEN publishes jobs to PUBLIC_URL\/v1\/qstash, which takes only deliveries signed with QStash's keys/
        .test(error.message),
  );
  // Taken unsigned in dev mode, which is for a service on this machine
  // (with a local QStash, such as deno task qstash-local): at a PUBLIC_URL
  // off it, whoever reaches the service would send its unsigned jobs.
  const local = { ...publishing, PUBLIC_URL: "http://127.0.0.1:8000" };
  assert.ok(loadConfig({ ...local, RELAYER_INSECURE_DEV: "1" }));
  assert.throws(
    () => loadConfig({ ...publishing, RELAYER_INSECURE_DEV: "1" }),
    (error) =>
      error instanceof ConfigError &&
      error.setting === "RELAYER_INSECURE_DEV" &&
      /this service is reached at PUBLIC_URL, off this machine: it would take requests with no signature or token, from anyone who reaches it, on \/v1\/qstash and \/v1\/qstash\/failed, /
        .test(error.message),
  );
  // And the queue's limit is checked against the policy whenever it publishes.
  assert.throws(
    () =>
      loadConfig({
        ...local,
        RELAYER_INSECURE_DEV: "1",
        QSTASH_RETRIES: "0",
      }),
    /QSTASH_RETRIES/,
  );
  assert.throws(
    () => loadConfig({ ...base, QSTASH_TOKEN: "t" }),
    /PUBLIC_URL is missing/,
  );
  assert.throws(
    () => loadConfig({ ...base, QSTASH_URL: "http://127.0.0.1:1" }),
    /QSTASH_TOKEN is missing/,
  );
  assert.throws(
    () =>
      loadConfig({
        ...base,
        ...keys,
        QSTASH_TOKEN: "t",
        PUBLIC_URL: "https://relayer.example.test",
        KV_QUEUE: "1",
      }),
    /Set KV_QUEUE or QSTASH_TOKEN, not both/,
  );
  // QStash's publish path in QSTASH_URL would be doubled at every publish.
  for (const path of ["/v2/publish", "/v2/publish/", "/v2"]) {
    assert.throws(
      () =>
        loadConfig({
          ...publishing,
          ...keys,
          QSTASH_URL: `https://qstash.upstash.io${path}`,
        }),
      (error) =>
        error instanceof ConfigError && error.setting === "QSTASH_URL" &&
        /QSTASH_URL must be QStash's API base, without \/v2\/publish/.test(
          error.message,
        ),
      path,
    );
  }
  assert.ok(
    loadConfig({
      ...publishing,
      ...keys,
      QSTASH_URL: "https://qstash.upstash.io/",
    }),
  );
});

Deno.test("qstashPublisher() publishes with its own token and URL even where QSTASH_DEV is set: the client would swap in the public dev credentials and start a dev server", async () => {
  const { publishes, server, url } = standIn();
  try {
    const publisher = new URL(
      "../webhook/qstash_publisher.ts",
      import.meta.url,
    );
    const code = `
      import { qstashPublisher } from ${JSON.stringify(publisher.href)};
      const p = qstashPublisher({
        token: "our-token-0123456789",
        publicUrl: "https://relayer.example.com",
        retries: 9,
        baseUrl: ${JSON.stringify(url)},
      });
      console.log(JSON.stringify(await p.publish({ intentId: "pi_0001", kind: "settle" })));
    `;
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "eval",
        "--config",
        new URL("../deno.json", import.meta.url).pathname,
        code,
      ],
      env: { QSTASH_DEV: "1", NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(20_000),
    });
    const { code: status, stdout, stderr } = await child.output();
    const err = new TextDecoder().decode(stderr);
    assert.equal(status, 0, err);
    assert.deepEqual(JSON.parse(new TextDecoder().decode(stdout)), {
      messageId: "msg_1",
    });
    assert.equal(publishes.length, 1);
    assert.equal(
      publishes[0]?.headers.get("authorization"),
      "Bearer our-token-0123456789",
    );
    assert.doesNotMatch(err, /Dev mode/);
  } finally {
    await server.shutdown();
  }
});

/**
 * The error of a publish with `token` to a QStash stand-in that answers
 * 401 with what `answer` makes of the request's `Authorization` header:
 * each test's echo of the token.
 */
async function echoedPublishError(
  token: string,
  answer: (authorization: string) => Response,
): Promise<Error> {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req) => answer(req.headers.get("authorization") ?? ""),
  );
  try {
    const publisher = qstashPublisher({
      token,
      publicUrl: "https://relayer.example.com",
      retries: 9,
      baseUrl: `http://127.0.0.1:${server.addr.port}`,
    });
    const refused: unknown = await publisher.publish({
      intentId: "pi_0001",
      kind: "settle",
    }).then(() => assert.fail("QStash's refusal was taken"), (error) => error);
    assert.ok(refused instanceof Error);
    return refused;
  } finally {
    await server.shutdown();
  }
}

Deno.test("qstashPublisher() never repeats its token in an error, though the API's answer echoes it", async () => {
  const token = "QSTOK/0123456789abcdef==";
  const error = await echoedPublishError(token, (authorization) =>
    new Response(
      // Written as some JSON writers do, with "/" escaped.
      JSON.stringify({ error: `unauthorized, you sent ${authorization}` })
        .replaceAll("/", "\\/"),
      { status: 401, headers: { "content-type": "application/json" } },
    ));
  assert.ok(!error.message.includes(token), error.message);
  assert.ok(!error.message.includes("0123456789abcdef"), error.message);
  assert.ok(
    error.message.startsWith(
      "QStash did not take the job pi_0001/settle (HTTP 401): ",
    ),
    error.message,
  );
  assert.ok(error.message.includes("Bearer <QSTASH_TOKEN>"), error.message);
});

Deno.test("qstashPublisher() masks each publisher's own token, whichever failed last", async () => {
  // A masker is built once for a run of one token's failures; two
  // publishers (two tenants, a token rotated) each mask their own.
  const echo = (authorization: string) =>
    new Response(`you sent ${authorization}`, { status: 401 });
  for (
    const token of ["QSTOK-first-0123", "QSTOK-second-4567", "QSTOK-first-0123"]
  ) {
    const error = await echoedPublishError(token, echo);
    assert.ok(!error.message.includes(token.slice(6)), error.message);
    assert.match(error.message, /you sent Bearer <QSTASH_TOKEN>;/);
  }
});

Deno.test("qstashPublisher() never repeats its token in an error, though the answer echoes it URL-encoded", async () => {
  // A proxy's login page, say, that sends the request's Authorization
  // header on in a query string: "/", "+" and "=" are escaped there.
  const token = "QSTOK/0123456789+abcdef==";
  const error = await echoedPublishError(token, (auth) =>
    new Response(
      `sign in: /login?auth=${
        encodeURIComponent(auth)
      } or /login?${new URLSearchParams({ auth })}`,
      { status: 401 },
    ));
  assert.ok(!error.message.includes("0123456789"), error.message);
  assert.match(
    error.message,
    /auth=Bearer%20<QSTASH_TOKEN> or \/login\?auth=Bearer\+<QSTASH_TOKEN>/,
  );
});

Deno.test("qstashPublisher() never repeats its token in an error, though the answer echoes it in base64", async () => {
  // An answer that dumps the request's headers base64-encoded (or as
  // base64url, or the token alone): each is the token, readable by anyone
  // who decodes the line.
  const token = "QSTOK/0123456789+abcdef==";
  const b64url = (text: string) =>
    btoa(text).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
  const error = await echoedPublishError(token, (auth) =>
    new Response(
      `denied: ${btoa(auth)} ${b64url(`x${auth}`)} ${btoa(`xy${token}`)}`,
      { status: 401 },
    ));
  // Each base64 word of the answer, decoded, must not hold the token's
  // middle.
  for (const word of error.message.split(/[^A-Za-z0-9+/_=-]+/)) {
    let decoded = "";
    try {
      decoded = atob(
        word.replaceAll("-", "+").replaceAll("_", "/").replace(/=+$/, "")
          .padEnd(Math.ceil(word.replace(/=+$/, "").length / 4) * 4, "="),
      );
    } catch {
      continue;
    }
    assert.ok(!decoded.includes("456789"), `${word}: ${decoded}`);
  }
  assert.match(error.message, /<QSTASH_TOKEN>/);
});

Deno.test("qstashPublisher() never repeats its token in an error, though the answer echoes it in base64 inside JSON with '/' escaped", async () => {
  // Base64 holds '/', which some JSON writers escape as "\/": the base64
  // of "Bearer QSTOK?0123456789?abcdef" is …ODk/YWJjZGVm.
  const token = "QSTOK?0123456789?abcdef";
  const error = await echoedPublishError(token, (auth) =>
    new Response(
      JSON.stringify({ headers: { authorization: btoa(auth) } })
        .replaceAll("/", "\\/"),
      { status: 401, headers: { "content-type": "application/json" } },
    ));
  // Read as a JSON reader reads it: "\/" is '/'.
  const text = error.message.replaceAll("\\/", "/");
  for (const word of text.split(/[^A-Za-z0-9+/=]+/)) {
    let decoded = "";
    try {
      decoded = atob(
        word.replace(/=+$/, "").padEnd(
          Math.ceil(word.replace(/=+$/, "").length / 4) * 4,
          "=",
        ),
      );
    } catch {
      continue;
    }
    assert.ok(!decoded.includes("456789"), `${word}: ${decoded}`);
  }
  assert.match(error.message, /<QSTASH_TOKEN>/);
});

Deno.test("qstashPublisher() never repeats its token in an error, though the answer echoes it with lower-case %-escapes or JSON's \\u escapes", async () => {
  // Some servers write %-escapes in lower case (%2f); .NET's JSON writer
  // escapes '+', '<', '>', '&' and '\'' as \u002B and the like, and some
  // writers every character that is not a letter or a digit; the token's
  // base64, in a dump of the headers, is escaped alike.
  const token = "QSTOK/0123456789+<ab&'cd>==";
  const lower = lowerPercent;
  const dotnet = (text: string) =>
    dotnetEscaped(JSON.stringify(text).slice(1, -1));
  const everyOther = (text: string) => unicodeEscaped(text, /[^A-Za-z0-9]/g);
  const echoes = [
    (auth: string) => `/login?auth=${lower(encodeURIComponent(auth))}`,
    (auth: string) =>
      `/login?${lower(new URLSearchParams({ auth }).toString())}`,
    (auth: string) => `{"sent":"${dotnet(auth)}"}`,
    (auth: string) => `{"b64":"${dotnet(btoa(auth))}"}`,
    (auth: string) => `{"sent":"${everyOther(auth)}"}`,
    (auth: string) => `{"as":"${everyOther(encodeURIComponent(auth))}"}`,
  ];
  for (const echo of echoes) {
    const error = await echoedPublishError(token, (auth) =>
      // Text that is not the token stays as it was.
      new Response(`next=%2fhome, \\u002B1: ${echo(auth)}`, {
        status: 401,
      }));
    assert.ok(!error.message.includes("0123456789"), error.message);
    assert.ok(!error.message.includes("TVRPSy8w"), error.message);
    assert.match(error.message, /<QSTASH_TOKEN>/);
    assert.ok(
      error.message.includes("(HTTP 401): next=%2fhome, \\u002B1: "),
      error.message,
    );
  }
});

Deno.test("qstashPublisher() refuses a publicUrl with a query, a fragment or the /v1/qstash route, which the routes would be appended after", () => {
  for (
    const publicUrl of [
      "https://relayer.example.com/v1/qstash",
      "https://relayer.example.com/v1/qstash/failed/",
      "https://relayer.example.com/base?token=s3cr3t",
      "https://relayer.example.com/#top",
      // An empty query or fragment: the URL parser answers "" for both.
      "https://relayer.example.com/?",
      "https://relayer.example.com#",
      // Another route of the service, which PUBLIC_URL refuses too.
      "https://relayer.example.com/v1/deliveries",
      "https://relayer.example.com/v1/pubsub/dead-letter",
    ]
  ) {
    assert.throws(
      () => qstashPublisher({ token: "t", publicUrl, retries: 2 }),
      (error: unknown) =>
        error instanceof TypeError &&
        error.message.includes("'publicUrl' must be the service's base URL") &&
        !error.message.includes("s3cr3t"),
      publicUrl,
    );
  }
  // A base URL with a path of its own is fine.
  qstashPublisher({
    token: "t",
    publicUrl: "https://relayer.example.com/base/",
    retries: 2,
  });
});

Deno.test("qstashPublisher() refuses a plain http baseUrl off this machine, where the token would go in clear text with every publish; https, and http on loopback for a local QStash, are taken", () => {
  for (
    const baseUrl of [
      "http://qstash.example.com",
      "http://10.0.0.7:8080",
      // Looked up in DNS by Deno, not this machine by its name.
      "http://qstash.localhost:8080",
    ]
  ) {
    assert.throws(
      () =>
        qstashPublisher({
          token: "qstash-token",
          publicUrl: "https://relayer.example.com",
          retries: 2,
          baseUrl,
        }),
      (error: unknown) =>
        error instanceof TypeError &&
        error.message.startsWith(
          "Cannot build a QStash publisher as 'baseUrl' is plain http off this machine: the token is sent with every publish",
        ),
      baseUrl,
    );
  }
  for (
    const baseUrl of [
      "https://qstash.example.com",
      "http://127.0.0.1:8080",
      "http://localhost:8080",
    ]
  ) {
    qstashPublisher({
      token: "qstash-token",
      publicUrl: "https://relayer.example.com",
      retries: 2,
      baseUrl,
    });
  }
});

Deno.test("qstashPublisher() refuses a publicUrl or baseUrl with credentials (user:password@), as PUBLIC_URL and QSTASH_URL are: the publish URL holds the public URL, and an unreachable QStash's error quoted it whole, password and all", async () => {
  for (
    const urls of [
      { publicUrl: "https://relayer:s3cr3t@relayer.example.com" },
      {
        publicUrl: "https://relayer.example.com",
        baseUrl: "https://u:s3cr3t@qstash.example.com",
      },
      { publicUrl: "https://relayer@relayer.example.com" },
      // A password with no user name is still one.
      { publicUrl: "https://:s3cr3t@relayer.example.com" },
      {
        publicUrl: "https://relayer.example.com",
        baseUrl: "https://:s3cr3t@qstash.example.com",
      },
    ]
  ) {
    assert.throws(
      () => qstashPublisher({ token: "t", retries: 2, ...urls }),
      (error: unknown) =>
        error instanceof TypeError &&
        /'(publicUrl|baseUrl)' must not carry credentials/.test(
          error.message,
        ) &&
        !error.message.includes("s3cr3t"),
      JSON.stringify(urls),
    );
  }
  // What a publish said before: the refused connection's error, with the URL.
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (closed.addr as Deno.NetAddr).port;
  closed.close();
  const publisher = qstashPublisher({
    token: "qstash-token",
    publicUrl: "https://relayer.example.com",
    retries: 2,
    baseUrl: `http://127.0.0.1:${port}`,
  });
  await assert.rejects(
    publisher.publish({ intentId: "pi_0001", kind: "settle" }),
    (error: unknown) =>
      error instanceof Error &&
      error.message.includes("relayer.example.com/v1/qstash"),
  );
});

Deno.test("qstashPublisher() refuses a baseUrl that holds QStash's API path, a query or a fragment, which /v2/publish/… would be appended after (a publish to …/v2/publish/v2/publish/…, a 404 at every publish)", () => {
  for (
    const baseUrl of [
      "https://qstash.upstash.io/v2/publish",
      "https://qstash.upstash.io/v2/publish/",
      "https://qstash.upstash.io/v2",
      "https://qstash.upstash.io/?token=s3cr3t",
      "https://qstash.upstash.io/#top",
    ]
  ) {
    assert.throws(
      () =>
        qstashPublisher({
          token: "t",
          publicUrl: "https://relayer.example.com",
          retries: 2,
          baseUrl,
        }),
      (error: unknown) =>
        error instanceof TypeError &&
        error.message.includes("'baseUrl' must be QStash's API base") &&
        !error.message.includes("s3cr3t"),
      baseUrl,
    );
  }
  // A region's base, or a proxy's with a path of its own, is fine.
  for (
    const baseUrl of [
      "https://qstash.upstash.io",
      "https://qstash-eu-central-1.upstash.io/",
      "http://127.0.0.1:8080/qstash",
    ]
  ) {
    qstashPublisher({
      token: "t",
      publicUrl: "https://relayer.example.com",
      retries: 2,
      baseUrl,
    });
  }
});

Deno.test("qstashPublisher() sends a deduplication id QStash takes: a colon-free form of the id, equal for equal ids (an intent id may hold colons too)", async () => {
  const qstash = standIn();
  try {
    const publisher = qstashPublisher({
      token: "qstash-token-for-tests",
      publicUrl: "https://relayer.example.test",
      retries: 2,
      baseUrl: qstash.url,
    });
    const job = { intentId: "acct:42:pi_0001", kind: "settle" } as const;
    for (const id of ["acct:42:pi_0001/settle:7", "acct:42:pi_0001/settle:7"]) {
      await publisher.publish(job, { deduplicationId: id });
    }
    await publisher.publish(job, {
      deduplicationId: "acct:42:pi_0001/settle:8",
    });
    const ids = qstash.publishes.map((p) =>
      p.headers.get("upstash-deduplication-id")
    );
    assert.equal(ids.length, 3, "QStash refused a publish");
    assert.equal(ids[0], ids[1]);
    assert.notEqual(ids[0], ids[2]);
  } finally {
    await qstash.server.shutdown();
  }
});

Deno.test("qstashPublisher()'s deduplication id names its destination: equal for one deployment's publishers (a restart, a trailing slash), unequal for two deployments' (staging and production) on one QStash account", async () => {
  const qstash = standIn();
  try {
    const publisher = (publicUrl: string) =>
      qstashPublisher({
        token: "qstash-token-for-tests",
        publicUrl,
        retries: 2,
        baseUrl: qstash.url,
      });
    const job = { intentId: "pi_0001", kind: "settle" } as const;
    const id = "pi_0001/settle:1:1700000000000";
    for (
      const url of [
        "https://relayer.example.test",
        "https://relayer.example.test/",
        "https://RELAYER.example.test:443",
        "https://staging.relayer.example.test",
      ]
    ) {
      await publisher(url).publish(job, { deduplicationId: id });
    }
    const ids = qstash.publishes.map((p) =>
      p.headers.get("upstash-deduplication-id")
    );
    assert.equal(ids.length, 4, "QStash refused a publish");
    assert.match(ids[0] ?? "", /^[0-9a-f]{64}$/);
    assert.equal(ids[0], ids[1], "one deployment's redrive, published again");
    assert.equal(
      ids[0],
      ids[2],
      "its URL spelt otherwise, as the parser reads",
    );
    assert.notEqual(ids[0], ids[3], "two deployments' redrives of one letter");
  } finally {
    await qstash.server.shutdown();
  }
});

Deno.test("a redrive of the same dead letter by staging and by production, on one QStash account within its deduplication window, queues a job to each: production's was answered 202 as a repeat of staging's, its letter removed and no job queued", async () => {
  // One account: the stand-in drops a repeated Upstash-Deduplication-Id
  // whatever the destination, as QStash's documentation does not scope it.
  const taken: Publication[] = [];
  const qstash = startQStashStandIn({
    token: "qstash-token",
    fate: () => "take",
    onPublish: (publication) => taken.push(publication),
    latencyMs: () => 0,
  });
  try {
    const ops = { authorization: `Bearer ${OPS}` };
    const job = { intentId: "pi_0001", kind: "settle" };
    const stores: MemoryStore[] = [];
    for (
      const publicUrl of [
        "https://staging.relayer.example.test",
        "https://relayer.example.test",
      ]
    ) {
      // Staging restored from production's backup: the same letter, its
      // version and its time alike (one clock, one order of writes).
      const store = new MemoryStore();
      stores.push(store);
      await store.createIntent({ id: "pi_0001" });
      const publisher = qstashPublisher({
        token: "qstash-token",
        publicUrl,
        retries: 1,
        baseUrl: qstash.url,
      });
      const app = createApp({
        store,
        sender: new ScriptedSender({}),
        policy: { maxDeliveries: 1 },
        insecureDev: true, // an unsigned delivery makes the dead letter
        opsToken: OPS,
        now: () => 1_700_000_000_000,
        log: () => {},
        redriveTo: {
          publish: async (job, deduplicationId) =>
            void await publisher.publish(job, { deduplicationId }),
        },
      });
      const poisoned = await app.request("/v1/deliveries", {
        method: "POST",
        body: JSON.stringify({ job, delivery: 1 }),
      });
      assert.equal((await poisoned.json()).outcome, "poison");
      const redriven = await app.request(
        "/v1/dead-letters/pi_0001/settle/redrive",
        { method: "POST", headers: ops },
      );
      assert.equal(redriven.status, 202, await redriven.text());
    }
    for (const store of stores) {
      assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
    }
    assert.deepEqual(taken.map((p) => p.url), [
      "https://staging.relayer.example.test/v1/qstash",
      "https://relayer.example.test/v1/qstash",
    ]);
    assert.equal(qstash.deduplicated, 0);
  } finally {
    await qstash.stop();
  }
});

Deno.test("qstashPublisher() fails a publish QStash does not answer within timeoutMs, saying the job may have been taken and that publishing again is harmless, where it waited for as long as QStash did", async () => {
  // A QStash that takes the connection and never answers.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of listener) held.push(conn);
  })();
  try {
    const publisher = qstashPublisher({
      token: "qstash-token",
      publicUrl: "https://relayer.example.com",
      retries: 9,
      baseUrl: `http://127.0.0.1:${listener.addr.port}`,
      timeoutMs: 200,
    });
    const started = Date.now();
    await assert.rejects(
      withTimeout(
        () => publisher.publish({ intentId: "pi_0001", kind: "settle" }),
        5_000,
      ),
      new Error(
        `QStash did not answer the publish of pi_0001/settle within 200 ms: it may have taken the job or not; publishing again is harmless (a job only says "go and look", and a redrive's deduplication id drops the second)`,
      ),
    );
    assert.ok(Date.now() - started < 2_000, "answered near its bound");
    assert.ok(held.length >= 1, "the publish reached the stand-in");
  } finally {
    listener.close();
    for (const conn of held) conn.close();
    await accepting.catch(() => {});
  }
});

Deno.test("qstashPublisher() waits 10 s for QStash's answer when timeoutMs is not given", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  let reached = () => {};
  const publishReached = new Promise<void>((resolve) => reached = resolve);
  const accepting = (async () => {
    for await (const conn of listener) {
      held.push(conn);
      // The publish's first bytes: QStash has it, and answers nothing.
      conn.read(new Uint8Array(1024)).then(reached, () => {});
    }
  })();
  // The bound is the one timer the publish arms (the test above waits out
  // a timeoutMs of 200 for real): its delay is read, and it is fired once
  // QStash has the publish, where waiting it out took 10 s.
  const timers = catchTimers(10_000);
  try {
    const publisher = qstashPublisher({
      token: "qstash-token",
      publicUrl: "https://relayer.example.com",
      retries: 9,
      baseUrl: `http://127.0.0.1:${listener.addr.port}`,
    });
    const started = Date.now();
    const publishing = withTimeout(
      () => publisher.publish({ intentId: "pi_0001", kind: "settle" }),
      15_000,
    );
    publishing.catch(() => {});
    await withTimeout(() => publishReached, 5_000);
    assert.deepEqual(
      timers.armed.filter((ms) => ms !== 15_000 && ms !== 5_000),
      [10_000],
      "the publish's one timer",
    );
    timers.fire();
    await assert.rejects(
      publishing,
      /^Error: QStash did not answer the publish of pi_0001\/settle within 10000 ms: /,
    );
    const waited = Date.now() - started;
    assert.ok(waited < 2_000, `waited ${waited} ms`);
  } finally {
    timers.restore();
    listener.close();
    for (const conn of held) conn.close();
    await accepting.catch(() => {});
  }
});

Deno.test("qstashPublisher() takes a timeoutMs of 1 and of 2147483647, its bounds", () => {
  for (const timeoutMs of [1, 2_147_483_647]) {
    qstashPublisher({
      token: "qstash-token",
      publicUrl: "https://relayer.example.com",
      retries: 9,
      timeoutMs,
    });
  }
});

Deno.test("qstashPublisher() refuses a timeoutMs that is not an integer from 1 to 2147483647", () => {
  for (const timeoutMs of [0, -1, 1.5, 2_147_483_648, Number.NaN]) {
    assert.throws(
      () =>
        qstashPublisher({
          token: "qstash-token",
          publicUrl: "https://relayer.example.com",
          retries: 9,
          timeoutMs,
        }),
      new RangeError(
        `Cannot build a QStash publisher as 'timeoutMs' must be an integer from 1 to 2147483647 (milliseconds): current value is ${timeoutMs}`,
      ),
    );
  }
});

Deno.test("qstashPublisher() aborts a publish past timeoutMs: QStash's end sees the connection closed, not left open behind the caller", async () => {
  // A QStash that reads the request and never answers; it notes when the
  // publisher's end closes the connection.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  let closed = 0;
  const accepting = (async () => {
    for await (const conn of listener) {
      held.push(conn);
      (async () => {
        const buffer = new Uint8Array(4096);
        try {
          while (await conn.read(buffer) !== null);
        } catch {
          // A reset closes it too.
        }
        closed++;
      })();
    }
  })();
  try {
    const publisher = qstashPublisher({
      token: "qstash-token",
      publicUrl: "https://relayer.example.com",
      retries: 9,
      baseUrl: `http://127.0.0.1:${listener.addr.port}`,
      timeoutMs: 200,
    });
    await assert.rejects(
      withTimeout(
        () => publisher.publish({ intentId: "pi_0001", kind: "settle" }),
        5_000,
      ),
      /did not answer the publish of pi_0001\/settle within 200 ms/,
    );
    assert.equal(held.length, 1, "the publish reached the stand-in");
    const deadline = Date.now() + 3_000;
    while (closed === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(closed, 1, "the request was still open 3 s after its bound");
  } finally {
    listener.close();
    closeEach(held);
    await accepting.catch(() => {});
  }
});

/** A QStash whose every publish answers 429 with `headers` and `body`. */
function rateLimiting(headers: () => Record<string, string>, body = "") {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      await req.body?.cancel();
      return new Response(body, { status: 429, headers: headers() });
    },
  );
  return { server, url: `http://127.0.0.1:${server.addr.port}` };
}

Deno.test("qstashPublisher() fails a publish QStash rate-limits saying so, which limit, and when to try again where QStash said, with the wait as retryAfterMs", async () => {
  const job = { intentId: "pi_0001", kind: "settle" } as const;
  const nowS = () => Math.floor(Date.now() / 1000);
  const cases: {
    headers: () => Record<string, string>;
    body?: string;
    message: RegExp;
    waitS?: number;
    /** The wait exactly, where no clock is read. */
    waitMs?: number;
  }[] = [
    {
      // The burst limit, its reset in unix seconds.
      headers: () => ({
        "Burst-RateLimit-Limit": "100",
        "Burst-RateLimit-Remaining": "0",
        "Burst-RateLimit-Reset": String(nowS() + 30),
      }),
      message:
        /^QStash did not take the job pi_0001\/settle \(HTTP 429\): rate-limited by QStash's per-second burst limit; try again in (29|30|31) s$/,
      waitS: 30,
    },
    {
      // The daily limit, its reset in unix milliseconds.
      headers: () => ({
        "RateLimit-Limit": "1000",
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": String(Date.now() + 3_600_000),
      }),
      message:
        /^QStash did not take the job pi_0001\/settle \(HTTP 429\): rate-limited by QStash's daily message limit; try again in (3599|3600) s$/,
      waitS: 3600,
    },
    {
      // Retry-After first, whatever the limit's reset says.
      headers: () => ({
        "Retry-After": "120",
        "Burst-RateLimit-Reset": String(nowS() + 1),
      }),
      body: '{"error":"too many requests"}',
      message:
        /^QStash did not take the job pi_0001\/settle \(HTTP 429\): rate-limited by QStash's per-second burst limit; try again in 120 s \(QStash said: \{"error":"too many requests"\}\)$/,
      waitS: 120,
    },
    {
      // Fractional seconds, outside RFC 9110's digits, are still seconds:
      // not a date (V8's Date.parse reads "1.5" as one, long past, 0 s).
      headers: () => ({ "Retry-After": "1.5" }),
      message:
        /^QStash did not take the job pi_0001\/settle \(HTTP 429\): rate-limited by QStash's rate limit; try again in 2 s$/,
      waitS: 1.5,
    },
    {
      // Neither seconds nor an HTTP date: the limit's reset is read instead.
      headers: () => ({
        "Retry-After": "2-3",
        "Burst-RateLimit-Reset": String(nowS() + 30),
      }),
      message:
        /^QStash did not take the job pi_0001\/settle \(HTTP 429\): rate-limited by QStash's per-second burst limit; try again in (29|30|31) s$/,
      waitS: 30,
    },
    {
      // An HTTP date already past: try again now, not a negative wait.
      headers: () => ({
        "Retry-After": new Date(Date.now() - 60_000).toUTCString(),
      }),
      message:
        /^QStash did not take the job pi_0001\/settle \(HTTP 429\): rate-limited by QStash's rate limit; try again in 1 s$/,
      waitMs: 0,
    },
    {
      // A fraction of a millisecond is waited for whole: never less than
      // QStash asked.
      headers: () => ({ "Retry-After": "2.0005" }),
      message:
        /^QStash did not take the job pi_0001\/settle \(HTTP 429\): rate-limited by QStash's rate limit; try again in 3 s$/,
      waitMs: 2001,
    },
    {
      // Tenths read as decimals, not in floating point: 16.1 × 1000 is
      // 16,100.000000000002, which rounded up asked a millisecond more.
      headers: () => ({ "Retry-After": "16.1" }),
      message:
        /^QStash did not take the job pi_0001\/settle \(HTTP 429\): rate-limited by QStash's rate limit; try again in 17 s$/,
      waitMs: 16_100,
    },
    {
      headers: () => ({ "Retry-After": "4.07" }),
      message:
        /^QStash did not take the job pi_0001\/settle \(HTTP 429\): rate-limited by QStash's rate limit; try again in 5 s$/,
      waitMs: 4070,
    },
    {
      // An HTTP date.
      headers: () => ({
        "Retry-After": new Date(Date.now() + 60_000).toUTCString(),
      }),
      message:
        /^QStash did not take the job pi_0001\/settle \(HTTP 429\): rate-limited by QStash's rate limit; try again in (59|60|61) s$/,
      waitS: 60,
    },
    {
      headers: () => ({}),
      message:
        /^QStash did not take the job pi_0001\/settle \(HTTP 429\): rate-limited by QStash's rate limit, without saying when to try again; try again later$/,
    },
  ];
  for (const { headers, body, message, waitS, waitMs } of cases) {
    const qstash = rateLimiting(headers, body);
    try {
      const publisher = qstashPublisher({
        token: "qstash-token",
        publicUrl: "https://relayer.example.com",
        retries: 9,
        baseUrl: qstash.url,
      });
      const error = await publisher.publish(job).then(
        () => assert.fail("a 429 was taken"),
        (error: Error & { retryAfterMs?: unknown }) => error,
      );
      assert.match(error.message, message);
      if (waitMs !== undefined) {
        assert.equal(error.retryAfterMs, waitMs);
      } else if (waitS === undefined) {
        assert.equal(error.retryAfterMs, undefined);
      } else {
        assert.ok(
          typeof error.retryAfterMs === "number" &&
            Math.abs(error.retryAfterMs - waitS * 1000) <= 2_000,
          `retryAfterMs ${String(error.retryAfterMs)}`,
        );
      }
    } finally {
      await qstash.server.shutdown();
    }
  }
});

Deno.test("POST /v1/jobs and a redrive answer 503 with QStash's wait as Retry-After when it rate-limits the publish (5 s when it does not say)", async () => {
  let retryAfter: string | undefined = "120";
  const qstash = rateLimiting(() =>
    retryAfter === undefined ? {} : { "Retry-After": retryAfter }
  );
  try {
    const publisher = qstashPublisher({
      token: "qstash-token",
      publicUrl: "https://relayer.example.com",
      retries: 1,
      baseUrl: qstash.url,
    });
    const store = new MemoryStore();
    await store.createIntent({ id: "pi_0001" });
    const lines: string[] = [];
    const app = createApp({
      store,
      sender: new ScriptedSender({}),
      policy: { maxDeliveries: 1 },
      insecureDev: true, // an unsigned delivery makes the dead letter
      opsToken: OPS,
      log: (line) => lines.push(line),
      enqueue: async (job) => void await publisher.publish(job),
      redriveTo: {
        publish: async (job, deduplicationId) =>
          void await publisher.publish(job, { deduplicationId }),
      },
    });
    const ops = { authorization: `Bearer ${OPS}` };
    const job = { intentId: "pi_0001", kind: "settle" };
    const posted = await app.request("/v1/jobs", {
      method: "POST",
      headers: ops,
      body: JSON.stringify(job),
    });
    assert.equal(posted.status, 503);
    assert.equal(posted.headers.get("retry-after"), "120");
    assert.equal(
      (await posted.json()).type,
      "urn:relayer:problem:enqueue-failed",
    );
    assert.match(
      lines.at(-1) ?? "",
      /rate-limited by QStash's rate limit; try again in 120 s/,
    );

    const poisoned = await app.request("/v1/deliveries", {
      method: "POST",
      body: JSON.stringify({ job, delivery: 1 }),
    });
    assert.equal((await poisoned.json()).outcome, "poison");
    const redrive = () =>
      app.request("/v1/dead-letters/pi_0001/settle/redrive", {
        method: "POST",
        headers: ops,
      });
    const limited = await redrive();
    assert.equal(limited.status, 503);
    assert.equal(limited.headers.get("retry-after"), "120");
    assert.equal(
      (await limited.json()).type,
      "urn:relayer:problem:redrive-failed",
    );
    // No wait said: the routes' own.
    retryAfter = undefined;
    const unsaid = await redrive();
    assert.equal(unsaid.status, 503);
    assert.equal(unsaid.headers.get("retry-after"), "5");
    await unsaid.body?.cancel();
    assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
  } finally {
    await qstash.server.shutdown();
  }
});

Deno.test("qstashPublisher() writes nothing to the console: a publish refused, rate-limited, unreachable or late fails with its error alone", async () => {
  let status = 500;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      await req.body?.cancel();
      if (status === 0) {
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      return Response.json({ error: "no" }, { status: status || 200 });
    },
  );
  // Replaced for the test's span, to see what the publisher writes there.
  const terminal = console;
  const written: string[] = [];
  const methods = ["error", "warn", "log", "info", "debug"] as const;
  const kept = methods.map((method) => terminal[method]);
  for (const method of methods) {
    terminal[method] = (...args: unknown[]) =>
      void written.push(`${method}: ${args.map(String).join(" ")}`);
  }
  try {
    const publisher = (baseUrl: string) =>
      qstashPublisher({
        token: "qstash-token",
        publicUrl: "https://relayer.example.com",
        retries: 9,
        baseUrl,
        timeoutMs: 200,
      });
    const url = `http://127.0.0.1:${server.addr.port}`;
    const job = { intentId: "pi_0001", kind: "settle" } as const;
    await assert.rejects(publisher(url).publish(job), /HTTP 500/);
    status = 429;
    await assert.rejects(publisher(url).publish(job), /HTTP 429/);
    status = 0; // answered after the bound
    await assert.rejects(publisher(url).publish(job), /within 200 ms/);
    // Nothing listens on port 9 (discard) here.
    await assert.rejects(
      publisher("http://127.0.0.1:9").publish(job),
      /Error: QStash did not answer the publish of pi_0001\/settle \(.+\): it may have taken the job or not/,
    );
  } finally {
    methods.forEach((method, i) => terminal[method] = kept[i]!);
    await server.shutdown();
  }
  assert.deepEqual(written, []);
});

/**
 * A QStash on a raw loopback socket (`Deno.serve` cannot drop a
 * connection after reading a request): it takes every publish it reads
 * whole and answers it `201`, keeping the connection alive, except the
 * `dieAt`-th, which it takes and whose connection then dies unanswered (a
 * proxy's idle timeout, a restart): the answer never comes.
 */
function dyingQStash(dieAt: number) {
  let taken = 0;
  return rawHttpServer((): RawAnswer =>
    ++taken === dieAt ? "drop" : {
      status: "201 Created",
      body: JSON.stringify({ messageId: `msg_${taken}` }),
    }
  );
}

Deno.test("qstashPublisher() sends a publish once: one whose kept-alive connection dies after QStash read it whole fails as maybe taken, never sent again (a POST /v1/jobs, without a deduplication id, would be a second message)", async () => {
  const qstash = dyingQStash(2);
  try {
    const publisher = qstashPublisher({
      token: "qstash-token",
      publicUrl: "https://relayer.example.com",
      retries: 9,
      baseUrl: qstash.url,
    });
    // The first publish leaves a kept-alive connection: the second rides it.
    assert.deepEqual(
      await publisher.publish({ intentId: "pi_0001", kind: "settle" }),
      { messageId: "msg_1" },
    );
    const second = publisher.publish({ intentId: "pi_0002", kind: "settle" });
    const outcome = await second.then(
      (answer) => `answered ${JSON.stringify(answer)}`,
      (error: Error) => error.message,
    );
    // Deno's fetch sent a string body again, on a new connection, and
    // answered with the answer to that copy: QStash would hold two.
    assert.deepEqual(
      qstash.read.map((r) => `${r.connection} ${r.body}`),
      [
        `1 {"intentId":"pi_0001","kind":"settle"}`,
        `1 {"intentId":"pi_0002","kind":"settle"}`,
      ],
      outcome,
    );
    assert.match(
      outcome,
      /^QStash did not answer the publish of pi_0002\/settle \(.+\): it may have taken the job or not; publishing again is harmless/,
    );
  } finally {
    await qstash.close();
  }
});

Deno.test("qstashPublisher() says what to do when QStash refuses its token (401): set QSTASH_TOKEN to a token of that QStash, as publishing again will not help; the token is not repeated", async () => {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      await req.body?.cancel();
      return Response.json({ error: "Unauthorized" }, { status: 401 });
    },
  );
  try {
    const token = "a-token-of-another-account-0123";
    const url = `http://127.0.0.1:${server.addr.port}`;
    const publisher = qstashPublisher({
      token,
      publicUrl: "https://relayer.example.com",
      retries: 9,
      baseUrl: url,
    });
    const error = await publisher.publish({
      intentId: "pi_0001",
      kind: "settle",
    }).then(() => null, (error: Error) => error);
    assert.equal(
      error?.message,
      `QStash did not take the job pi_0001/settle (HTTP 401): {"error":"Unauthorized"}; QStash refused QSTASH_TOKEN: set it to the token the QStash console shows for the API at ${url} (QSTASH_URL), as publishing again will not help until then`,
    );
  } finally {
    await server.shutdown();
  }
});

Deno.test("qstashPublisher() reads at most 64 KiB of QStash's answer: one that never ends fails the publish at once, naming the cap, not when timeoutMs or memory run out", async () => {
  const chunk = new Uint8Array(64 * 1024).fill(0x20);
  let served = 0;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      await req.body?.cancel();
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          // The test's own bound, where nothing else ends the read.
          if (served >= 64 * 2 ** 20) {
            controller.error(new Error("64 MiB served"));
            return;
          }
          served += chunk.byteLength;
          controller.enqueue(chunk);
        },
      });
      return new Response(body, {
        headers: { "content-type": "application/json" },
      });
    },
  );
  try {
    const publisher = qstashPublisher({
      token: "qstash-token",
      publicUrl: "https://relayer.example.com",
      retries: 9,
      baseUrl: `http://127.0.0.1:${server.addr.port}`,
      timeoutMs: 20_000,
    });
    const started = Date.now();
    await assert.rejects(
      withTimeout(
        () => publisher.publish({ intentId: "pi_0001", kind: "settle" }),
        25_000,
      ),
      new Error(
        `QStash's answer to the publish of pi_0001/settle (HTTP 200) is over 65536 bytes (64 KiB), the most read of it: it may have taken the job or not; publishing again is harmless (a job only says "go and look", and a redrive's deduplication id drops the second)`,
      ),
    );
    assert.ok(Date.now() - started < 5_000, "answered at the cap");
    assert.ok(served < 32 * 2 ** 20, `served ${served} bytes`);
  } finally {
    await server.shutdown();
  }
});
