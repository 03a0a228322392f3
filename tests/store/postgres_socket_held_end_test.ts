/**
 * A client ended while `answeredSocketOption`'s socket holds a failed
 * connection's close (every listed host down, the wait between rounds up
 * to 1 s): postgres.js 3.4.9's `sql.end()` ends only a socket it finds
 * open, and the held close, with postgres.js's connect timer (30 s by
 * default) that only the close cancels, ran on after it. A caller that
 * did not await `closed()` was kept by them; these tests, run with the
 * sanitizers on, fail with their leak otherwise.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import {
  answeredSocketOption,
  type PostgresSocket,
} from "../../store/postgres_socket.ts";
import { downPort } from "./_down_port.ts";

/**
 * A client of two hosts that are down, under
 * `target_session_attrs=primary`, on the socket, with the sockets it made.
 */
async function downClient(options: { connect_timeout?: number } = {}) {
  const ports = [await downPort(), await downPort()];
  // The top of the jitter: the rounds are held 50, 100, 200, 400, 800 ms.
  const answered = answeredSocketOption(2_000, undefined, () => 1);
  const made: { socket: PostgresSocket; closed: boolean; closes: number }[] =
    [];
  const sql = postgres({
    host: ["127.0.0.1", "127.0.0.1"],
    port: ports,
    target_session_attrs: "primary",
    max: 1,
    onnotice: () => {},
    ...options,
    socket: (client: Parameters<typeof answered.socket>[0]) => {
      const socket = answered.socket(client);
      const entry = { socket, closed: false, closes: 0 };
      socket.on("close", () => {
        entry.closed = true;
        entry.closes++;
      });
      made.push(entry);
      return socket;
    },
  } as unknown as postgres.Options<Record<string, never>>);
  return { sql, made, ports };
}

/**
 * Asserts each socket of `made` closed once, and reads closed: a held
 * close handed on (by its timer, the client's end or its destroy) is
 * handed on once.
 */
function assertClosedOnce(
  made: { socket: PostgresSocket; closes: number }[],
): void {
  assert.deepEqual(
    made.map(({ closes, socket }) => `${closes} ${socket.readyState}`),
    made.map(() => "1 closed"),
  );
}

Deno.test("sql.end({ timeout: 0 }) while answeredSocketOption's socket holds a failed round's close hands the close on at once: no timer is left behind for a caller that does not await closed()", async () => {
  const { sql, made } = await downClient();
  const query = sql`SELECT 1`.then(() => "answered", (error) => error.code);
  // Rounds held 50, 100, 200 and 400 ms: at 1 s the fifth is held 800 ms.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const open = made.filter(({ closed }) => !closed).length;
  assert.equal(open, 1, `${made.length} sockets made, ${open} open`);
  const ending = performance.now();
  await sql.end({ timeout: 0 });
  assert.equal(await query, "CONNECTION_DESTROYED");
  // Handed on within the turn of the end, not at the end of its hold.
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(made.filter(({ closed }) => !closed).length, 0);
  assert.ok(performance.now() - ending < 200);
  assertClosedOnce(made);
});

Deno.test("sql.end({ timeout: 0 }) while a close is held and another query waits for the pool's place: the held close is handed on after the end failed the waiting query, so the ended client connects no more", async () => {
  const { sql, made } = await downClient();
  const outcomes: string[] = [];
  for (let i = 0; i < 2; i++) {
    sql`SELECT 1`.then(
      () => outcomes.push("answered"),
      (error) => outcomes.push(error.code),
    );
  }
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  await sql.end({ timeout: 0 });
  const madeAtEnd = made.length;
  // Longer than the most a round is held: a client that connected again
  // for the waiting query would have made a socket by then.
  await new Promise((resolve) => setTimeout(resolve, 1_200));
  assert.equal(made.length, madeAtEnd, "sockets made after the end");
  assert.deepEqual(outcomes, ["CONNECTION_DESTROYED", "CONNECTION_DESTROYED"]);
  assert.equal(made.filter(({ closed }) => !closed).length, 0);
  assertClosedOnce(made);
});

Deno.test("a connect_timeout shorter than a held close fails the query as postgres.js's connect timeout, naming the last host tried and its port, within connect_timeout of that connect; the close is then handed on, and sql.end() leaves no timer", async () => {
  const { sql, made, ports } = await downClient({ connect_timeout: 0.3 });
  const started = performance.now();
  const error = await sql`SELECT 1`.then(
    () => new Error("answered"),
    (error: Error & { code?: string }) => error,
  );
  const ms = performance.now() - started;
  // Rounds held 50, 100 and 200 ms, then the fourth's 400 ms hold meets
  // the 300 ms connect timer: about 650 ms.
  assert.equal((error as { code?: string }).code, "CONNECT_TIMEOUT");
  assert.ok(
    error.message === `write CONNECT_TIMEOUT 127.0.0.1:${ports[1]}`,
    `${error.message} (ports ${
      ports.join(", ")
    }: the round ends at the second)`,
  );
  assert.ok(ms >= 550 && ms < 1_000, `failed after ${ms.toFixed(0)} ms`);
  // The held close was handed on as postgres.js destroyed the socket.
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(made.filter(({ closed }) => !closed).length, 0);
  assertClosedOnce(made);
  await sql.end();
});
