/**
 * A bridge's signed delivery on `POST /v1/deliveries` whose job cannot be
 * read (a publisher's `"kind":"Settle"`, a job without its intent id) is
 * refused 400, as no retry can fix it, and kept first as a dead letter
 * `generic/sha256-…/unreadable`, as QStash's, Pub/Sub's, Cloudflare's and
 * the local queue's are: it may be its intent's only job. Refused with
 * nothing kept, a bridge that takes a 4xx as final dropped it, and its
 * give-up, which carries the same job, was refused too: the intent was
 * left with no job and no dead letter, the case a bridge's tests with
 * readable jobs never show.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type DeadLetter, MemoryStore } from "../../mod.ts";
import {
  AUTHORIZED,
  genericRequest,
  lettersDown,
  makeApp,
  NOW,
  OPS,
} from "./_app.ts";

const typo = { intentId: "pi_0001", kind: "Settle" };

/** The dead letters `store` keeps, the first ten. */
async function lettersOf(store: MemoryStore): Promise<readonly DeadLetter[]> {
  return (await store.listDeadLetters({ limit: 10 })).items;
}

/**
 * A signed delivery `delivery` of the job `text` (a JSON text), which must
 * be refused 400 saying it names no intent.
 */
async function refusedNamingNoIntent(
  app: Awaited<ReturnType<typeof makeApp>>["app"],
  text: string,
  delivery: number,
): Promise<void> {
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job: text, delivery })),
  );
  assert.equal(res.status, 400, text);
  assert.match((await res.json()).detail, /it names no intent/, text);
}

/** A POST of `text` to the generic route, signed at `t` (milliseconds). */
async function postSignedAt(
  app: Awaited<ReturnType<typeof makeApp>>["app"],
  text: string,
  t: number,
): Promise<Response> {
  return app.request(
    "/v1/deliveries",
    await genericRequest(text, { timeS: Math.floor(t / 1000) }),
  );
}

/** The app with `pi_0001` authorized, and the lines it logs. */
async function loggingApp() {
  const lines: string[] = [];
  const { app, store } = await makeApp({
    intents: [AUTHORIZED],
    deps: { log: (line) => lines.push(line) },
  });
  return { app, store, lines };
}

Deno.test("POST /v1/deliveries keeps a signed delivery whose job cannot be read as a dead letter naming its intent, then refuses it 400; its give-up keeps the same letter", async () => {
  const { app, store, lines } = await loggingApp();
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(
      JSON.stringify({ job: typo, delivery: 3, messageId: "m-1" }),
    ),
  );
  assert.equal(res.status, 400);
  const { detail } = await res.json();
  assert.match(
    detail,
    /^Cannot read job as 'kind' must be "settle": current value is "Settle"\. Kept as the dead letter generic\/sha256-[0-9a-f]{32}\/unreadable: publish a readable job for intent pi_0001, then discard the letter\.$/,
  );
  const letters = await lettersOf(store);
  assert.equal(letters.length, 1);
  const [letter] = letters;
  assert.match(letter!.jobId, /^generic\/sha256-[0-9a-f]{32}\/unreadable$/);
  assert.equal(letter!.intentId, "pi_0001");
  // The bridge's count, as a readable job's letter records it.
  assert.equal(letter!.deliveries, 3);
  assert.equal(letter!.cause, "declared");
  assert.match(
    letter!.reason,
    /^unreadable bridge message: Cannot read job as 'kind'/,
  );
  assert.ok(
    lines.includes(
      `generic ${
        letter!.jobId
      } refused and kept as a dead letter: Cannot read job as 'kind' must be "settle": current value is "Settle"`,
    ),
    lines.join("\n"),
  );
  // The bridge's queue gives up on it: the same job, the same letter.
  const gaveUp = await app.request(
    "/v1/deliveries",
    await genericRequest(
      JSON.stringify({ job: typo, gaveUp: { messageId: "m-1" } }),
    ),
  );
  assert.equal(gaveUp.status, 400);
  await gaveUp.body?.cancel();
  const after = await lettersOf(store);
  assert.deepEqual(after.map((kept) => kept.jobId), [letter!.jobId]);
  // The intent is untouched; the operator discards the letter by its name
  // once a readable job moved the intent (refused, 409, before).
  assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
  const [, name] = letter!.jobId.split("/");
  const refused = await app.request(
    `/v1/dead-letters/generic/${name}/unreadable`,
    { method: "DELETE", headers: { authorization: `Bearer ${OPS}` } },
  );
  assert.equal(refused.status, 409, await refused.clone().text());
  await refused.body?.cancel();
});

