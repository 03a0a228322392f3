/**
 * A store of one's own whose `deliveries()` answers a count as text (a
 * driver's int8 read as a string) or as a BigInt is refused where the
 * count is read, naming the store's method and what it answered, not
 * coerced: `"0" === 0` is false, so a give-up mark not on record read as
 * on record, and the ops route answered the count as text.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createRelayer, MemoryStore, ScriptedSender } from "../../mod.ts";
import { BusyError } from "../../store/busy_error.ts";
import { genericRequest, makeApp } from "../webhook/_app.ts";
import {
  answersAs,
  OPS_TOKEN,
  opsAppOver,
  readIntentOver,
} from "./_answers_as.ts";

/** A MemoryStore whose `deliveries()` answers each count through `as`. */
function countsAs(as: (count: number) => unknown) {
  return answersAs("deliveries", as);
}

/** {@linkcode countsAs}, with pi_0001 authorized and its hold pending. */
async function countsAsOnHold(as: (count: number) => unknown) {
  const made = countsAs(as);
  await made.memory.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  return made;
}

const FORMS = [
  [String, '"0"'],
  [BigInt, "0n"],
  [() => undefined, "undefined"],
  [() => -1, "-1"],
  [() => 0.5, "0.5"],
] as const;

for (const [as, shown] of FORMS) {
  Deno.test(`giveUp() refuses a store whose deliveries() answers ${shown}, naming it, before it resolves anything`, async () => {
    const { store, memory } = await countsAsOnHold(as);
    const relayer = createRelayer({
      store,
      sender: new ScriptedSender({}),
      now: () => 1_000,
    });
    await assert.rejects(
      relayer.giveUp({ intentId: "pi_0001", kind: "settle" }, {
        deliveries: 3,
        queue: { queue: "qstash", messageId: "msg_1" },
      }),
      (error: Error) =>
        error instanceof TypeError &&
        error.message.includes(
          `as the store's deliveries() returned ${shown}, not a count (an integer >= 0): fix the Store's deliveries`,
        ),
    );
    assert.equal(await memory.getDeadLetter("pi_0001/settle"), null);
  });

  Deno.test(`GET /v1/intents/:id answers 503 and logs a store whose deliveries() answers ${shown}, not the count as it came`, async () => {
    const { store, memory } = countsAs(as);
    const { status, body, lines } = await readIntentOver(store, memory);
    assert.equal(status, 503, body);
    assert.ok(
      lines.some((line) =>
        line.includes(`the store's deliveries() returned ${shown}`)
      ),
      lines.join("\n"),
    );
  });
}

Deno.test("the relayer and the ops route read a store's numeric count as it is", async () => {
  const { store, memory } = countsAs((count) => count);
  await memory.createIntent({ id: "pi_0001", state: "authorized" });
  const { app } = opsAppOver(store);
  const answer = await app.request("/v1/intents/pi_0001", {
    headers: { authorization: `Bearer ${OPS_TOKEN}` },
  });
  assert.equal(answer.status, 200);
  assert.equal((await answer.json()).deliveries, 0);
});

Deno.test("deliver() refuses a store whose deliveries() answers no count while its admit() is busy, not a retry of delivery NaN", async () => {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const store = new Proxy(memory, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (key === "admit") return () => Promise.reject(new BusyError("busy"));
      if (key === "deliveries") return () => Promise.resolve(undefined);
      return value.bind(target);
    },
  });
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({}),
    now: () => 1_000,
  });
  await assert.rejects(
    relayer.deliver({ intentId: "pi_0001", kind: "settle" }),
    (error: Error) =>
      error instanceof TypeError &&
      error.message.includes(
        "as the store's deliveries() returned undefined, not a count",
      ),
  );
});

Deno.test("POST /v1/deliveries' give-up with no count of its own refuses a store that answers its message's count as text, naming that count, not taking it as delivery 1", async () => {
  const { store, memory } = countsAs(String);
  await memory.createIntent({ id: "pi_0001", state: "authorized" });
  const lines: string[] = [];
  const { app } = await makeApp({
    deps: { store, log: (line) => void lines.push(line) },
  });
  const answer = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({
      job: { intentId: "pi_0001", kind: "settle" },
      gaveUp: { messageId: "m-1" },
    })),
  );
  const body = await answer.text();
  assert.equal(answer.status, 503, body);
  assert.ok(
    lines.some((line) =>
      line.includes(
        `Cannot read the delivery count of generic/pi_0001/settle/message/m-1 as the store's deliveries() returned "0"`,
      )
    ),
    lines.join("\n"),
  );
  assert.equal(await memory.getDeadLetter("pi_0001/settle"), null);
});

Deno.test("a last delivery's drop refuses a store whose deliveries() answers a count as text once its marks are on record, where it reads them back", async () => {
  // A driver's int8 read as text where a row is, 0 where none is: the look
  // before the drop reads 0s, and only the read of the drop's own marks
  // meets the text.
  const { store } = await countsAsOnHold((count) =>
    count === 0 ? 0 : String(count)
  );
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 2, jitter: "none" },
    now: () => 1_000,
  });
  await assert.rejects(
    relayer.deliver({ intentId: "pi_0001", kind: "settle" }, 2, {
      message: { queue: "qstash", messageId: "msg_1" },
    }),
    (error: Error) =>
      error instanceof TypeError &&
      error.message.includes(
        `as the store's deliveries() returned "1", not a count (an integer >= 0): fix the Store's deliveries`,
      ),
  );
});
