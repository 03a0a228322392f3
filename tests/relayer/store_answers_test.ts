/**
 * A store of one's own whose write returns nothing (a `return` left out)
 * is named where its answer is read, with the method to fix, not met as
 * "Cannot read properties of undefined"; one whose listDeadLetters()
 * returns nothing is a 503 that says so in the log, not a 200 with no body.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, ScriptedSender, type Store } from "../../mod.ts";
import {
  deadLetterPage,
  letterOrNull,
  writtenIntent,
} from "../../store/_rules.ts";
import {
  answersAs,
  OPS_TOKEN,
  opsAppOver,
  readIntentOver,
} from "./_answers_as.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

/**
 * A relayer over pi_0001, authorized, on a store whose `method` writes as
 * it should, then answers nothing; its Sender sends `txHashes` in turn.
 */
async function relayerOver(
  method: keyof Store,
  txHashes: string[],
  now: () => number = () => 0,
) {
  const { store, memory } = answersAs(method, () => undefined);
  await memory.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const sender = new ScriptedSender({
    pi_0001: { sends: txHashes.map((txHash) => ({ txHash })) },
  });
  return { relayer: createRelayer({ store, sender, now }), memory };
}

function refusal(method: string): string {
  return `Cannot read intent pi_0001 after the store's ${method}() as it returned undefined, not the intent as written: fix the Store's ${method} to answer it, and run the store contract (@relayer/poison/testing) against it`;
}

Deno.test("deliver() names a store's transition() to settling that answers nothing", async () => {
  const { relayer } = await relayerOver("transition", ["0xabc"]);
  const outcome = await relayer.deliver(job, 1);
  assert.equal(outcome.action, "retry");
  assert.equal(outcome.reason, refusal("transition"));
});

// The store wrote the record and answered nothing: "its record failed"
// said more than is known.
Deno.test("deliver() names a store's recordBroadcast() that answers nothing, keeping the hash sent and saying its record may have landed", async () => {
  const { relayer, memory } = await relayerOver("recordBroadcast", ["0xabc"]);
  const outcome = await relayer.deliver(job, 1);
  // It did land.
  assert.equal(
    (await memory.getIntent("pi_0001"))?.lastBroadcast?.txHash,
    "0xabc",
  );
  assert.equal(outcome.action, "retry");
  assert.equal(
    outcome.reason,
    `sent 0xabc, and its record may have landed: ${refusal("recordBroadcast")}`,
  );
});

Deno.test("deliver() names a store's beginBroadcast() that answers nothing, on a rescue", async () => {
  let now = 0;
  const { relayer } = await relayerOver(
    "beginBroadcast",
    ["0xabc", "0xdef"],
    () => now,
  );
  assert.equal((await relayer.deliver(job, 1)).action, "retry");
  now = 10 * 60_000; // past stuckAfter, unconfirmed: a rescue
  const outcome = await relayer.deliver(job, 2);
  assert.equal(outcome.action, "retry");
  assert.equal(outcome.reason, refusal("beginBroadcast"));
});

Deno.test("POST /v1/intents/:id/resolve answers 503 for a store's transition() that answers nothing, and logs why", async () => {
  const { store, memory } = answersAs("transition", () => undefined);
  await memory.createIntent({
    id: "pi_0001",
    state: "needs_review",
    hold: "pending",
    settlingSince: 0,
    lastBroadcast: { outcome: "not_sent", at: 0, error: "refused" },
    mayHaveSent: false,
  });
  const { app, lines } = opsAppOver(store);
  const intent = await memory.getIntent("pi_0001");
  const answer = await app.request("/v1/intents/pi_0001/resolve", {
    method: "POST",
    headers: {
      authorization: `Bearer ${OPS_TOKEN}`,
      "content-type": "application/json",
    },
    body: JSON.stringify({ to: "failed", version: intent!.version }),
  });
  const body = await answer.text();
  assert.equal(answer.status, 503, body);
  assert.ok(
    lines.some((line) => line.includes(refusal("transition"))),
    lines.join("\n"),
  );
});

Deno.test("GET /v1/dead-letters answers 503 for a store's listDeadLetters() that answers nothing, not a 200 with no body", async () => {
  const { store } = answersAs("listDeadLetters", () => undefined);
  const { app, lines } = opsAppOver(store);
  const answer = await app.request("/v1/dead-letters", {
    headers: { authorization: `Bearer ${OPS_TOKEN}` },
  });
  const body = await answer.text();
  assert.equal(answer.status, 503, body);
  assert.equal(JSON.parse(body).status, 503);
  assert.ok(
    lines.some((line) =>
      line.includes(
        "the store's listDeadLetters() returned undefined, not a page of them ({ items, cursor })",
      )
    ),
    lines.join("\n"),
  );
});

/** A MemoryStore whose getDeadLetter() answers `undefined` for a missing letter, as a `Map`'s get does. */
function lettersAsMap() {
  return answersAs("getDeadLetter", (letter) => letter ?? undefined);
}

const NO_LETTER =
  "Cannot read the dead letter of pi_0001/settle as the store returned undefined, not a dead letter or null: fix the Store's getDeadLetter, and run the store contract (@relayer/poison/testing) against it";

Deno.test("redrive() and discard() name a store's getDeadLetter() that answers undefined", async () => {
  const { store } = lettersAsMap();
  const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
  await assert.rejects(
    relayer.redrive("pi_0001/settle"),
    new TypeError(NO_LETTER),
  );
  await assert.rejects(
    relayer.discard("pi_0001/settle"),
    new TypeError(NO_LETTER),
  );
});

Deno.test("GET /v1/intents/:id answers 503 for a store's getDeadLetter() that answers undefined, not an intent with no word of its letter", async () => {
  const { store, memory } = lettersAsMap();
  const { status, body, lines } = await readIntentOver(store, memory);
  assert.equal(status, 503, body);
  assert.ok(lines.some((line) => line.includes(NO_LETTER)), lines.join("\n"));
});

Deno.test("a store's answer that is no letter, intent or page in any other form (null from a write, a string for a letter, a page without items) is refused as undefined is", () => {
  for (
    const [letter, shown] of [["pi_0001/settle", '"pi_0001/settle"'], [
      0,
      "0",
    ]] as const
  ) {
    assert.throws(
      () => letterOrNull("pi_0001/settle", letter),
      new TypeError(
        NO_LETTER.replace("returned undefined", `returned ${shown}`),
      ),
    );
  }
  assert.equal(letterOrNull("pi_0001/settle", null), null);
  assert.throws(
    () => writtenIntent("transition", "pi_0001", null),
    new TypeError(
      refusal("transition").replace("returned undefined", "returned null"),
    ),
  );
  for (
    const [page, shown] of [[{}, "{}"], [
      { items: null, cursor: null },
      '{"items":null,"cursor":null}',
    ], [null, "null"]] as const
  ) {
    assert.throws(
      () => deadLetterPage(page),
      (error: Error) =>
        error instanceof TypeError &&
        error.message.startsWith(
          `Cannot list dead letters as the store's listDeadLetters() returned ${shown}, not a page of them ({ items, cursor })`,
        ),
      shown,
    );
  }
  const page = { items: [], cursor: null };
  assert.equal(deadLetterPage(page), page);
});