Deno.test("POST /v1/deliveries answers 503 for a delivery whose job cannot be read and whose letter cannot be kept, so the bridge delivers it again", async () => {
  const memory = new MemoryStore();
  const { app } = await makeApp({
    deps: {
      store: lettersDown(memory),
    },
  });
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job: typo })),
  );
  assert.equal(res.status, 503);
  assert.match(
    (await res.json()).detail,
    /could not be kept as a dead letter; deliver it again\.$/,
  );
});

Deno.test("POST /v1/deliveries keeps a give-up whose job cannot be read with the deliveries its queue counted, as QStash's failure callback's letter has its retries, not as one delivery", async () => {
  const { app, store } = await makeApp({
    intents: [AUTHORIZED],
  });
  const gaveUp = await app.request(
    "/v1/deliveries",
    await genericRequest(
      JSON.stringify({
        job: typo,
        gaveUp: { deliveries: 7, messageId: "m-1" },
      }),
    ),
  );
  assert.equal(gaveUp.status, 400);
  await gaveUp.body?.cancel();
  const [letter] = await lettersOf(store);
  assert.match(letter!.jobId, /^generic\/sha256-[0-9a-f]{32}\/unreadable$/);
  assert.equal(letter!.deliveries, 7);
});

Deno.test("POST /v1/deliveries keeps a job encoded as JSON twice (a JSON text of a readable job) as a dead letter naming its intent, and says to send the object itself; a text that is no job names none", async () => {
  const { app, store } = await makeApp({
    intents: [AUTHORIZED],
  });
  const twice = JSON.stringify({ intentId: "pi_0001", kind: "settle" });
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ job: twice, delivery: 2 })),
  );
  assert.equal(res.status, 400);
  const { detail } = await res.json();
  assert.match(detail, /encoded as JSON twice/);
  assert.match(detail, /publish a readable job for intent pi_0001/);
  const [letter] = await lettersOf(store);
  assert.equal(letter?.intentId, "pi_0001");
  // Never a guess: a text of a job that is not readable itself (its kind
  // misspelt), or of an intent id alone, names no intent.
  for (
    const [i, text] of [
      JSON.stringify({ intentId: "pi_0002", kind: "Settle" }),
      '"pi_0002"',
      "pi_0002",
    ].entries()
  ) {
    await refusedNamingNoIntent(app, text, 2 + i);
  }
  const letters = await lettersOf(store);
  assert.deepEqual(
    letters.map((kept) => kept.intentId).sort(),
    ["", "", "", "pi_0001"],
  );
});

Deno.test("POST /v1/deliveries names no intent for a job encoded as JSON three times, nor for a job text whose intent id no intent can have: the letter is kept with no intent guessed", async () => {
  const { app, store } = await makeApp({
    intents: [AUTHORIZED],
  });
  const job = { intentId: "pi_0001", kind: "settle" };
  for (
    const [i, text] of [
      JSON.stringify(JSON.stringify(job)),
      JSON.stringify({ intentId: "pi 0001", kind: "settle" }),
      JSON.stringify({ intentId: "x".repeat(129), kind: "settle" }),
    ].entries()
  ) {
    await refusedNamingNoIntent(app, text, 2 + i);
  }
  const letters = await lettersOf(store);
  assert.deepEqual(letters.map((kept) => kept.intentId), ["", "", ""]);
});

