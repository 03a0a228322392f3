/**
 * A redrive or a discard whose read of its dead letter or intent fails
 * (PostgreSQL's statement_timeout, or a store of one's own that throws a
 * plain Error) failed before anything was published or written: the route
 * says it read nothing and wrote nothing, never that the redrive "did not
 * complete … if it did complete after all" or that the discard "may have
 * landed or not". A failure after the publish or a write still says so.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  ConflictError,
  createRelayer,
  type Job,
  MemoryStore,
  ScriptedSender,
  type Store,
  type StoredDeadLetter,
} from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { isNotRead, notRead, notWritten } from "../../store/_not_written.ts";
import { schemaBehind } from "../../store/_schema_behind.ts";
import { createApp } from "../../webhook/app.ts";
import { deadLetter } from "../store/_contract.ts";
import { onFreshSchema, postgresAvailable } from "../_postgres.ts";

const OPS = "ops-token-for-redrive-read-tests";
const REDRIVE = "/v1/dead-letters/pi_0001/settle/redrive";
const LETTER = "/v1/dead-letters/pi_0001/settle";

/** Seeds `store` with an authorized intent and its job's dead letter. */
async function seed(store: Store): Promise<void> {
  await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  await store.putDeadLetter(deadLetter("pi_0001/settle", 1));
}

/** An app on `store` that redrives to `queued`, and its log. */
function appOn(store: Store) {
  const queued: Job[] = [];
  const lines: string[] = [];
  const app = createApp({
    store,
    sender: new ScriptedSender({}),
    opsToken: OPS,
    log: (line) => void lines.push(line),
    redriveTo: { publish: (job) => Promise.resolve(void queued.push(job)) },
  });
  const ask = async (method: string, path: string) => {
    const res = await app.request(path, {
      method,
      headers: { authorization: `Bearer ${OPS}` },
    });
    return { status: res.status, ...(await res.json()) };
  };
  return { ask, queued, lines };
}

/** Asserts the redrive's and the discard's answers: nothing read or written. */
async function assertReadNothing(store: Store): Promise<string> {
  const { ask, queued, lines } = appOn(store);
  const redrive = await ask("POST", REDRIVE);
  assert.equal(redrive.status, 503, redrive.detail);
  assert.equal(redrive.type, "urn:relayer:problem:redrive-failed");
  assert.equal(
    redrive.detail,
    "The redrive of pi_0001/settle read nothing and wrote nothing (its read of the store failed: the relayer's log says why): its dead letter stays, and no job was queued; try again.",
  );
  const discard = await ask("DELETE", LETTER);
  assert.equal(discard.status, 503, discard.detail);
  assert.equal(discard.type, "urn:relayer:problem:store-failed");
  assert.equal(
    discard.detail,
    "The discard of pi_0001/settle read nothing and wrote nothing (its read of the store failed: the relayer's log says why): nothing changed; try again.",
  );
  assert.deepEqual(queued, [], "nothing queued");
  return lines.join("\n");
}

for (const table of ["dead_letters", "intents"]) {
  Deno.test({
    name:
      `a redrive and a discard whose read of ${table} PostgreSQL's statement_timeout cancels say they read nothing and wrote nothing`,
    ignore: !postgresAvailable,
    fn: onFreshSchema({
      migrateOn: "admin",
      connection: { statement_timeout: "200" },
    }, async ({ admin, schema, store }) => {
      await seed(new PostgresStore(admin, { schema }));
      const locker = await admin.reserve();
      let log: string;
      try {
        await locker.unsafe("BEGIN");
        await locker.unsafe(
          `LOCK TABLE "${schema}".${table} IN ACCESS EXCLUSIVE MODE`,
        );
        log = await assertReadNothing(store);
      } finally {
        await locker.unsafe("ROLLBACK").catch(() => {});
        locker.release();
      }
      // The log says why: the statement_timeout cancelled the read.
      assert.match(log, /statement_timeout/);
      // Nothing changed: the letter is there, and the intent as it was.
      assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
      assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
    }),
  });
}

/**
 * A store of one's own whose `method` throws a plain Error once armed
 * (`getDeadLetter` at once, as a function that is not async does).
 */
function failing(
  method: "getDeadLetter" | "getIntent" | "admit" | "redrive",
): { store: MemoryStore; arm: (on?: boolean) => void } {
  let armed = false;
  class Failing extends MemoryStore {
    override getDeadLetter(jobId: string): Promise<StoredDeadLetter | null> {
      if (armed && method === "getDeadLetter") {
        throw new Error("socket hang up");
      }
      return super.getDeadLetter(jobId);
    }
    override getIntent(id: string) {
      if (armed && method === "getIntent") {
        return Promise.reject(new Error("socket hang up"));
      }
      return super.getIntent(id);
    }
    override admit(...args: Parameters<MemoryStore["admit"]>) {
      if (armed && method === "admit") {
        return Promise.reject(new Error("socket hang up"));
      }
      return super.admit(...args);
    }
    override redrive(...args: Parameters<MemoryStore["redrive"]>) {
      if (armed && method === "redrive") {
        return Promise.reject(new Error("socket hang up"));
      }
      return super.redrive(...args);
    }
  }
  return { store: new Failing(), arm: (on = true) => void (armed = on) };
}

