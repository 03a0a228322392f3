/**
 * How often PostgresStore asks again a read, or a `BEGIN`, rejected with a
 * server's goodbye (postgres.js 3.4.9 hands one kept from a connection the
 * server ended to the next request that opens it, unsent): once more than
 * the pool has connections at most, never past `connectionWaitMs`, never
 * for another error, and never a transaction whose work began. The
 * client's answers are scripted over a postgres.js client that connects
 * to nothing: what is counted is how often the store asks, which a real
 * server's goodbyes cannot be made to repeat on cue
 * (`postgres_kept_goodbye_test.ts` runs them against one).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { deadLetter } from "./_contract.ts";

/** The server's goodbye to a session, as postgres.js rejects with it. */
function goodbye(): Error {
  return Object.assign(
    new Error("terminating connection due to administrator command"),
    { severity: "FATAL", code: "57P01" },
  );
}

/**
 * `rows` as postgres.js answers a statement that completed: `command` set
 * (the store takes an answer without one as the connection lost).
 */
function completed(rows: object[]): object[] {
  return Object.assign(rows, { command: "SELECT", count: rows.length });
}

/** Resolves after `ms`. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * A store over a client of `max` connections whose `deliveries` reads
 * answer as `read` says (the n-th read, from 1) and whose `sql.begin`
 * answers as `begin` says; every other query answers at once with no
 * rows (the `SELECT 1`s of the store's rounds after a lost connection,
 * counted as `selects`).
 */
function scripted(
  options: {
    max: number;
    fetchTypes?: boolean;
    connectionWaitMs?: number;
    read?: (n: number) => Promise<unknown>;
    begin?: (n: number, work: (tx: unknown) => unknown) => Promise<unknown>;
  },
) {
  const sql = postgres("postgres://relayer@127.0.0.1:9/none", {
    max: options.max,
    fetch_types: options.fetchTypes ?? true,
    onnotice: () => {},
  });
  const asked = { reads: 0, begins: 0, selects: 0 };
  const client = new Proxy(sql, {
    apply(target, self, args) {
      const [strings] = args as [unknown];
      if (Array.isArray(strings) && "raw" in strings) {
        if (String(strings[0]).includes("SELECT deliveries")) {
          return options.read!(++asked.reads);
        }
        if (strings.join("$1").trim() === "SELECT $1::int") asked.selects++;
        return Promise.resolve(completed([]));
      }
      return Reflect.apply(target, self, args);
    },
    get(target, key, receiver) {
      if (key === "begin" && options.begin) {
        return (_isolation: string, work: (tx: unknown) => unknown) =>
          options.begin!(++asked.begins, work);
      }
      return Reflect.get(target, key, receiver);
    },
  });
  const store = new PostgresStore(client, {
    connectionWaitMs: options.connectionWaitMs ?? 10_000,
  });
  return {
    store,
    asked,
    async [Symbol.asyncDispose]() {
      store.close();
      await sql.end({ timeout: 0 });
    },
  };
}

Deno.test("PostgresStore asks a read rejected with a server's goodbye again, once more than its pool has connections at most", async () => {
  // A pool of 2: 3 asks, each connection's kept goodbye and one more.
  {
    await using s = scripted({
      max: 2,
      read: (n) =>
        n <= 2
          ? Promise.reject(goodbye())
          : Promise.resolve(completed([{ deliveries: 7, expires_at: null }])),
    });
    assert.equal(await s.store.deliveries("pi_1/settle"), 7);
    assert.equal(s.asked.reads, 3);
  }
  {
    await using s = scripted({
      max: 2,
      read: (n) =>
        n <= 3
          ? Promise.reject(goodbye())
          : Promise.resolve(completed([{ deliveries: 7, expires_at: null }])),
    });
    await assert.rejects(
      s.store.deliveries("pi_1/settle"),
      /terminating connection due to administrator command/,
    );
    assert.equal(s.asked.reads, 3);
  }
});

Deno.test("PostgresStore asks a read rejected with a server's goodbye no more once connectionWaitMs passed", async () => {
  // Each ask is refused 300 ms after it is made; the bound falls at 500 ms,
  // between the second ask's making and its refusal.
  await using s = scripted({
    max: 9,
    connectionWaitMs: 500,
    read: () => sleep(300).then(() => Promise.reject(goodbye())),
  });
  await assert.rejects(
    s.store.deliveries("pi_1/settle"),
    /did not answer the store's read within 500ms/,
  );
  await sleep(700); // past the second ask's refusal, and a third's
  assert.equal(s.asked.reads, 2);
});

