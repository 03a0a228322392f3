/**
 * QStash's failure callback whose give-up the store answers busy for a
 * reason that is no lease (another database session's lock, its
 * statements cancelled), which can last as long as an outage. The callback
 * has as many retries as the message: asked back after the policy's delay
 * (2 min at most), they passed within minutes, and the message went to
 * QStash's DLQ with its intent unresolved and no dead letter of ours. A
 * give-up answered busy sends no `Retry-After`, as a give-up the store
 * failed does not: QStash waits as its own backoff says (to a day).
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Store } from "../../mod.ts";
import { MemoryStore } from "../../mod.ts";
import { heldBySession } from "../../store/_held_lock.ts";
import { heldWrites } from "../_held_writes.ts";
import { makeApp } from "./_app.ts";
import { failedRequest, failureCallback } from "./_signing.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

/** A fresh store with `pi_0001` authorized, its hold pending. */
async function authorized(): Promise<MemoryStore> {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  return memory;
}

/**
 * `memory`, every write to an intent or a letter refused as another
 * session's lock holds its row; the replay record (`admit`) refused with
 * what `admit` makes of its write, or landing without it.
 */
function held(
  memory: MemoryStore,
  admit?: (write: { count?: unknown }) => Error,
): Store {
  const store = heldWrites(memory, ["admit"]);
  if (admit === undefined) return store;
  return new Proxy(store, {
    get(target, key) {
      if (key !== "admit") return Reflect.get(target, key, target);
      return (write: { count?: unknown }) => Promise.reject(admit(write));
    },
  });
}

/** QStash's failure callback for `job`, its retries spent. */
const giveUp = failureCallback(job);

/**
 * The give-up's answer from an app on `store`, checked to be a 503 with no
 * `Retry-After`: its body, and the lines the app logged.
 */
async function busyAnswer(store: Store) {
  const lines: string[] = [];
  const { app } = await makeApp({
    deps: { store, log: (line) => lines.push(line) },
  });
  const res = await app.request(
    "/v1/qstash/failed",
    await failedRequest(giveUp),
  );
  const text = await res.text();
  assert.equal(res.status, 503, text);
  assert.equal(res.headers.get("retry-after"), null, text);
  return { text, lines };
}

Deno.test("POST /v1/qstash/failed answers a give-up its store answers busy with 503 and no Retry-After, so the callback's retries wait on QStash's backoff", async () => {
  const memory = await authorized();
  const { text } = await busyAnswer(held(memory));
  assert.equal(JSON.parse(text).outcome, "retry", text);
  assert.equal((await memory.getIntent("pi_0001"))?.state, "authorized");
  assert.equal(await memory.getDeadLetter("pi_0001/settle"), null);
});

Deno.test("POST /v1/qstash/failed answers a give-up whose store is busy on its writes and its replay record as busy (503, a retry), not as the store failing unexpectedly", async () => {
  const memory = await authorized();
  const store = held(memory, () =>
    heldBySession(
      "Cannot admit a delivery as another session cancelled its statement: nothing was written; retry",
      new Error("canceling statement due to user request"),
    ));
  const { text, lines } = await busyAnswer(store);
  assert.doesNotMatch(text, /failed unexpectedly/);
  assert.equal(JSON.parse(text).outcome, "retry", text);
  assert.match(JSON.parse(text).reason, /^intent pi_0001 is busy: /);
  assert.doesNotMatch(lines.join("\n"), /unexpectedly/);
  assert.equal(await memory.getDeadLetter("pi_0001/settle"), null);
});

Deno.test("POST /v1/qstash/failed refuses a replay of a give-up its store answered busy: the first used its signature, and the replay is not asked back", async () => {
  // The first call's writes are busy and land nothing, but its replay
  // record does: the same signed request again is a replay, refused (401)
  // as any is, not answered busy as if it were the queue's own retry.
  const memory = await authorized();
  const { app } = await makeApp({ deps: { store: held(memory) } });
  const request = await failedRequest(giveUp);
  const first = await app.request("/v1/qstash/failed", request);
  assert.equal(first.status, 503, await first.text());
  const replay = await app.request("/v1/qstash/failed", request);
  const text = await replay.text();
  assert.equal(replay.status, 401, text);
  assert.match(text, /a replay is refused/);
  assert.equal((await memory.getIntent("pi_0001"))?.state, "authorized");
});

Deno.test("POST /v1/qstash/failed answers a busy give-up whose replay record the store then fails as the store failing, not as busy", async () => {
  // Busy says nothing landed; a replay record whose write failed
  // otherwise may have landed, and is answered as the store failing (503,
  // the queue calls again), not taken for busy.
  const memory = await authorized();
  // The give-up's mark (which carries the replay record) is busy; the
  // replay record's own write after it fails.
  const store = held(
    memory,
    (write) =>
      write.count === undefined
        ? new Error("connection reset by peer")
        : heldBySession(
          "Cannot admit a delivery as another session holds its row past lock_timeout: nothing was written; retry",
          new Error("canceling statement due to lock timeout"),
        ),
  );
  const { text, lines } = await busyAnswer(store);
  assert.match(text, /failed unexpectedly/);
  assert.match(
    lines.join("\n"),
    /give-up failed unexpectedly: Error: connection reset by peer/,
  );
  assert.equal(await memory.getDeadLetter("pi_0001/settle"), null);
});