for (const method of ["getDeadLetter", "getIntent"] as const) {
  Deno.test(`a redrive and a discard on a store of one's own whose ${method} throws a plain Error say they read nothing and wrote nothing`, async () => {
    const { store, arm } = failing(method);
    await seed(store);
    arm();
    const log = await assertReadNothing(store);
    // The log keeps the store's own words.
    assert.match(log, /socket hang up/);
    arm(false);
    assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
  });
}

Deno.test("a redrive's read refused is marked as nothing read, as a copy: the store's own error is left as it was", async () => {
  const refused = new Error("socket hang up");
  const store = new (class extends MemoryStore {
    override getDeadLetter(): Promise<StoredDeadLetter | null> {
      return Promise.reject(refused);
    }
  })();
  const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
  for (const call of [relayer.redrive, relayer.discard]) {
    await assert.rejects(call("pi_0001/settle"), (error: Error) => {
      assert.equal(isNotRead(error), true);
      assert.equal(error.cause, refused);
      return true;
    });
  }
  // Another call that met the same error (a write's read back) is not
  // told that it read nothing.
  assert.equal(isNotRead(refused), false);
});

Deno.test("a redrive's and a discard's read refused keeps the store error's name in its copy, and a refusal the routes word already (a conflict, the schema behind, a write's refusal, a read marked so) is passed on as it is", async () => {
  const timedOut = new Error("read timed out");
  timedOut.name = "TimeoutError";
  const refusals = [
    new ConflictError("the letter changed under the read"),
    schemaBehind(new Error("relation does not exist")),
    notWritten(new Error("refused as read-only")),
    notRead(new Error("closed")),
  ];
  for (const thrown of [timedOut, ...refusals]) {
    for (const method of ["getDeadLetter", "getIntent"] as const) {
      const store = new (class extends MemoryStore {
        override getDeadLetter(jobId: string) {
          return method === "getDeadLetter"
            ? Promise.reject(thrown)
            : super.getDeadLetter(jobId);
        }
        override getIntent(id: string) {
          return method === "getIntent"
            ? Promise.reject(thrown)
            : super.getIntent(id);
        }
      })();
      await store.putDeadLetter(deadLetter("pi_0001/settle", 1));
      const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
      for (const call of [relayer.redrive, relayer.discard]) {
        await assert.rejects(call("pi_0001/settle"), (error: Error) => {
          if (thrown === timedOut) {
            assert.notEqual(error, thrown);
            assert.equal(error.name, "TimeoutError", method);
            assert.equal(error.message, "read timed out", method);
          } else assert.equal(error, thrown, `${thrown.message} ${method}`);
          return true;
        });
      }
    }
  }
});

for (const method of ["admit", "redrive"] as const) {
  Deno.test(`a redrive whose store's ${method} fails after the publish says it may have completed, and a discard that it may have landed`, async () => {
    const { store, arm } = failing(method);
    await seed(store);
    // A letter with its message's ids, which the redrive marks; and one
    // of no intent, which a discard takes.
    await store.putDeadLetter({
      ...deadLetter("pi_0001/settle", 2),
      queue: { queue: "qstash", messageId: "msg_1" },
    });
    await store.putDeadLetter({
      ...deadLetter("pi_0002/settle", 2),
      queue: { queue: "qstash", messageId: "msg_2" },
    });
    arm();
    const { ask, queued } = appOn(store);
    const redrive = await ask("POST", REDRIVE);
    assert.equal(redrive.status, 503, redrive.detail);
    assert.match(
      redrive.detail,
      /^The redrive of pi_0001\/settle did not complete \(the relayer's log says why\): try again\. If it did complete after all/,
    );
    // It published first: never that no job was queued.
    assert.equal(queued.length, 1);
    assert.doesNotMatch(redrive.detail, /no job was queued|read nothing/);
    const discard = await ask("DELETE", "/v1/dead-letters/pi_0002/settle");
    assert.equal(discard.status, 503, discard.detail);
    assert.match(discard.detail, /may have landed or not/);
    assert.doesNotMatch(discard.detail, /read nothing/);
  });
}

Deno.test("a redrive whose store answers its letter's read with no letter at all is not said to have read nothing: the store is to fix", async () => {
  const store = new (class extends MemoryStore {
    override getDeadLetter(): Promise<StoredDeadLetter | null> {
      return Promise.resolve(undefined as unknown as null);
    }
  })();
  await seed(store);
  const { ask } = appOn(store);
  const redrive = await ask("POST", REDRIVE);
  assert.equal(redrive.status, 503, redrive.detail);
  assert.doesNotMatch(redrive.detail, /read nothing/);
});
