/**
 * What the operator on call reads in the log: a queue whose deliveries are
 * all refused (a PUBLIC_URL that does not match the URL QStash calls, a
 * rotated secret, a server clock off by minutes) must show in the log,
 * bounded under a flood; and an operator's redrive or discard of a dead
 * letter, the record of a payment, leaves a line naming it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import {
  envelope,
  failureCallback,
  fakeGoogle,
  PUBSUB,
  QSTASH,
  signHmac,
  signQStash,
} from "./_signing.ts";

const SECRET = "webhook-secret-for-tests";
const OPS = "ops-token-for-tests";
const ops = { authorization: `Bearer ${OPS}` };
const job = { intentId: "pi_0001", kind: "settle" };

function app(now: { ms: number }, lines: string[], store = new MemoryStore()) {
  return createApp({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 1 },
    now: () => now.ms,
    random: () => 0,
    qstash: QSTASH,
    webhookSecret: SECRET,
    opsToken: OPS,
    redriveTo: { publish: () => Promise.resolve() },
    log: (line) => void lines.push(line),
  });
}

Deno.test("createApp() logs a refused delivery: a QStash token signed for another URL is said in the log, not only in the answer", async () => {
  const lines: string[] = [];
  const now = { ms: Date.now() };
  const webhook = app(now, lines);
  const body = JSON.stringify(job);
  // QStash's own token, for the URL QStash calls behind a proxy.
  const signature = await signQStash(body, {
    url: "https://proxy.example.test/v1/qstash",
  });
  const res = await webhook.request("/v1/qstash", {
    method: "POST",
    body,
    headers: { "upstash-signature": signature },
  });
  assert.equal(res.status, 401);
  await res.body?.cancel();
  assert.equal(lines.length, 1, lines.join("\n"));
  assert.match(lines[0]!, /POST \/v1\/qstash/);
  assert.match(lines[0]!, /401/);
  assert.match(lines[0]!, /signed for https:\/\/proxy\.example\.test/);
});

Deno.test("createApp() logs refused requests at most once a minute per route, with the count, and never the secret", async () => {
  const lines: string[] = [];
  const now = { ms: 1_764_504_000_000 };
  const webhook = app(now, lines);
  const body = JSON.stringify({ job });
  const forged = () =>
    webhook.request("/v1/deliveries", {
      method: "POST",
      body,
      headers: {
        "x-signature": signHmac("not-the-secret-000", body, now.ms / 1000),
      },
    });
  for (let i = 0; i < 500; i++) {
    const res = await forged();
    assert.equal(res.status, 401);
    await res.body?.cancel();
  }
  // A flood of forgeries is one line, not 500.
  assert.equal(lines.length, 1, lines.join("\n"));
  assert.match(lines[0]!, /POST \/v1\/deliveries/);
  assert.match(lines[0]!, /does not verify/);
  // A minute later, the next refusal says how many came meanwhile.
  now.ms += 60_000;
  await (await forged()).body?.cancel();
  assert.equal(lines.length, 2, lines.join("\n"));
  assert.match(lines[1]!, /500 refused/);
  // A wrong ops token: its own route, its own line.
  const res = await webhook.request("/v1/dead-letters", {
    headers: { authorization: "Bearer guessing-the-token-000" },
  });
  assert.equal(res.status, 401);
  await res.body?.cancel();
  assert.equal(lines.length, 3, lines.join("\n"));
  assert.match(lines[2]!, /GET \/v1\/dead-letters/);
  for (const line of lines) {
    assert.ok(!line.includes(SECRET) && !line.includes(OPS), line);
    assert.ok(!line.includes("guessing-the-token"), line);
  }
});

Deno.test("createApp() logs no line of a refused request with an id an attacker chose in its path", async () => {
  const lines: string[] = [];
  const webhook = app({ ms: 1_764_504_000_000 }, lines);
  const res = await webhook.request(
    "/v1/intents/pi_0001%0Aworker%20%20pi_0002%2Fsettle",
    { headers: { authorization: "Bearer wrong-token-000000000" } },
  );
  assert.equal(res.status, 401);
  await res.body?.cancel();
  assert.equal(lines.length, 1);
  assert.ok(!lines[0]!.includes("\n"), lines[0]);
  assert.ok(!lines[0]!.includes("pi_0002"), lines[0]);
});

Deno.test("createApp() logs an operator's redrive and discard of a dead letter, naming the job", async () => {
  const lines: string[] = [];
  const store = new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  const now = { ms: 1_764_504_000_000 };
  const webhook = app(now, lines, store);
  // pi_0001 is still created; pi_0404 is gone: both jobs are poisoned.
  for (const intentId of ["pi_0001", "pi_0404"]) {
    const body = JSON.stringify({
      job: { intentId, kind: "settle" },
      delivery: 1,
    });
    const res = await webhook.request("/v1/deliveries", {
      method: "POST",
      body,
      headers: { "x-signature": signHmac(SECRET, body, now.ms / 1000) },
    });
    assert.equal((await res.json()).outcome, "poison");
  }
  lines.length = 0;
  const redriven = await webhook.request(
    "/v1/dead-letters/pi_0001/settle/redrive",
    { method: "POST", headers: ops },
  );
  assert.equal(redriven.status, 202);
  await redriven.body?.cancel();
  assert.equal(lines.length, 1, "a redrive leaves a line");
  assert.match(lines[0]!, /redriv.*pi_0001\/settle/);
  const discarded = await webhook.request("/v1/dead-letters/pi_0404/settle", {
    method: "DELETE",
    headers: ops,
  });
  assert.equal(discarded.status, 200);
  await discarded.body?.cancel();
  assert.equal(lines.length, 2, "a discard leaves a line");
  assert.match(lines[1]!, /discard.*pi_0404\/settle/);
  // What the letter said goes with it into the log: it is gone from the store.
  assert.match(lines[1]!, /job dropped, intent not found/);
});

Deno.test("createApp() logs an operator's intent and job, naming them", async () => {
  const lines: string[] = [];
  const enqueued: unknown[] = [];
  const webhook = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    opsToken: OPS,
    enqueue: (job) => Promise.resolve(void enqueued.push(job)),
    log: (line) => void lines.push(line),
  });
  const created = await webhook.request("/v1/intents", {
    method: "POST",
    headers: ops,
    body: JSON.stringify({ id: "pi_0001", state: "authorized" }),
  });
  assert.equal(created.status, 201);
  const queued = await webhook.request("/v1/jobs", {
    method: "POST",
    headers: ops,
    body: JSON.stringify(job),
  });
  assert.equal(queued.status, 202);
  assert.deepEqual(lines, [
    "relayer intent pi_0001 created by an operator: authorized, hold pending",
    "relayer job pi_0001/settle queued by an operator",
  ]);
});

Deno.test("createApp() logs when the store is ready again after /readyz found it failing, with how long, so the log says when an outage ended", async () => {
  const lines: string[] = [];
  const now = { ms: 1_764_504_000_000 };
  const memory = new MemoryStore();
  let down: "read" | "write" | undefined;
  const store = new Proxy(memory, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (
        (key === "getIntent" && down === "read") ||
        (key === "admit" && down === "write")
      ) {
        return () => Promise.reject(new Error("database is locked"));
      }
      return value.bind(target);
    },
  });
  const webhook = app(now, lines, store);
  const ready = async () => {
    const res = await webhook.request("/readyz");
    await res.body?.cancel();
    now.ms += 1_000;
    return res.status;
  };
  assert.equal(await ready(), 200);
  down = "read";
  assert.equal(await ready(), 503);
  now.ms += 24_000;
  assert.equal(await ready(), 503);
  down = undefined;
  assert.equal(await ready(), 200);
  assert.equal(await ready(), 200);
  down = "write";
  assert.equal(await ready(), 503);
  down = undefined;
  assert.equal(await ready(), 200);
  assert.deepEqual(lines, [
    "relayer not ready: the store failed a read: Error: database is locked",
    "relayer ready again: the store answers a read (it failed for 26s)",
    "relayer not ready: the store refused a write: Error: database is locked",
    "relayer ready again: the store takes a write (it refused for 1s)",
  ]);
});

Deno.test("createApp() logs a store probe that keeps failing the same way once a minute, with the count, not on every probe: /readyz polled each second through a long outage", async () => {
  const lines: string[] = [];
  const now = { ms: 1_764_504_000_000 };
  const memory = new MemoryStore();
  let error = "database is locked";
  const store = new Proxy(memory, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (key === "getIntent") {
        return () => Promise.reject(new Error(error));
      }
      return value.bind(target);
    },
  });
  const webhook = app(now, lines, store);
  // 150 probes a second apart: the first, then one a minute.
  for (let i = 0; i < 150; i++) {
    const res = await webhook.request("/readyz");
    assert.equal(res.status, 503);
    await res.body?.cancel();
    now.ms += 1_000;
  }
  // Another error is said at once, and the probes unsaid since the last
  // line are said as what they were: failures of the error it names, not
  // of the new one (an operator would read 30 refused connections).
  error = "connection refused";
  const res = await webhook.request("/readyz");
  await res.body?.cancel();
  assert.deepEqual(lines, [
    "relayer not ready: the store failed a read: Error: database is locked",
    "relayer not ready: the store failed a read: Error: database is locked (and 59 more probe(s) since the last line)",
    "relayer not ready: the store failed a read: Error: database is locked (and 59 more probe(s) since the last line)",
    "relayer not ready: the store failed a read: Error: connection refused (after 29 more probe(s) that failed as the last line said)",
  ]);
});

Deno.test("createApp() says in the log of a delivery signed with another secret or key what the operator sets, and leaves it out of the answer", async () => {
  const lines: string[] = [];
  const now = { ms: Date.now() };
  const webhook = app(now, lines);
  const body = JSON.stringify({ job });
  // The sender still signs with the secret a deploy replaced.
  const hmac = await webhook.request("/v1/deliveries", {
    method: "POST",
    body,
    headers: {
      "x-signature": signHmac(
        "the-secret-before-the-deploy",
        body,
        Math.floor(now.ms / 1000),
      ),
    },
  });
  assert.equal(hmac.status, 401);
  const answer = await hmac.text();
  assert.equal(lines.length, 1, lines.join("\n"));
  assert.match(lines[0]!, /does not verify/);
  assert.match(lines[0]!, /WEBHOOK_SECRET_NEXT/);
  assert.match(lines[0]!, /runbook/);
  assert.ok(!answer.includes("WEBHOOK_SECRET_NEXT"), answer);
  assert.ok(!lines[0]!.includes(SECRET), lines[0]);
  // QStash's token, signed with keys this service was not given.
  const qstash = await webhook.request("/v1/qstash", {
    method: "POST",
    body: JSON.stringify(job),
    headers: {
      "upstash-signature": await signQStash(JSON.stringify(job), {
        key: "sig_of_another_account_000000",
      }),
    },
  });
  assert.equal(qstash.status, 401);
  const refused = await qstash.text();
  assert.equal(lines.length, 2, lines.join("\n"));
  assert.match(lines[1]!, /POST \/v1\/qstash refused 401/);
  assert.match(
    lines[1]!,
    /QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY/,
  );
  assert.ok(!refused.includes("QSTASH_CURRENT_SIGNING_KEY"), refused);
  // A header that is not a signature at all says nothing of secrets.
  now.ms += 60_000;
  const bare = await webhook.request("/v1/deliveries", {
    method: "POST",
    body,
  });
  assert.equal(bare.status, 401);
  await bare.body?.cancel();
  assert.equal(lines.length, 3, lines.join("\n"));
  assert.match(lines[2]!, /missing or malformed/);
  assert.ok(!lines[2]!.includes("WEBHOOK_SECRET_NEXT"), lines[2]);
});

Deno.test("createApp() says in the log which check a Google-signed push failed (audience, service account, clock), never the token's own claims, and leaves it out of the answer", async () => {
  const google = await fakeGoogle();
  const forger = await fakeGoogle();
  const lines: string[] = [];
  const now = { ms: Date.now() };
  const webhook = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    now: () => now.ms,
    random: () => 0,
    pubsub: { ...PUBSUB, jwks: google.jwks },
    log: (line) => void lines.push(line),
  });
  const push = async (token: string) => {
    const res = await webhook.request("/v1/pubsub", {
      method: "POST",
      body: envelope(job),
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(res.status, 401);
    const answer = await res.text();
    assert.ok(!/PUBSUB_|If every/.test(answer), answer);
    now.ms += 60_000; // the next refusal gets its own line
    return lines.at(-1) ?? "";
  };
  // Another account asked Google for a token for this audience: anyone can.
  const other = "someone-else@elsewhere.iam.gserviceaccount.com";
  const account = await push(await google.token({ email: other }));
  assert.match(account, /PUBSUB_SERVICE_ACCOUNT/);
  assert.ok(account.includes(PUBSUB.serviceAccount), account);
  assert.ok(!account.includes(other), account); // the caller's, not ours
  assert.ok(!/PUBSUB_AUDIENCE/.test(account), account);
  const unverified = await push(await google.token({ email_verified: false }));
  assert.match(unverified, /PUBSUB_SERVICE_ACCOUNT/);
  // The subscription's audience is not the one the service was given.
  const elsewhere = "https://relayer.example.test/v1/pubsub/";
  const audience = await push(await google.token({ aud: elsewhere }));
  assert.match(audience, /PUBSUB_AUDIENCE/);
  assert.ok(audience.includes(`"${PUBSUB.audience}"`), audience);
  assert.ok(!audience.includes(`"${elsewhere}"`), audience);
  assert.ok(!/PUBSUB_SERVICE_ACCOUNT/.test(audience), audience);
  // Google's token, past its exp by this server's clock.
  const nowS = Math.floor(Date.now() / 1000);
  const clock = await push(
    await google.token({ iat: nowS - 7200, exp: nowS - 3600 }),
  );
  assert.match(clock, /clock/);
  // A token no key of Google's signed says nothing of the settings.
  const forged = await push(await forger.token());
  assert.match(forged, /POST \/v1\/pubsub refused 401/);
  assert.ok(!/PUBSUB_|If every|clock/.test(forged), forged);
  assert.equal(lines.length, 5, lines.join("\n"));
});

Deno.test("createApp()'s log names a Pub/Sub audience that carries a verification token in its query (the push endpoint's URL, as Google's older push samples made it) by its scheme, host and path: the token is never in the line", async () => {
  const google = await fakeGoogle();
  const lines: string[] = [];
  const bare = "https://relayer.example.test/v1/pubsub";
  const verification = "push-verify-9f3a61c0d2";
  for (
    const audience of [
      `${bare}?token=${verification}`,
      `${bare}#${verification}`,
      `https://relay:${verification}@relayer.example.test/v1/pubsub`,
    ]
  ) {
    const webhook = createApp({
      store: new MemoryStore(),
      sender: new ScriptedSender({}),
      random: () => 0,
      pubsub: { ...PUBSUB, audience, jwks: google.jwks },
      log: (line) => void lines.push(line),
    });
    const res = await webhook.request("/v1/pubsub", {
      method: "POST",
      body: envelope(job),
      // The service account's own token, for the audience without its query.
      headers: { authorization: `Bearer ${await google.token({ aud: bare })}` },
    });
    assert.equal(res.status, 401);
    const answer = await res.text();
    const line = lines.at(-1) ?? "";
    assert.match(line, /another audience than this route's/, audience);
    assert.ok(
      line.includes(
        `"${bare}" (its credentials, query and fragment left unsaid)`,
      ),
      line,
    );
    for (const said of [line, answer]) {
      assert.ok(!said.includes(verification), `${audience}: ${said}`);
    }
  }
  assert.equal(lines.length, 3, lines.join("\n"));
});

Deno.test("createApp() logs a QStash token ours for another URL, or out of time by this server's clock, in a minute a forger's unsigned request began: the pace is per route and per kind of refusal, each line counting its own kind", async () => {
  const lines: string[] = [];
  const now = { ms: 1_764_504_000_000 };
  const webhook = app(now, lines);
  const body = JSON.stringify(job);
  const post = async (signature?: string) => {
    const res = await webhook.request("/v1/qstash", {
      method: "POST",
      body,
      headers: signature === undefined ? {} : {
        "upstash-signature": signature,
      },
    });
    assert.equal(res.status, 401);
    await res.body?.cancel();
  };
  // A forger's unsigned request at the start of the minute.
  await post();
  assert.equal(lines.length, 1, lines.join("\n"));
  assert.match(lines[0]!, /POST \/v1\/qstash refused 401: .*missing/);
  // QStash's own token, for the URL QStash calls behind a proxy.
  const proxy = "https://proxy.example.test/v1/qstash";
  await post(await signQStash(body, { url: proxy }));
  assert.equal(lines.length, 2, lines.join("\n"));
  assert.match(lines[1]!, /refused 401: .*signed for https:\/\/proxy/);
  // A forger's token under keys not ours, then QStash's past its exp by
  // this server's clock: each its own line, the clock's hint said.
  await post(await signQStash(body, { key: "sig_of_another_account_000000" }));
  const nowS = Math.floor(Date.now() / 1000);
  await post(await signQStash(body, { nowS: nowS - 3600 }));
  assert.equal(lines.length, 4, lines.join("\n"));
  assert.match(lines[2]!, /QSTASH_CURRENT_SIGNING_KEY/);
  assert.match(lines[3]!, /this server's clock is off/);
  // A flood of each within the minute adds nothing.
  for (let i = 0; i < 100; i++) await post();
  await post(await signQStash(body, { url: proxy }));
  assert.equal(lines.length, 4, lines.join("\n"));
  // A minute later, each line counts its own kind only.
  now.ms += 60_000;
  await post(await signQStash(body, { url: proxy }));
  await post();
  assert.deepEqual(lines.slice(4).map((line) => line.split(": ")[0]), [
    "relayer POST /v1/qstash refused 401 (2 refused for another URL or audience since the last such line)",
    "relayer POST /v1/qstash refused 401 (101 refused for a missing or unverified credential since the last such line)",
  ]);
});

Deno.test("createApp() logs a Google-signed push for another audience or service account, or out of time, in a minute a forger's push began", async () => {
  const google = await fakeGoogle();
  const forger = await fakeGoogle();
  const lines: string[] = [];
  const webhook = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    now: () => 1_764_504_000_000,
    random: () => 0,
    pubsub: { ...PUBSUB, jwks: google.jwks },
    log: (line) => void lines.push(line),
  });
  const push = async (token?: string) => {
    const res = await webhook.request("/v1/pubsub", {
      method: "POST",
      body: envelope(job),
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    });
    assert.equal(res.status, 401);
    await res.body?.cancel();
  };
  await push();
  await push(await forger.token());
  assert.equal(lines.length, 1, lines.join("\n"));
  const elsewhere = "https://relayer.example.test/v1/pubsub/";
  await push(await google.token({ aud: elsewhere }));
  const nowS = Math.floor(Date.now() / 1000);
  await push(await google.token({ iat: nowS - 7200, exp: nowS - 3600 }));
  // Another account's token for this audience: anyone can ask Google.
  const other = "someone-else@elsewhere.iam.gserviceaccount.com";
  await push(await google.token({ email: other }));
  assert.equal(lines.length, 4, lines.join("\n"));
  assert.match(lines[1]!, /PUBSUB_AUDIENCE/);
  assert.match(lines[2]!, /this server's clock is off/);
  assert.match(lines[3]!, /PUBSUB_SERVICE_ACCOUNT/);
});

Deno.test("createApp() logs a wrong secret, a timestamp in milliseconds or out of time on POST /v1/deliveries in a minute a forger's unsigned request began, and a flood of forgeries of every shape and size writes a line per kind at most", async () => {
  const lines: string[] = [];
  const now = { ms: 1_764_504_000_000 };
  const webhook = app(now, lines);
  const body = JSON.stringify({ job });
  const post = async (signature?: string, sent = body) => {
    const res = await webhook.request("/v1/deliveries", {
      method: "POST",
      body: sent,
      headers: signature === undefined ? {} : { "x-signature": signature },
    });
    assert.equal(res.status, 401);
    await res.body?.cancel();
  };
  await post();
  await post(signHmac("a-secret-the-sender-rotated-to", body, now.ms / 1000));
  await post(signHmac(SECRET, body, now.ms));
  await post(signHmac(SECRET, body, now.ms / 1000 - 3600));
  assert.deepEqual(
    lines.map((line) => /: The X-Signature (\w+ \w+)/.exec(line)?.[1]),
    ["header is", "does not", "timestamp is", "timestamp is"],
  );
  assert.match(lines[1]!, /WEBHOOK_SECRET_NEXT/);
  assert.match(lines[2]!, /in milliseconds/);
  assert.match(lines[3]!, /more than 5 minutes old/);
  // Forgeries of every shape, size and time: no more lines this minute.
  let seed = 7;
  const next = () => (seed = (seed * 48271) % 2_147_483_647);
  for (let i = 0; i < 200; i++) {
    const t = next() % 4 === 0 ? now.ms : now.ms / 1000 - (next() % 7200);
    const shapes = [
      undefined,
      `garbage-${next()}`,
      `t=${t},v1=${next().toString(16).padStart(64, "a")}`,
      signHmac(`forger-${next()}`, body, t),
    ];
    await post(shapes[next() % shapes.length], "x".repeat(next() % 5000));
  }
  assert.equal(lines.length, 4, lines.join("\n"));
});

Deno.test("createApp() logs the sender's own X-Signature out of time, or in milliseconds, on POST /v1/deliveries after a forger's flood of stale and millisecond timestamps began the minute: a forgery is answered in the same words, but counted as unverified", async () => {
  const lines: string[] = [];
  const now = { ms: 1_764_504_000_000 };
  const webhook = app(now, lines);
  const body = JSON.stringify({ job });
  const staleS = now.ms / 1000 - 3600;
  const post = async (signature: string) => {
    const res = await webhook.request("/v1/deliveries", {
      method: "POST",
      body,
      headers: { "x-signature": signature },
    });
    assert.equal(res.status, 401);
    return (await res.json()).detail as string;
  };
  // A forger without the secret: well-formed headers, stale or in
  // milliseconds, under made-up MACs and secrets.
  const forged: string[] = [];
  for (let i = 0; i < 50; i++) {
    const timeS = i % 2 === 0 ? staleS - i : now.ms + i;
    forged.push(
      await post(
        i % 4 < 2
          ? `t=${timeS},v1=${i.toString(16).padStart(64, "f")}`
          : signHmac(`forger-secret-${i}-0000`, body, timeS),
      ),
    );
  }
  // The sender's own, its clock off by an hour, then its t in milliseconds:
  // each its own line, though forgeries of both began the minute.
  const flooded = lines.length;
  const stale = await post(signHmac(SECRET, body, staleS));
  assert.equal(lines.length, flooded + 1, "the sender's own stale t: no line");
  assert.match(
    lines.at(-1)!,
    /more than 5 minutes old.* the signature verifies/,
  );
  const inMs = await post(signHmac(SECRET, body, now.ms));
  assert.equal(lines.length, flooded + 2, "the sender's own ms t: no line");
  assert.match(lines.at(-1)!, /in milliseconds/);
  // The forgeries wrote one line, as unverified.
  assert.equal(flooded, 1, lines.join("\n"));
  // The forger was told what the sender is, word for word.
  assert.equal(forged[0], stale);
  assert.equal(forged[1], inMs);
  // A minute later, the forgeries are counted as unverified.
  now.ms += 60_000;
  await post(`t=${staleS},v1=${"f".repeat(64)}`);
  assert.match(
    lines[3]!,
    /^relayer POST \/v1\/deliveries refused 401 \(50 refused for a missing or unverified credential since the last such line\): The X-Signature timestamp is more than 5 minutes old/,
  );
});

Deno.test("createApp() logs QStash's failure callback, a QStash delivery over the size limit, a QStash token with no jti and a replay, each refused in a minute a forger's unsigned request began on its route, by their own kind", async () => {
  const lines: string[] = [];
  const now = { ms: 1_764_504_000_000 };
  const webhook = app(now, lines);
  const post = async (
    path: string,
    body: string,
    headers: Record<string, string> = {},
  ) => {
    const res = await webhook.request(path, { method: "POST", body, headers });
    await res.body?.cancel();
    return res.status;
  };
  const proxy = "https://proxy.example.test/v1/qstash";
  const body0 = JSON.stringify(job);
  // The failure callback, for the URL QStash calls behind a proxy.
  const callback = failureCallback(job);
  assert.equal(await post("/v1/qstash/failed", callback), 401);
  const elsewhere = await signQStash(callback, { url: `${proxy}/failed` });
  assert.equal(
    await post("/v1/qstash/failed", callback, {
      "upstash-signature": elsewhere,
    }),
    401,
  );
  // A delivery over the 64 KiB limit: its token is checked before its body.
  const long = JSON.stringify({ ...job, note: "x".repeat(70_000) });
  assert.equal(await post("/v1/qstash", long), 401);
  const longElsewhere = await signQStash(long, { url: proxy });
  assert.equal(
    await post("/v1/qstash", long, { "upstash-signature": longElsewhere }),
    401,
  );
  // A token of our keys with no jti: a replay of it could not be refused.
  const noJti = await signQStash(body0, { jti: null });
  assert.equal(
    await post("/v1/qstash", body0, { "upstash-signature": noJti }),
    401,
  );
  // A generic delivery taken, then sent again after a forger's.
  const body = JSON.stringify({ job });
  const signature = signHmac(SECRET, body, now.ms / 1000);
  assert.equal(
    await post("/v1/deliveries", body, { "x-signature": signature }),
    200,
  );
  assert.equal(await post("/v1/deliveries", body), 401);
  assert.equal(
    await post("/v1/deliveries", body, { "x-signature": signature }),
    401,
  );
  const refused = lines.filter((line) => / refused 401: /.test(line));
  assert.deepEqual(
    refused.map((line) => line.split(" refused 401: ")[0]),
    [
      "relayer POST /v1/qstash/failed",
      "relayer POST /v1/qstash/failed",
      "relayer POST /v1/qstash",
      "relayer POST /v1/qstash",
      "relayer POST /v1/qstash",
      "relayer POST /v1/deliveries",
      "relayer POST /v1/deliveries",
    ],
    refused.join("\n"),
  );
  assert.match(
    refused[1]!,
    /signed for https:\/\/proxy\.example\.test\/v1\/qstash\/failed/,
  );
  assert.match(
    refused[3]!,
    /signed for https:\/\/proxy\.example\.test\/v1\/qstash,/,
  );
  assert.match(refused[4]!, /no usable 'jti' and 'exp'/);
  assert.match(refused[6]!, /already delivered: a replay is refused/);
});
