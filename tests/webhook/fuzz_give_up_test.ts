/**
 * Thousands of generated requests at the queues' give-up routes (QStash's
 * failure callback, Pub/Sub's dead-letter push): random and truncated
 * bodies, wrong types, bad base64, signed, unsigned, stale, replayed and
 * signed for another URL or audience. Whatever comes in: no 500, no stack
 * trace, no store write without a valid signature, and no intent changed
 * by a request that was not a readable, authenticated give-up.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { runs } from "../_fc.ts";
import { FUZZ_INTENTS, makeApp, STACK, theGoogle } from "./_app.ts";
import { PUBSUB, QSTASH, signQStash } from "./_signing.ts";

const AUDIENCE = "https://relayer.example.test/v1/pubsub/dead-letter";

const job = fc.record({
  intentId: fc.constantFrom("pi_0001", "pi_0002", "pi_0003", "pi_0004", "pi_9"),
  kind: fc.constant("settle"),
});
const weird = fc.oneof(
  fc.anything({ maxDepth: 2 }),
  fc.constantFrom(-1, 1.5, 1e300, "3", null, "", "!!!", "YQ"),
);
/** Base64 of a job, or of junk, or not base64 at all. */
const data = fc.oneof(
  job.map((j) => btoa(JSON.stringify(j))),
  job.map((j) => btoa(JSON.stringify(j).slice(0, 7))),
  fc.string({ maxLength: 12 }),
  weird,
);

/** A body: the valid shape with fields replaced, truncated, or noise. */
function bodies(valid: fc.Arbitrary<Record<string, unknown>>) {
  return fc.oneof(
    valid.map((v) => JSON.stringify(v)),
    fc.tuple(valid, fc.string({ maxLength: 12 }), weird).map(([v, k, w]) =>
      JSON.stringify({ ...v, [k]: w })
    ),
    valid.chain((v) => {
      const text = JSON.stringify(v);
      return fc.nat({ max: text.length }).map((n) => text.slice(0, n));
    }),
    fc.string({ maxLength: 40 }),
    fc.constant("x".repeat(120_000)), // over even an envelope's limit
  );
}

type Sign = "good" | "none" | "bad" | "other" | "stale" | "replay";
const signs = fc.constantFrom<Sign>(
  "good",
  "good",
  "good",
  "none",
  "bad",
  "other",
  "stale",
  "replay",
);

function check(res: Response, text: string): void {
  assert.ok(res.status !== 500 && (res.status < 500 || res.status === 503));
  assert.doesNotMatch(text, STACK);
  if (res.status !== 204) JSON.parse(text);
}