Deno.test("PostgresStore begins a transaction rejected with a server's goodbye again (fetch_types: false), and not one rejected otherwise or whose work began", async () => {
  const letter = deadLetter("pi_1/settle", 5);
  // A goodbye each time: asked once more than the pool has connections,
  // the store's rounds of SELECT 1 sent to take the other goodbyes kept.
  {
    await using s = scripted({
      max: 2,
      fetchTypes: false,
      begin: () => Promise.reject(goodbye()),
    });
    await assert.rejects(
      s.store.putDeadLetter(letter, { intentVersion: "1" }),
      /terminating connection due to administrator command/,
    );
    assert.equal(s.asked.begins, 3);
    // Sent a timer's turn after the loss, once postgres.js reported the
    // connection's close.
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.ok(s.asked.selects > 0);
  }
  // Refused at its start for another reason: not asked again.
  {
    await using s = scripted({
      max: 2,
      fetchTypes: false,
      begin: () =>
        Promise.reject(
          Object.assign(new Error("sorry, too many clients already"), {
            severity: "FATAL",
            code: "53300",
          }),
        ),
    });
    await assert.rejects(
      s.store.putDeadLetter(letter, { intentVersion: "1" }),
      /too many clients already/,
    );
    assert.equal(s.asked.begins, 1);
  }
  // Its work began, then met a goodbye: never begun again.
  {
    const throwing = () => {
      throw goodbye();
    };
    const tx = new Proxy(throwing, { get: throwing, apply: throwing });
    await using s = scripted({
      max: 2,
      fetchTypes: false,
      begin: async (_, work) => await work(tx),
    });
    await assert.rejects(
      s.store.putDeadLetter(letter, { intentVersion: "1" }),
    );
    assert.equal(s.asked.begins, 1);
  }
});

/** A connection the server ended under a read, as postgres.js rejects it. */
function reset(): Error {
  return Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
}

/** An answer with no statement completed: the connection lost under it. */
function empty(): object[] {
  return Object.assign([], { command: null, count: 0 });
}

Deno.test("PostgresStore spends none of a read's goodbye asks on its asks for a connection that ended under it, or for an empty answer", async () => {
  const answer = completed([{ deliveries: 7, expires_at: null }]);
  // A pool of 2: both connections ended under the read (2 asks of their
  // own), then each one's kept goodbye and one more (3): it answers.
  {
    await using s = scripted({
      max: 2,
      read: (n) =>
        n <= 2
          ? Promise.reject(reset())
          : n <= 4
          ? Promise.reject(goodbye())
          : Promise.resolve(answer),
    });
    assert.equal(await s.store.deliveries("pi_1/settle"), 7);
    assert.equal(s.asked.reads, 5);
  }
  // One goodbye more than those: it fails with it, asked no more.
  {
    await using s = scripted({
      max: 2,
      read: (n) => Promise.reject(n <= 2 ? reset() : goodbye()),
    });
    await assert.rejects(
      s.store.deliveries("pi_1/settle"),
      /terminating connection due to administrator command/,
    );
    assert.equal(s.asked.reads, 5);
  }
  // An empty answer (asked once more), then the goodbyes: it answers.
  {
    await using s = scripted({
      max: 2,
      read: (n) =>
        n === 1
          ? Promise.resolve(empty())
          : n <= 3
          ? Promise.reject(goodbye())
          : Promise.resolve(answer),
    });
    assert.equal(await s.store.deliveries("pi_1/settle"), 7);
    assert.equal(s.asked.reads, 4);
  }
});

Deno.test("PostgresStore asks no read again whose connection the client ended itself (CONNECTION_DESTROYED, CONNECTION_ENDED) or that timed out (ETIMEDOUT)", async () => {
  for (
    const code of ["CONNECTION_DESTROYED", "CONNECTION_ENDED", "ETIMEDOUT"]
  ) {
    await using s = scripted({
      max: 2,
      read: () =>
        Promise.reject(Object.assign(new Error(`read ${code}`), { code })),
    });
    await assert.rejects(s.store.deliveries("pi_1/settle"));
    assert.equal(s.asked.reads, 1, code);
  }
});