Deno.test("POST /v1/deliveries keeps a signed bare job (no {\"job\": …} around it) as a dead letter naming its intent, then refuses it 400 saying to wrap it; a body without 'job' that names no intent keeps nothing", async () => {
  const { app, store } = await makeApp({
    intents: [AUTHORIZED],
  });
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(
      JSON.stringify({ intentId: "pi_0001", kind: "settle" }),
    ),
  );
  assert.equal(res.status, 400);
  const { detail } = await res.json();
  assert.match(detail, /wrap it in \{"job": …\}/);
  assert.match(detail, /publish a readable job for intent pi_0001/);
  const letters = await lettersOf(store);
  assert.deepEqual(letters.map((letter) => letter.intentId), ["pi_0001"]);
  assert.match(letters[0]!.jobId, /^generic\/sha256-[0-9a-f]{32}\/unreadable$/);
  // The bridge's own body, naming no intent: refused, nothing kept.
  const other = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({ delivery: 1 })),
  );
  assert.equal(other.status, 400);
  await other.body?.cancel();
  assert.equal((await lettersOf(store)).length, 1);
});

Deno.test("POST /v1/deliveries keeps a signed bare job's letter with the delivery count it carries, as a {job, delivery} body's letter has its count, not one delivery; its next delivery and its give-up keep the same letter", async () => {
  const { app, store } = await makeApp({
    intents: [AUTHORIZED],
  });
  const bare = { intentId: "pi_0001", kind: "settle" };
  const kept = async (body: unknown) => {
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(JSON.stringify(body)),
    );
    assert.equal(res.status, 400);
    assert.match((await res.json()).detail, /wrap it in \{"job": …\}/);
    return (await lettersOf(store)).map((
      letter,
    ) => [letter.jobId, letter.intentId, letter.deliveries]);
  };
  const [first] = await kept({ ...bare, delivery: 4 });
  assert.match(String(first![0]), /^generic\/sha256-[0-9a-f]{32}\/unreadable$/);
  assert.deepEqual(first!.slice(1), ["pi_0001", 4]);
  // Named by the job, not by the count or message id beside it.
  assert.deepEqual(await kept({ ...bare, delivery: 5, messageId: "m-1" }), [
    [first![0], "pi_0001", 5],
  ]);
  // A bare give-up counts the deliveries its queue made, as a wrapped
  // one whose job cannot be read does.
  assert.deepEqual(
    await kept({ ...bare, gaveUp: { deliveries: 9, messageId: "m-1" } }),
    [[first![0], "pi_0001", 9]],
  );
});

Deno.test("POST /v1/deliveries keeps a signed delivery of a readable job whose messageId is not a text as a dead letter naming its intent, one per job, then refuses it 400 naming the letter", async () => {
  const { app, store, lines } = await loggingApp();
  const job = { intentId: "pi_0001", kind: "settle" };
  for (const messageId of [7, true, { id: "m-1" }, ["m-1"]]) {
    const body = JSON.stringify({ job, delivery: 3, messageId });
    const res = await app.request("/v1/deliveries", await genericRequest(body));
    assert.equal(res.status, 400, body);
    assert.match(
      (await res.json()).detail,
      /^'messageId' must be your queue's id of the message, a text: current value is .*\. Kept as the dead letter generic\/sha256-[0-9a-f]{32}\/unreadable: send the delivery again with its messageId as a text \(or none\), or publish a job for intent pi_0001, then discard the letter\.$/,
      body,
    );
  }
  // One letter for the job, as its give-ups keep.
  const letters = await lettersOf(store);
  assert.equal(letters.length, 1);
  const [letter] = letters;
  assert.match(letter!.jobId, /^generic\/sha256-[0-9a-f]{32}\/unreadable$/);
  assert.equal(letter!.intentId, "pi_0001");
  assert.equal(letter!.deliveries, 3);
  assert.match(
    letter!.reason,
    /^unreadable bridge message: 'messageId' must be your queue's id/,
  );
  assert.ok(
    lines.some((line) =>
      line.startsWith(
        `generic ${
          letter!.jobId
        } refused and kept as a dead letter: 'messageId' must be`,
      )
    ),
    lines.join("\n"),
  );
  // Nothing else was touched: the intent is as it was.
  assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
});

