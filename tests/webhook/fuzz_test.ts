/**
 * Thousands of generated requests at each delivery route: random bytes,
 * truncated, deep and huge JSON, wrong types, huge/negative/NaN delivery
 * numbers, bad base64, missing and duplicated headers, signed and not.
 * Whatever comes in: no 500, no stack trace, and no store change unless the
 * request was valid and authenticated.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { runs } from "../_fc.ts";
import { type DeadLetter, parseJob } from "../../mod.ts";
import {
  FUZZ_INTENTS,
  makeApp,
  NOW,
  SECRET,
  STACK,
  theGoogle,
} from "./_app.ts";
import { PUBSUB, QSTASH, signHmac, signQStash } from "./_signing.ts";
import { timeout } from "../_timeout.ts";

const goodJob = fc.record({
  intentId: fc.constantFrom(
    "pi_0001",
    "pi_0002",
    "pi_0003",
    "pi_0004",
    "pi_9999",
  ),
  kind: fc.constant("settle"),
});

const weirdNumber = fc.oneof(
  fc.integer(),
  fc.constantFrom(0, -1, 1e300, -1e300, 2 ** 53, 2 ** 53 + 2, 1.5, -0),
  fc.double(),
  fc.constantFrom("1", "NaN", "Infinity", "", "1e309", null, true, [], {}),
);

const weirdValue = fc.oneof(
  fc.anything({ maxDepth: 3 }),
  fc.string(),
  weirdNumber,
  fc.constant(undefined),
);

/** A body: valid, wrong-typed, truncated, deep, huge, or random bytes. */
function bodies(
  valid: fc.Arbitrary<string>,
): fc.Arbitrary<{ text: string; valid: boolean }> {
  return fc.oneof(
    valid.map((text) => ({ text, valid: true })),
    valid.chain((text) =>
      fc.nat({ max: Math.max(0, text.length - 1) }).map((n) => ({
        text: text.slice(0, n),
        valid: false,
      }))
    ),
    fc.integer({ min: 1, max: 20_000 }).map((depth) => ({
      text: "[".repeat(depth) + "]".repeat(depth),
      valid: false,
    })),
    fc.integer({ min: 1, max: 20_000 }).map((depth) => ({
      text: '{"a":'.repeat(depth) + "1" + "}".repeat(depth),
      valid: false,
    })),
    fc.constant({
      text: JSON.stringify({ pad: "x".repeat(120 * 1024) }), // over even an envelope's limit
      valid: false,
    }),
    fc.uint8Array({ maxLength: 300 }).map((bytes) => ({
      text: new TextDecoder().decode(bytes),
      valid: false,
    })),
    fc.json().map((text) => ({ text, valid: false })),
    fc.record({ job: weirdValue, delivery: weirdValue }, { requiredKeys: [] })
      .map((value) => ({
        text: JSON.stringify(value) ?? "",
        valid: false,
      })),
  );
}

/** Whether `value` cannot change: no object, or one frozen through. */
function frozenThrough(value: unknown): boolean {
  return typeof value !== "object" || value === null ||
    (Object.isFrozen(value) && Object.values(value).every(frozenThrough));
}

interface Case {
  body: { text: string; valid: boolean };
  /**
   * good: signed right; bad: another key; none: no header; twice: the good
   * header sent twice; stale: signed too long ago (an expired token);
   * ahead: signed in the future; forged: well-formed but made up (the old
   * generic scheme, another account's Google token, QStash without a key).
   */
  sign: "good" | "bad" | "none" | "twice" | "stale" | "ahead" | "forged";
  extra: [string, string][];
}

function checkAnswer(res: Response, text: string): void {
  assert.notEqual(res.status, 500, text);
  assert.ok(res.status < 500 || res.status === 503, `status ${res.status}`);
  assert.doesNotMatch(text, STACK);
  if (res.status !== 204) {
    assert.match(
      res.headers.get("content-type") ?? "",
      /^application\/(problem\+)?json/,
    );
    JSON.parse(text);
  }
}

const headerNoise = fc.array(
  fc.tuple(
    fc.constantFrom(
      "upstash-retried",
      "x-signature",
      "authorization",
      "content-type",
      "upstash-signature",
      "x-other",
    ),
    fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.constantFrom("0", "-1", "1e309", "99999999999999999999", "NaN"),
    ),
  ),
  { maxLength: 3 },
);

