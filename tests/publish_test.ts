/**
 * Publishing right by construction: with `QSTASH_TOKEN`, the service
 * publishes new and redriven jobs through QStash's API (here a local
 * stand-in that records each publish) with the retries the start-up check
 * accepted and the failure callback. No test reaches the internet.
 *
 * @module
 */

import assert from "node:assert/strict";
import { openService } from "../main.ts";
import { ConfigError, loadConfig } from "../webhook/config.ts";
import { qstashPublisher } from "../webhook/qstash_publisher.ts";
import { withTimeout } from "./_timeout.ts";

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
  assert.ok(loadConfig({ ...publishing, RELAYER_INSECURE_DEV: "1" }));
  // And the queue's limit is checked against the policy whenever it publishes.
  assert.throws(
    () =>
      loadConfig({
        ...publishing,
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

Deno.test("qstashPublisher() never repeats its token in an error, though the API's answer echoes it", async () => {
  const token = "QSTOK/0123456789abcdef==";
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req) =>
      new Response(
        // Written as some JSON writers do, with "/" escaped.
        JSON.stringify({
          error: `unauthorized, you sent ${req.headers.get("authorization")}`,
        }).replaceAll("/", "\\/"),
        { status: 401, headers: { "content-type": "application/json" } },
      ),
  );
  try {
    const publisher = qstashPublisher({
      token,
      publicUrl: "https://relayer.example.com",
      retries: 9,
      baseUrl: `http://127.0.0.1:${server.addr.port}`,
    });
    await assert.rejects(
      publisher.publish({ intentId: "pi_0001", kind: "settle" }),
      (error: unknown) =>
        error instanceof Error && !error.message.includes(token) &&
        !error.message.includes("0123456789abcdef") &&
        error.message.startsWith(
          "QStash did not take the job pi_0001/settle (HTTP 401): ",
        ) && error.message.includes("Bearer <QSTASH_TOKEN>"),
    );
  } finally {
    await server.shutdown();
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