Deno.test('POST /v1/deliveries keeps a job wrapped in {"job": …} twice as a dead letter naming the intent of the job inside, and says so', async () => {
  const { app, store } = await makeApp({
    intents: [AUTHORIZED],
  });
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(
      JSON.stringify({
        job: { job: { intentId: "pi_0001", kind: "settle" } },
        delivery: 1,
      }),
    ),
  );
  assert.equal(res.status, 400);
  const { detail } = await res.json();
  assert.match(detail, /wrapped in \{"job": …\}/);
  assert.match(detail, /publish a readable job for intent pi_0001/);
  const [letter] = await lettersOf(store);
  assert.equal(letter?.intentId, "pi_0001");
});

Deno.test("POST /v1/deliveries keeps no letter for a bare job, a job or a body encoded twice, a give-up it cannot read or a messageId that is not a text whose signature does not verify: 401, the store untouched", async () => {
  const { app, store, writes } = await makeApp({
    intents: [AUTHORIZED],
  });
  const job = { intentId: "pi_0001", kind: "settle" };
  const before = writes();
  for (
    const body of [
      job,
      { job: JSON.stringify(job) },
      { job: { job } },
      { job, gaveUp: "yes" },
      { job, gaveUp: { deliveries: 5, messageId: 7 } },
      { job, delivery: 2, gaveUp: { deliveries: 5 } },
      { job, delivery: 2, messageId: 7 },
      { job, messageId: { id: "m-1" } },
      JSON.stringify({ job, delivery: 2 }),
      JSON.stringify({ job, gaveUp: { deliveries: 5 } }),
    ]
  ) {
    const text = JSON.stringify(body);
    // Signed over other bytes: a forger's body under a sender's header.
    const { headers } = await genericRequest(`${text} `);
    const res = await app.request("/v1/deliveries", {
      method: "POST",
      body: text,
      headers: headers!,
    });
    assert.equal(res.status, 401, text);
    await res.body?.cancel();
  }
  assert.equal(writes(), before);
  assert.deepEqual(await lettersOf(store), []);
});

Deno.test('POST /v1/deliveries logs a bare job\'s or an unreadable job\'s count that cannot be read (delivery "5", gaveUp.deliveries "9"), which its letter records as 1, at most once a minute, as a readable job\'s count is logged', async () => {
  const lines: string[] = [];
  let t = NOW;
  const { app, store } = await makeApp({
    intents: [AUTHORIZED],
    deps: { log: (line) => lines.push(line), now: () => t },
  });
  const counts = () => lines.filter((line) => / is not a count; /.test(line));
  const kept = async (body: unknown) => {
    const res = await postSignedAt(app, JSON.stringify(body), t);
    assert.equal(res.status, 400, await res.clone().text());
    return (await lettersOf(store)).map((letter) => letter.deliveries);
  };
  const bare = { intentId: "pi_0001", kind: "settle" };
  // A count it reads, or none: nothing said.
  assert.deepEqual(await kept({ ...bare, delivery: 4 }), [4]);
  assert.deepEqual(await kept({ ...bare, delivery: null, messageId: "m-1" }), [
    1,
  ]);
  assert.deepEqual(counts(), []);
  t += 1000;
  assert.deepEqual(await kept({ ...bare, delivery: "5" }), [1]);
  assert.deepEqual(counts(), [
    'relayer POST /v1/deliveries: delivery "5" is not a count; its dead letter records 1 delivery; send an integer >= 1 (parse a count your queue gives as a string), or leave it out',
  ]);
  // One line a minute for the route.
  t += 1000;
  await kept({ ...bare, delivery: "6" });
  assert.equal(counts().length, 1);
  // A job it cannot read, wrapped, and a bare give-up: the same words.
  t += 60_000;
  await kept({ job: typo, delivery: "5" });
  t += 60_000;
  await kept({ ...bare, gaveUp: { deliveries: "9" } });
  // A readable job whose messageId is no text: its letter's count too.
  t += 60_000;
  await kept({ job: bare, delivery: "5", messageId: 7 });
  assert.deepEqual(counts().slice(1), [
    'relayer POST /v1/deliveries: delivery "5" is not a count; its dead letter records 1 delivery; send an integer >= 1 (parse a count your queue gives as a string), or leave it out',
    'relayer POST /v1/deliveries: gaveUp.deliveries "9" is not a count; its dead letter records 1 delivery; send an integer >= 1 (parse a count your queue gives as a string), or leave it out',
    'relayer POST /v1/deliveries: delivery "5" is not a count; its dead letter records 1 delivery; send an integer >= 1 (parse a count your queue gives as a string), or leave it out',
  ]);
});