const signing = fc.constantFrom<Case["sign"]>(
  "good",
  "good",
  "good",
  "bad",
  "none",
  "twice",
  "stale",
  "ahead",
  "forged",
);

function cases(valid: fc.Arbitrary<string>): fc.Arbitrary<Case> {
  return fc.record({ body: bodies(valid), sign: signing, extra: headerNoise });
}

async function fuzz(
  route: string,
  valid: fc.Arbitrary<string>,
  authenticate: (
    body: string,
    sign: Case["sign"],
    headers: Headers,
  ) => Promise<void>,
  /**
   * For Pub/Sub, QStash and the generic route: whether an authenticated
   * body is unreadable, and so answered `status` (Pub/Sub's 204, QStash's
   * 489, the generic route's 400) with exactly
   * one write, its dead letter `<queue>/…/unreadable`.
   */
  unreadable?: {
    readonly is: (body: string) => boolean;
    readonly status: number;
    readonly queue: string;
  },
): Promise<
  { requests: number; statuses: Map<number, number>; changed: number }
> {
  const { app, writes, store } = await makeApp({
    intents: [...FUZZ_INTENTS],
    scripts: { pi_0002: { sends: [{ error: new Error("rpc timeout") }] } },
  });
  const intents = async () =>
    JSON.stringify(
      await Promise.all(FUZZ_INTENTS.map(({ id }) => store.getIntent(id))),
    );
  /**
   * Each dead letter's JSON, by the letter read: MemoryStore hands out its
   * letters frozen, their queue ids too, and a letter changed is a new
   * one, so a letter's text, once written, is its text for good. A letter
   * not frozen through is written afresh at every read.
   */
  const letterTexts = new WeakMap<DeadLetter, string>();
  const letterText = (letter: DeadLetter): string => {
    const kept = letterTexts.get(letter);
    if (kept !== undefined) return kept;
    const text = JSON.stringify(letter);
    if (frozenThrough(letter)) letterTexts.set(letter, text);
    return text;
  };
  /** Everything a delivery could change: intents, counts, dead letters. */
  const state = async () =>
    JSON.stringify([
      await intents(),
      await Promise.all(
        FUZZ_INTENTS.map(({ id }) => store.deliveries(`${id}/settle`)),
      ),
    ]) +
    // In list order, each letter's text written once: written afresh at
    // each read (the QStash run's ~1,700 reads of up to ~1,000 letters,
    // up to 540 kB of text), they took most of the harness's time.
    `[${
      (await store.listDeadLetters({ limit: 1000 })).items.map(letterText)
        .join(",")
    }]`;
  /**
   * `state()` as last read, kept while no write call has been made through
   * the app's store since: the store changes only by those, and a thousand
   * dead letters are slow to read and compare before every signed request.
   */
  let known: { writes: number; state: string } | undefined;
  const stateAsKnown = async () => {
    if (known?.writes !== writes()) {
      const at = writes();
      known = { writes: at, state: await state() };
    }
    return known.state;
  };
  let requests = 0;
  let changedCount = 0;
  const statuses = new Map<number, number>();
  await fc.assert(
    fc.asyncProperty(cases(valid), async ({ body, sign, extra }) => {
      const headers = new Headers({ "content-type": "application/json" });
      for (const [name, value] of extra) {
        try {
          headers.append(name, value);
        } catch {
          // not a legal header value: a client could not send it either
        }
      }
      await authenticate(body.text, sign, headers);
      const before = writes();
      const intentsBefore = unreadable ? await intents() : "";
      const stateBefore = sign === "good" ? await stateAsKnown() : "";
      const res = await app.request(route, {
        method: "POST",
        body: body.text,
        headers,
      });
      requests++;
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      const text = await res.text();
      checkAnswer(res, text);
      if (sign === "good" && res.status === 401) {
        // A good signature already used: a replay, refused. Its record's
        // write was tried and refused, so compare what the store holds.
        assert.match(text, /already delivered/);
        assert.equal(await state(), stateBefore, "a replay changed the store");
        return;
      }
      const changed = writes() !== before;
      if (changed) changedCount++;
      if (sign === "good" && unreadable?.is(body.text)) {
        assert.equal(
          res.status,
          unreadable.status,
          "an unreadable message is answered so that it is not redelivered",
        );
        assert.equal(writes() - before, 1, "only its dead letter is written");
        assert.equal(await intents(), intentsBefore, "no intent changed");
        const { items } = await store.listDeadLetters({ limit: 1000 });
        assert.ok(
          items.some((d) =>
            d.jobId.startsWith(`${unreadable.queue}/`) &&
            d.jobId.endsWith("/unreadable")
          ),
        );
        return;
      }
      if (res.status >= 400 && res.status !== 503) {
        assert.equal(changed, false, `${res.status} changed the store`);
      }
      if (sign !== "good") {
        assert.equal(
          changed,
          false,
          "an unauthenticated request changed the store",
        );
      }
      if (!body.valid) {
        assert.equal(changed, false, "a malformed request changed the store");
      }
    }),
    { numRuns: runs(5000) },
  );
  return { requests, statuses, changed: changedCount };
}

