/**
 * A delivery whose store answers busy on a call the relayer makes outside
 * the settle step (the admission that counts it or records its replay
 * claim, the count read after a busy admission): PostgresStore's
 * `BusyError` for a statement `pg_cancel_backend` or `statement_timeout`
 * cut, or for another session's lock. Nothing of the call landed, so the
 * delivery is answered busy (a retry, 503), as a busy write in the settle
 * step is, never "the store failed unexpectedly".
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore, type Store } from "../../mod.ts";
import { heldBySession } from "../../store/_held_lock.ts";
import { genericRequest, makeApp } from "./_app.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

/** PostgresStore's error for a statement another session cancelled. */
function cancelledBusy(what: string): Error {
  return heldBySession(
    `Cannot ${what} as another session cancelled its statement (canceling statement due to user request: pg_cancel_backend; see pg_stat_activity): nothing was written; retry`,
    Object.assign(new Error("canceling statement due to user request"), {
      code: "57014",
    }),
  );
}

/**
 * PostgresStore's error for a read outside a write that another session
 * cancelled: a plain `Error`, as a read decides nothing (store/postgres.ts,
 * `#readOnly`).
 */
function cancelledRead(): Error {
  return new Error(
    "The store's read of the deliveries counted for pi_0001/settle failed as another session cancelled its statement (canceling statement due to user request: pg_cancel_backend; see pg_stat_activity): nothing was read; retry",
  );
}

/**
 * `memory`, with `busy` calls rejected as cancelled, and `read` calls as
 * a read cancelled.
 */
function busyOn(
  memory: MemoryStore,
  busy: ReadonlySet<string>,
  read: ReadonlySet<string> = new Set(),
): Store {
  return new Proxy(memory, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      return busy.has(String(key))
        ? () => Promise.reject(cancelledBusy(String(key)))
        : read.has(String(key))
        ? () => Promise.reject(cancelledRead())
        : value.bind(target);
    },
  });
}

for (
  const [name, body, busy, read] of [
    [
      "a numbered delivery whose replay record's admission",
      { job, delivery: 2 },
      new Set(["admit"]),
    ],
    [
      "a delivery counted in the store whose count's admission",
      { job },
      new Set(["admit"]),
    ],
    [
      "a delivery counted in the store whose admission and count read",
      { job },
      new Set(["admit", "deliveries"]),
    ],
    [
      "a delivery counted in the store whose admission (busy) and count read (a read's error)",
      { job },
      new Set(["admit"]),
      new Set(["deliveries"]),
    ],
  ] as const
) {
  Deno.test(`createApp() answers ${name} the store cancelled as busy (503, a retry), not as a store failing unexpectedly`, async () => {
    const lines: string[] = [];
    const memory = new MemoryStore();
    await memory.createIntent({ id: "pi_0001", state: "created" });
    const { app } = await makeApp({
      deps: {
        store: busyOn(memory, busy, read),
        log: (line) => lines.push(line),
      },
    });
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(JSON.stringify(body)),
    );
    const text = await res.text();
    assert.equal(res.status, 503, text);
    assert.doesNotMatch(text, /failed unexpectedly/);
    const answer = JSON.parse(text);
    assert.equal(answer.outcome, "retry", text);
    assert.match(answer.reason, /^intent pi_0001 is busy: /);
    assert.match(answer.reason, /cancelled its statement/);
    assert.ok(res.headers.get("retry-after") !== null, text);
    assert.equal(lines.length, 1, lines.join("\n"));
    assert.doesNotMatch(lines[0]!, /unexpectedly/);
    assert.match(
      lines[0]!,
      /^worker {2}pi_0001\/settle +#\d+ {2}retry +\(intent pi_0001 is busy: /,
    );
  });
}