Deno.test("POST /v1/deliveries logs the count it cannot read of a body encoded as JSON twice (delivery \"5\") and of a batch's element, which their letters record as 1, as a bare job's is logged", async () => {
  const lines: string[] = [];
  let t = NOW;
  const { app } = await makeApp({
    intents: [AUTHORIZED],
    deps: { log: (line) => lines.push(line), now: () => t },
  });
  const counts = () => lines.filter((line) => / is not a count; /.test(line));
  const refused = async (text: string) => {
    const res = await postSignedAt(app, text, t);
    assert.equal(res.status, 400, await res.clone().text());
    await res.body?.cancel();
  };
  const job = { intentId: "pi_0001", kind: "settle" };
  await refused(JSON.stringify(JSON.stringify({ job, delivery: "5" })));
  t += 60_000;
  await refused(JSON.stringify([{ job, gaveUp: { deliveries: "9" } }]));
  assert.deepEqual(counts(), [
    'relayer POST /v1/deliveries: delivery "5" is not a count; its dead letter records 1 delivery; send an integer >= 1 (parse a count your queue gives as a string), or leave it out',
    'relayer POST /v1/deliveries: gaveUp.deliveries "9" is not a count; its dead letter records 1 delivery; send an integer >= 1 (parse a count your queue gives as a string), or leave it out',
  ]);
});

Deno.test("POST /v1/deliveries keeps a body encoded as JSON twice (a JSON text of a delivery or of a give-up, as a bridge that stringifies its queue's text sends it) as a dead letter naming its intent, then refuses it 400 saying to send the object itself; a text of anything else names none", async () => {
  const { app, store } = await loggingApp();
  const job = { intentId: "pi_0001", kind: "settle" };
  const delivery = JSON.stringify({ job, delivery: 3, messageId: "m-1" });
  const res = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify(delivery)),
  );
  assert.equal(res.status, 400);
  const { detail } = await res.json();
  assert.match(detail, /encoded as JSON twice/);
  assert.match(
    detail,
    /Kept as the dead letter generic\/sha256-[0-9a-f]{32}\/unreadable: publish a readable job for intent pi_0001, then discard the letter\.$/,
  );
  const [letter, ...more] = await lettersOf(store);
  assert.deepEqual(more, []);
  assert.equal(letter?.intentId, "pi_0001");
  assert.equal(letter?.deliveries, 3);
  // Its give-up, encoded so too: the same letter, and the intent untouched.
  const gaveUp = await app.request(
    "/v1/deliveries",
    await genericRequest(
      JSON.stringify(
        JSON.stringify({ job, gaveUp: { deliveries: 7, messageId: "m-1" } }),
      ),
    ),
  );
  assert.equal(gaveUp.status, 400);
  await gaveUp.body?.cancel();
  assert.deepEqual(
    (await lettersOf(store)).map((l) => l.jobId),
    [letter!.jobId],
  );
  assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
  // A text of no delivery (a misspelt job whose intent id cannot be read,
  // an intent id alone) is the bridge's own mistake and names nothing:
  // refused, nothing kept. (One whose intent id can be read is kept:
  // deliveries_batch_test.)
  for (
    const text of [
      JSON.stringify(
        JSON.stringify({ job: { intentId: "pi 2", kind: "Settle" } }),
      ),
      JSON.stringify('"pi_0002"'),
      JSON.stringify("not json"),
    ]
  ) {
    const refused = await app.request(
      "/v1/deliveries",
      await genericRequest(text),
    );
    assert.equal(refused.status, 400, text);
    await refused.body?.cancel();
  }
  assert.equal((await lettersOf(store)).length, 1);
});