/** The run reached every kind of answer: real deliveries, refusals and limits. */
function assertReached(
  result: { requests: number; statuses: Map<number, number>; changed: number },
  expected: number[],
): void {
  assert.equal(result.requests, runs(5000));
  assert.ok(result.changed > 0, "no valid request reached the store");
  for (const status of expected) {
    assert.ok((result.statuses.get(status) ?? 0) > 0, `no ${status} answer`);
  }
}

Deno.test(
  "createApp() survives 5,000 generated requests on POST /v1/deliveries",
  timeout(120_000, async () => {
    const valid = fc.record({
      job: goodJob,
      delivery: fc.integer({ min: 1, max: 5 }),
    }, { requiredKeys: ["job"] })
      .map((v) => JSON.stringify(v));
    const result = await fuzz(
      "/v1/deliveries",
      valid,
      (body, sign, headers) => {
        const t = Math.floor(NOW / 1000);
        // Only the header this case sends is signed: each is an HMAC over a
        // body of up to 120 KiB, and the harness's CPU is the test's.
        const good = () => signHmac(SECRET, body, t);
        const signature: Record<Case["sign"], () => string | undefined> = {
          good,
          bad: () => signHmac("wrong", body, t),
          none: () => undefined,
          twice: () => {
            const once = good();
            return `${once}, ${once}`;
          },
          stale: () => signHmac(SECRET, body, t - 301),
          ahead: () => signHmac(SECRET, body, t + 31),
          forged: () => `sha256=${good().split("v1=")[1]}`,
        };
        const value = signature[sign]();
        if (value === undefined) headers.delete("x-signature");
        else headers.set("x-signature", value);
        return Promise.resolve();
      },
      {
        // A signed body whose job is there and cannot be read: refused 400,
        // kept first as a dead letter (it may be its intent's only job).
        status: 400,
        queue: "generic",
        is: (text) => {
          const bytes = new TextEncoder().encode(text).length;
          // Over the limit and a give-up's room: refused by its length.
          if (bytes > 65_536 + 1024) return false;
          let body: unknown;
          try {
            body = JSON.parse(text.replace(/^\uFEFF/, ""));
          } catch {
            return false;
          }
          if (typeof body !== "object" || body === null) return false;
          const { job, gaveUp } = body as Record<string, unknown>;
          if (bytes > 65_536 && (gaveUp ?? undefined) === undefined) {
            return false;
          }
          if (job === undefined) return false;
          try {
            parseJob(job);
            return false;
          } catch {
            return true;
          }
        },
      },
    );
    assertReached(result, [200, 400, 401, 413, 503]);
  }),
);

