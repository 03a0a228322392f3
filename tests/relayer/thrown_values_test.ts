/**
 * A Sender or store written in plain JavaScript may throw (or reject with)
 * anything: `{ code: "ECONNRESET" }`, a string, `null`. What the relayer
 * keeps and answers of it says what it was, never `[object Object]`, and
 * reads no field but a short `name` or `code`: the object may hold a
 * credential.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  createRelayer,
  HttpSender,
  MemoryStore,
  type Sender,
} from "../../mod.ts";
import { describeError, messageOf } from "../../policy/_walk.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

/** A Sender whose send throws `thrown`, on an authorized intent. */
async function throwingSend(thrown: unknown, reject: boolean) {
  const store = new MemoryStore();
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const sender: Sender = {
    send: reject ? () => Promise.reject(thrown) : () => {
      throw thrown;
    },
    receipt: () => Promise.resolve("pending"),
  };
  let now = 0;
  const relayer = createRelayer({
    store,
    sender,
    policy: { maxDeliveries: 2 },
    now: () => now,
    random: () => 0,
  });
  const first = await relayer.deliver(job, 1);
  now = 10 * 60_000; // past stuckAfter: the second delivery rescues, and throws again
  const last = await relayer.deliver(job, 2);
  const letter = await store.getDeadLetter("pi_0001/settle");
  const intent = await store.getIntent("pi_0001");
  return { first, last, letter, intent };
}

const SECRET = "pg://relayer:hunter2@db.internal/payments";

for (
  const [thrown, shown] of [
    [
      { code: "ECONNRESET", url: SECRET },
      'Object with code "ECONNRESET" (not an Error)',
    ],
    [
      new (class FetchFailure {
        readonly name = "FetchFailure";
        readonly code = -104;
        readonly password = SECRET;
      })(),
      "FetchFailure with code -104 (not an Error)",
    ],
    [null, "null (not an Error)"],
    [undefined, "undefined (not an Error)"],
    [Object.create(null), "an object with no prototype (not an Error)"],
    ["signer said no", "signer said no"],
    // A send given to several nodes, each failing: said by its members.
    [
      new AggregateError([
        new Error("node a timed out"),
        new Error("node b reset"),
      ]),
      "node a timed out, node b reset",
    ],
  ] as const
) {
  for (const reject of [false, true]) {
    Deno.test(`createRelayer() shows a Sender that ${reject ? "rejects with" : "throws"} ${shown} as that, in its answer, broadcast record and dead letter`, async () => {
      const { first, last, letter, intent } = await throwingSend(
        thrown,
        reject,
      );
      assert.equal(first.reason, `send: ${shown}`);
      assert.equal(intent?.lastBroadcast?.outcome, "unknown");
      assert.equal(intent?.lastBroadcast?.error, shown);
      assert.equal(last.action, "poison");
      assert.equal(letter?.lastError, `send: ${shown}`);
      const kept = JSON.stringify([first, last, letter, intent]);
      assert.ok(!kept.includes("[object Object]"), kept);
      assert.ok(!kept.includes("hunter2"), kept);
    });
  }
}

Deno.test("createRelayer() keeps a thrown string of a whole body cut, saying how much was left", async () => {
  const body = `<html>${"x".repeat(20_000)}</html>`;
  const { first, intent } = await throwingSend(body, false);
  const note = `… (${body.length} characters in all)`;
  assert.equal(
    intent?.lastBroadcast?.error,
    `${body.slice(0, 1000 - note.length)}${note}`,
  );
  assert.ok(first.reason.length < 1100, String(first.reason.length));
});

