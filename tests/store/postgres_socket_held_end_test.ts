/**
 * A client ended while `answeredSocketOption`'s socket holds a failed
 * connection's close (every listed host down, the wait between rounds up
 * to 1 s): postgres.js 3.4.9's `sql.end()` ends only a socket it finds
 * open, and the held close, with postgres.js's connect timer (30 s by
 * default) that only the close cancels, ran on after it. A caller that
 * did not await `closed()` was kept by them; these tests, run with the
 * sanitizers on, fail with their leak otherwise.
 *
 * Each client is ended at a hold the socket chose (`_held_closes.ts`),
 * not at a time the rounds were expected to have reached: on a loaded
 * machine the rounds run late, and an end 1 s in met no held close (a
 * connect between two, or one refused, whose ECONNREFUSED the query got).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import type { PostgresSocket } from "../../store/postgres_socket.ts";
import { downPort } from "./_down_port.ts";
import { heldCloses } from "./_held_closes.ts";

/** A socket the client made, and what became of it. */
interface Made {
  socket: PostgresSocket;
  /** When it was made (`performance.now()`). */
  at: number;
  closed: boolean;
  /** How many times it closed: a held close is handed on once. */
  closes: number;
  /** When postgres.js first destroyed it, and whether its close was still held then. */
  destroyed?: { at: number; whileHeld: boolean };
}

/**
 * A client of two hosts that are down, under
 * `target_session_attrs=primary`, on the socket, with the sockets it made
 * and the closes it held (`held`; `held.restore()` once done).
 */
async function downClient(options: { connect_timeout?: number } = {}) {
  const ports = [await downPort(), await downPort()];
  // The top of the jitter: the rounds are held 50, 100, 200, 400, 800 ms.
  const held = heldCloses(2_000, () => 1);
  const made: Made[] = [];
  const sql = postgres({
    host: ["127.0.0.1", "127.0.0.1"],
    port: ports,
    target_session_attrs: "primary",
    max: 1,
    onnotice: () => {},
    ...options,
    socket: (client: Parameters<typeof held.socket>[0]) => {
      const socket = held.socket(client);
      const entry: Made = {
        socket,
        at: performance.now(),
        closed: false,
        closes: 0,
      };
      socket.on("close", () => {
        entry.closed = true;
        entry.closes++;
      });
      const destroy = socket.destroy.bind(socket);
      socket.destroy = (error?: Error) => {
        entry.destroyed ??= {
          at: performance.now(),
          whileHeld: !entry.closed &&
            held.holds.some(({ connect }) =>
              connect === made.indexOf(entry) + 1
            ),
        };
        return destroy(error);
      };
      made.push(entry);
      return socket;
    },
  } as unknown as postgres.Options<Record<string, never>>);
  return { sql, made, ports, held };
}

/**
 * Asserts each socket of `made` closed once, and reads closed: a held
 * close handed on (by its timer, the client's end or its destroy) is
 * handed on once.
 */
function assertClosedOnce(made: Made[]): void {
  assert.deepEqual(
    made.map(({ closes, socket }) => `${closes} ${socket.readyState}`),
    made.map(() => "1 closed"),
  );
}

Deno.test("sql.end({ timeout: 0 }) while answeredSocketOption's socket holds a failed round's close hands the close on at once: no timer is left behind for a caller that does not await closed()", async () => {
  const { sql, made, held } = await downClient();
  try {
    const query = sql`SELECT 1`.then(() => "answered", (error) => error.code);
    // Rounds held 50, 100, 200 and 400 ms: the fifth is held 800 ms.
    const hold = await held.hold(5);
    assert.equal(hold.wait, 800);
    const open = made.filter(({ closed }) => !closed);
    assert.equal(
      open.length,
      1,
      `${made.length} sockets made, ${open.length} open`,
    );
    const closing = new Promise((resolve) =>
      open[0]!.socket.once("close", resolve)
    );
    await sql.end({ timeout: 0 });
    assert.equal(await query, "CONNECTION_DESTROYED");
    // Handed on at the end, not at the end of its hold.
    await closing;
    const closed = performance.now() - hold.at;
    assert.ok(
      closed < hold.wait,
      `closed ${closed.toFixed(0)} ms into a ${hold.wait} ms hold`,
    );
    assert.equal(made.filter(({ closed }) => !closed).length, 0);
    assertClosedOnce(made);
  } finally {
    held.restore();
  }
});

Deno.test("sql.end({ timeout: 0 }) while a close is held and another query waits for the pool's place: the held close is handed on after the end failed the waiting query, so the ended client connects no more", async () => {
  const { sql, made, held } = await downClient();
  try {
    const outcomes: string[] = [];
    for (let i = 0; i < 2; i++) {
      sql`SELECT 1`.then(
        () => outcomes.push("answered"),
        (error) => outcomes.push(error.code),
      );
    }
    // Ended while the fifth round's close is held (800 ms).
    await held.hold(5);
    await sql.end({ timeout: 0 });
    const madeAtEnd = made.length;
    // Longer than the most a round is held: a client that connected again
    // for the waiting query would have made a socket by then.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    assert.equal(made.length, madeAtEnd, "sockets made after the end");
    assert.deepEqual(outcomes, [
      "CONNECTION_DESTROYED",
      "CONNECTION_DESTROYED",
    ]);
    assert.equal(made.filter(({ closed }) => !closed).length, 0);
    assertClosedOnce(made);
  } finally {
    held.restore();
  }
});

Deno.test("a connect_timeout shorter than a held close fails the query as postgres.js's connect timeout, naming the last host tried and its port, within connect_timeout of that connect; the close is then handed on, and sql.end() leaves no timer", async () => {
  const { sql, made, ports, held } = await downClient({
    connect_timeout: 0.3,
  });
  try {
    const error = await sql`SELECT 1`.then(
      () => new Error("answered"),
      (error: Error & { code?: string }) => error,
    );
    // Rounds held 50, 100 and 200 ms, then the fourth's 400 ms hold meets
    // the 300 ms connect timer.
    assert.equal((error as { code?: string }).code, "CONNECT_TIMEOUT");
    assert.ok(
      error.message === `write CONNECT_TIMEOUT 127.0.0.1:${ports[1]}`,
      `${error.message} (ports ${
        ports.join(", ")
      }: the round ends at the second)`,
    );
    const last = made.at(-1)!;
    const waits = held.holds.map(({ connect, wait }) => `${connect}: ${wait}`);
    const seen = `${made.length} sockets made, held ${waits.join(", ")}`;
    // The timer met the last connect's held close, a wait longer than it
    // (400 ms; 200 ms at the earliest, where a loaded machine took the
    // connect's 100 ms margin).
    assert.deepEqual(
      held.holds.map(({ wait }) => wait),
      [50, 100, 200, 400].slice(0, held.holds.length),
      seen,
    );
    assert.equal(held.holds.at(-1)?.connect, made.length, seen);
    assert.ok(last.destroyed?.whileHeld, `${seen}: not destroyed while held`);
    // At postgres.js's connect timer (300 ms from that connect): the
    // timeout, not a failure of the connect.
    const ms = last.destroyed.at - last.at;
    assert.ok(ms >= 295, `destroyed ${ms.toFixed(0)} ms after its connect`);
    // The held close was handed on as postgres.js destroyed the socket:
    // by the next turn, not at the end of its hold.
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(made.filter(({ closed }) => !closed).length, 0);
    assertClosedOnce(made);
    await sql.end();
  } finally {
    held.restore();
  }
});