Deno.test(
  "createApp() survives 5,000 generated requests on POST /v1/qstash",
  timeout(120_000, async () => {
    const valid = goodJob.map((v) => JSON.stringify(v));
    const result = await fuzz(
      "/v1/qstash",
      valid,
      async (body, sign, headers) => {
        if (sign === "none") return headers.delete("upstash-signature");
        const nowS = Math.floor(Date.now() / 1000); // jose checks exp by the wall clock
        // Only the token this case sends is signed (see the generic route).
        const signature: Record<
          Exclude<Case["sign"], "none">,
          () => Promise<string>
        > = {
          good: () => signQStash(body),
          bad: () => signQStash(body, { key: "sig_wrong", url: QSTASH.url }),
          twice: async () => {
            const good = await signQStash(body);
            return `${good}, ${good}`;
          },
          stale: () => signQStash(body, { nowS: nowS - 3600, ttlS: 300 }),
          ahead: () => signQStash(body, { nowS: nowS + 3600 }),
          forged: () => signQStash(body, { jti: null }),
        };
        headers.set("upstash-signature", await signature[sign]());
      },
      {
        status: 489,
        queue: "qstash",
        is: (text) => {
          // Over the route's 64 KiB: kept unread, as QStash would retry a
          // 413 to the end.
          if (new TextEncoder().encode(text).length > 65_536) return true;
          try {
            parseJob(JSON.parse(text.replace(/^\uFEFF/, "")));
            return false;
          } catch {
            return true;
          }
        },
      },
    );
    // No 413: an authenticated message over the limit is kept unread
    // (489), any other refused by its token first.
    assertReached(result, [200, 401, 489, 503]);
  }),
);

Deno.test(
  "createApp() survives 5,000 generated requests on POST /v1/pubsub",
  timeout(120_000, async () => {
    const google = await theGoogle();
    const token = await google.token();
    const wrong = await google.token({ aud: "https://other.test" });
    const base64 = fc.oneof(
      goodJob.map((job) => btoa(JSON.stringify(job))),
      fc.string().map((s) => s),
      fc.constantFrom("!!!", "====", "YQ", btoa("\u00ff\u00fe")),
    );
    const valid = fc.record({
      message: fc.record({
        data: base64,
        messageId: fc.oneof(fc.uuid(), fc.constantFrom("1", "m-2")),
      }),
      subscription: fc.constant("projects/p/subscriptions/s"),
      // A count that cannot be read is counted in the store, as none is.
      deliveryAttempt: fc.oneof(
        fc.integer({ min: 0, max: 5 }),
        fc.constant(undefined),
        fc.constantFrom<unknown>("x", "2", -1, 1.5, null, true, 2 ** 53),
      ),
    }).map((v) => JSON.stringify(v));
    const nowS = Math.floor(Date.now() / 1000);
    const tokens: Record<Exclude<Case["sign"], "none">, string> = {
      good: `Bearer ${token}`,
      bad: `Bearer ${wrong}`,
      twice: `Bearer ${token}, Bearer ${token}`,
      stale: `Bearer ${await google.token({
        iat: nowS - 7200,
        exp: nowS - 3600,
      })}`,
      ahead: `Bearer ${await google.token({ nbf: nowS + 3600 })}`,
      // Google signs tokens for any audience to any account: only the
      // configured, verified service account may push.
      forged: `Bearer ${await google.token({
        email: `attacker@evil.iam.gserviceaccount.com`,
      })}`,
    };
    const unverified = await google.token({
      email: PUBSUB.serviceAccount,
      email_verified: false,
    });
    const result = await fuzz("/v1/pubsub", valid, (body, sign, headers) => {
      if (sign === "none") headers.delete("authorization");
      else if (sign === "forged" && body.length % 2 === 0) {
        headers.set("authorization", `Bearer ${unverified}`);
      } else headers.set("authorization", tokens[sign]);
      return Promise.resolve();
    }, {
      status: 204,
      queue: "pubsub",
      is: (text) => {
        // An envelope may hold 4/3 of 64 KiB and 16 KiB more: an
        // authenticated push over that is acked unread, as Pub/Sub would
        // redeliver a 413 for days.
        if (new TextEncoder().encode(text).length > 103_768) return true;
        try {
          const { message } = JSON.parse(text);
          const id = message.messageId;
          if (typeof id !== "string" || id === "" || id.length > 200) {
            return true;
          }
          const job = JSON.parse(
            new TextDecoder("utf-8", { fatal: true }).decode(
              Uint8Array.from(atob(message.data), (ch) => ch.charCodeAt(0)),
            ),
          );
          return !(/^[A-Za-z0-9_.:-]{1,128}$/.test(job.intentId) &&
            job.kind === "settle");
        } catch {
          return true;
        }
      },
    });
    assertReached(result, [204, 401, 503]);
  }),
);