Deno.test("createApp() survives 5,000 generated requests on POST /v1/qstash/failed", async () => {
  const { app, store, writes } = await makeApp({ intents: [...FUZZ_INTENTS] });
  const valid = fc.record({
    sourceBody: data,
    retried: fc.oneof(fc.integer({ min: 0, max: 20 }), weird),
    maxRetries: fc.integer({ min: 0, max: 20 }),
    dlqId: fc.oneof(fc.uuid(), weird),
    sourceMessageId: fc.oneof(fc.uuid(), weird),
    status: fc.constantFrom(500, 503),
  }, { requiredKeys: ["sourceBody", "retried"] });
  const statuses = new Map<number, number>();
  let used = "";
  await fc.assert(
    fc.asyncProperty(bodies(valid), signs, async (body, sign) => {
      const url = `${QSTASH.url}/failed`;
      const nowS = Math.floor(Date.now() / 1000);
      const headers = new Headers();
      if (sign === "replay") {
        // Nothing signed yet to replay: then it is simply unsigned.
        if (used !== "") headers.set("upstash-signature", used);
      } else if (sign !== "none") {
        const signature = await signQStash(body, {
          url: sign === "other" ? QSTASH.url : url,
          ...(sign === "bad" ? { key: "sig_wrong_key_000000" } : {}),
          ...(sign === "stale" ? { nowS: nowS - 3600, ttlS: 300 } : {}),
        });
        headers.set("upstash-signature", signature);
        if (sign === "good") used = signature;
      }
      const before = writes();
      const states = JSON.stringify(
        await Promise.all(FUZZ_INTENTS.map((i) => store.getIntent(i.id))),
      );
      const letters = (await store.listDeadLetters({ limit: 1000 })).items;
      const res = await app.request("/v1/qstash/failed", {
        method: "POST",
        body,
        headers,
      });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      check(res, await res.text());
      if (sign !== "good" || res.status >= 400) {
        // A replay may reach the store, whose claim refuses it: nothing is
        // written then, though the call was made.
        if (sign === "replay") {
          assert.ok(res.status >= 400, `replay ${res.status}`);
        } else if (sign === "good" && res.status === 489) {
          // A source message that is not a job: kept as its dead letter, in
          // one write, as /v1/qstash keeps it; a malformed callback, none.
          assert.ok(writes() - before <= 1, `${sign} ${res.status} wrote`);
        } else if (sign !== "good" || res.status !== 503) {
          assert.equal(writes(), before, `${sign} ${res.status} wrote`);
        }
        // A good give-up answered 503 is busy: another message's give-up
        // dropped the job of an authorized intent and holds its lease. It
        // uses its signature (the replay record), and changes nothing else.
        // A good 489 changes only the letters of unreadable messages.
        const kept = (jobId: string) =>
          !(sign === "good" && res.status === 489 &&
            jobId.endsWith("/unreadable"));
        assert.deepEqual(
          (await store.listDeadLetters({ limit: 1000 })).items.filter((l) =>
            kept(l.jobId)
          ),
          letters.filter((l) => kept(l.jobId)),
          `${sign} ${res.status} changed a dead letter`,
        );
        assert.equal(
          JSON.stringify(
            await Promise.all(FUZZ_INTENTS.map((i) => store.getIntent(i.id))),
          ),
          states,
        );
      }
    }),
    { numRuns: runs(5000) },
  );
  // No 413: an authenticated callback over the limit is kept unread (489),
  // as QStash would retry a 413 to the end; any other is refused by its
  // token first.
  for (const status of [200, 401, 489]) {
    assert.ok((statuses.get(status) ?? 0) > 0, `no ${status}`);
  }
});

Deno.test("createApp() survives 5,000 generated requests on POST /v1/pubsub/dead-letter", async () => {
  const google = await theGoogle();
  const { app, store, writes } = await makeApp({
    intents: [...FUZZ_INTENTS],
    deps: {
      pubsubDeadLetter: {
        audience: AUDIENCE,
        jwks: google.jwks,
        serviceAccount: PUBSUB.serviceAccount,
      },
    },
  });
  const nowS = Math.floor(Date.now() / 1000);
  const tokens: Record<Exclude<Sign, "none" | "replay">, string> = {
    good: await google.token({ aud: AUDIENCE }),
    bad: await google.token({
      aud: AUDIENCE,
      email: "attacker@evil.iam.gserviceaccount.com",
    }),
    other: await google.token(), // the main route's audience
    stale: await google.token({
      aud: AUDIENCE,
      iat: nowS - 7200,
      exp: nowS - 3600,
    }),
  };
  const valid = fc.record({
    message: fc.record({
      data,
      messageId: fc.oneof(fc.uuid(), weird),
      attributes: fc.oneof(
        fc.record({
          CloudPubSubDeadLetterSourceDeliveryCount: fc.oneof(
            fc.integer({ min: 1, max: 100 }).map(String),
            fc.string({ maxLength: 5 }),
          ),
        }),
        weird,
      ),
    }),
    subscription: fc.constant("projects/p/subscriptions/dl"),
  });
  const statuses = new Map<number, number>();
  await fc.assert(
    fc.asyncProperty(bodies(valid), signs, async (body, sign) => {
      const headers = new Headers();
      if (sign !== "none") {
        headers.set(
          "authorization",
          `Bearer ${tokens[sign === "replay" ? "good" : sign]}`,
        );
      }
      const before = writes();
      const res = await app.request("/v1/pubsub/dead-letter", {
        method: "POST",
        body,
        headers,
      });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      check(res, await res.text());
      const authentic = sign === "good" || sign === "replay";
      if (!authentic || (res.status >= 400 && res.status !== 503)) {
        assert.equal(writes(), before, `${sign} ${res.status} wrote`);
      }
    }),
    { numRuns: runs(5000) },
  );
  // No 413: an authenticated push over the limit is acked unread (Pub/Sub
  // would redeliver a 413 for days), any other refused by its token first.
  for (const status of [204, 401]) {
    assert.ok((statuses.get(status) ?? 0) > 0, `no ${status}`);
  }
  assert.ok(
    (await store.listDeadLetters({ limit: 1000 })).items.length > 0,
    "no give-up reached the store",
  );
});