Deno.test("messageOf() and describeError() read no field of a thrown object but a short one-line name or code, and never throw", () => {
  const read: string[] = [];
  const watched = new Proxy({ name: "x".repeat(65), code: "a\nb" }, {
    get(target, key) {
      read.push(String(key));
      return Reflect.get(target, key);
    },
  });
  assert.equal(messageOf(watched), "Object (not an Error)");
  assert.deepEqual(read.filter((key) => key !== "constructor"), [
    "message",
    "name",
    "code",
  ]);
  const trap = new Proxy({}, {
    getPrototypeOf() {
      throw new Error("trap");
    },
    get() {
      throw new Error("trap");
    },
  });
  assert.equal(messageOf(trap), "unprintable error");
  assert.equal(describeError(trap), "unprintable error");
  assert.equal(
    describeError(Object.create(null)),
    "an object with no prototype (not an Error)",
  );
  assert.equal(
    describeError({ code: "ETIMEDOUT" }),
    'Object with code "ETIMEDOUT" (not an Error)',
  );
  assert.equal(describeError(new TypeError("x")), "TypeError: x");
  assert.equal(messageOf(Symbol("pg://u:secret@h")), "a symbol (not an Error)");
  assert.equal(messageOf(2n ** 300n), "a bigint (not an Error)");
  assert.equal(messageOf(7), "7 (not an Error)");
});

Deno.test("HttpSender names a fetch that rejects with no Error by its kind and code, not as [object Object]", async () => {
  const sender = new HttpSender({
    url: "http://signer.internal",
    fetch: () => Promise.reject({ code: "ECONNREFUSED", url: SECRET }),
  });
  await assert.rejects(
    sender.send({ id: "pi_0001" } as never, { replace: false }),
    (error: Error) => {
      assert.equal(
        error.message,
        'signer unreachable: Object with code "ECONNREFUSED" (not an Error)',
      );
      return true;
    },
  );
});

Deno.test("messageOf() and describeError() at their bounds: a string of 1,000 characters whole, one of 1,001 cut; a name or code of 64 characters shown, of 65 or empty not", () => {
  const whole = "s".repeat(1000);
  assert.equal(messageOf(whole), whole);
  const cut = messageOf(`${whole}t`);
  assert.equal(cut.length, 1000);
  assert.ok(cut.endsWith("… (1001 characters in all)"), cut);
  const named = (name: string) => ({ name, code: "E" });
  assert.equal(
    messageOf(named("n".repeat(64))),
    `Object with name "${"n".repeat(64)}", code "E" (not an Error)`,
  );
  assert.equal(
    messageOf(named("n".repeat(65))),
    'Object with code "E" (not an Error)',
  );
  assert.equal(messageOf(named("")), 'Object with code "E" (not an Error)');
  // A bigint of 64 characters with its n, and one of 65.
  assert.equal(messageOf(10n ** 62n), `1${"0".repeat(62)}n (not an Error)`);
  assert.equal(messageOf(10n ** 63n), "a bigint (not an Error)");
  // A code that is a number is shown only when finite.
  assert.equal(
    messageOf({ code: Number.NaN }),
    "Object (not an Error)",
  );
  // An Error whose name is empty, or too long, is said as an Error.
  const unnamed = new Error("went wrong");
  unnamed.name = "";
  assert.equal(describeError(unnamed), "Error: went wrong");
  const long = new Error("went wrong");
  long.name = "N".repeat(65);
  assert.equal(describeError(long), "Error: went wrong");
});

Deno.test("messageOf() and describeError() say an Error whose message is no string by its name, and a number or boolean message with it, once", () => {
  const numbered = new TypeError();
  (numbered as { message: unknown }).message = 42;
  assert.equal(messageOf(numbered), "TypeError: 42");
  assert.equal(describeError(numbered), "TypeError: 42");
  const flagged = new RangeError();
  (flagged as { message: unknown }).message = false;
  assert.equal(messageOf(flagged), "RangeError: false");
  const objected = new TypeError();
  (objected as { message: unknown }).message = { token: "hunter2" };
  assert.equal(messageOf(objected), "TypeError");
  assert.equal(describeError(objected), "TypeError");
});

Deno.test("describeError() reads no more than 16 members of an AggregateError with no message, however many it holds", () => {
  let read = 0;
  const members = new Proxy(
    Array.from({ length: 10_000 }, () => new Error("refused")),
    {
      get(target, key, receiver) {
        if (typeof key === "string" && /^\d+$/.test(key)) read++;
        return Reflect.get(target, key, receiver);
      },
    },
  );
  const aggregate = new AggregateError([]);
  Object.defineProperty(aggregate, "errors", { value: members });
  assert.equal(
    describeError(aggregate),
    `AggregateError: ${Array(16).fill("refused").join(", ")}`,
  );
  assert.ok(read <= 16, `${read} members read`);
});
