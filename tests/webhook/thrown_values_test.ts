/**
 * A store written in plain JavaScript may reject with anything. The
 * webhook's log line and answer say what it was (a short `name` or `code`
 * and its kind), never `[object Object]`, never a field that may hold a
 * credential, and a value with no prototype does not break the answer.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp, qstashPublisher } from "../../webhook/app.ts";
import { MemoryStore, ScriptedSender, type Store } from "../../mod.ts";
import { signHmac } from "./_signing.ts";

const SECRET = "webhook-secret-for-tests";
const NOW = 1_764_504_000_000;
const DATABASE = "postgres://relayer:hunter2@db.internal/payments";

/** A store whose every read of an intent rejects with `thrown`. */
function failingReads(thrown: unknown): Store {
  const store = new MemoryStore();
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (key === "getIntent") return () => Promise.reject(thrown);
      return value.bind(target);
    },
  });
}

for (
  const [thrown, shown] of [
    [
      { code: "ECONNRESET", url: DATABASE },
      'Object with code "ECONNRESET" (not an Error)',
    ],
    [Object.create(null), "an object with no prototype (not an Error)"],
    [null, "null (not an Error)"],
  ] as const
) {
  Deno.test(`createApp() logs a store that rejects with ${shown} as that, and answers 503 with no stack or field of it`, async () => {
    const lines: string[] = [];
    const app = createApp({
      store: failingReads(thrown),
      sender: new ScriptedSender({}),
      now: () => NOW,
      random: () => 0,
      webhookSecret: SECRET,
      log: (line) => void lines.push(line),
    });
    const body = JSON.stringify({
      job: { intentId: "pi_0001", kind: "settle" },
      delivery: 1,
    });
    const answer = await app.request("/v1/deliveries", {
      method: "POST",
      body,
      headers: {
        "content-type": "application/json",
        "x-signature": signHmac(SECRET, body, Math.floor(NOW / 1000)),
      },
    });
    const text = await answer.text();
    assert.equal(answer.status, 503, text);
    const all = `${lines.join("\n")}\n${text}`;
    assert.ok(lines.some((line) => line.includes(shown)), lines.join("\n"));
    assert.ok(!all.includes("[object Object]"), all);
    assert.ok(!all.includes("hunter2"), all);
    assert.doesNotMatch(all, /\n\s+at |file:\/\//);
  });
}

Deno.test("qstashPublisher() says what a fetch that rejects with no Error was, by its kind and code, not as [object Object]", async () => {
  const publisher = qstashPublisher({
    token: "qstash-token-for-thrown-values",
    publicUrl: "https://relayer.example",
    retries: 3,
  });
  const fetch = globalThis.fetch;
  globalThis.fetch = () =>
    Promise.reject({ code: "ECONNRESET", url: DATABASE });
  try {
    await assert.rejects(
      publisher.publish({ intentId: "pi_0001", kind: "settle" }),
      (error: Error) => {
        assert.match(
          error.message,
          /^QStash did not answer the publish of pi_0001\/settle \(Object with code "ECONNRESET" \(not an Error\)\)/,
        );
        assert.ok(!error.message.includes("hunter2"), error.message);
        return true;
      },
    );
  } finally {
    globalThis.fetch = fetch;
  }
});
