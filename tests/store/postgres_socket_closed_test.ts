/**
 * The service's socket (`answeredSocket`) says when every connection it
 * made has closed: postgres.js 3.4.9's `sql.end()` resolves before a busy
 * connection's socket closes, and that connection's timers (its lifetime,
 * the socket's watch on the Terminate it wrote) run on until it does. A
 * stop that awaits `closed()` leaves none behind it; this test, run with
 * the sanitizers on, fails with their leak otherwise. After `closed()`
 * the socket connects no more: postgres.js's end leaves a reconnect timer
 * running, whose connect came after the stop.
 *
 * @module
 */

import assert from "node:assert/strict";
import net from "node:net";
import postgres from "postgres";
import { reconnectBackoffS } from "../../store/postgres.ts";
import { answeredSocketOption } from "../../store/postgres_socket.ts";
import { answeredSocket } from "../../store/_postgres_socket.ts";
import { postgresAvailable, postgresUrl, sharedClient } from "../_postgres.ts";
import { countedConnects } from "./_counted_connects.ts";

/** "resolved" if `promise` resolves within `ms`, else "not yet". */
async function within(ms: number, promise: Promise<void>) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise.then(() => "resolved" as const),
      new Promise<"not yet">((resolve) => {
        timer = setTimeout(() => resolve("not yet"), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

Deno.test({
  name:
    "answeredSocket().closed() resolves once the sockets of a client ended mid-query have closed, their timers with them",
  ignore: !postgresAvailable,
  async fn() {
    const socket = answeredSocket(10_000);
    const sql = postgres(await postgresUrl(), {
      max: 2,
      onnotice: () => {},
      backoff: reconnectBackoffS,
      socket,
    } as postgres.Options<Record<string, never>>);
    // Both connections open, then busy when the client ends: its end
    // resolves before their sockets close.
    await Promise.all([sql`SELECT 1`, sql`SELECT 1`]);
    const busy = [1, 2].map(() =>
      sql`SELECT pg_sleep(2)`.then(() => "answered", () => "ended")
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    await sql.end({ timeout: 0 });
    assert.deepEqual(await Promise.all(busy), ["ended", "ended"]);
    // Once they have closed (the server ends each once its sleep is
    // done), not at its bound.
    assert.equal(await within(20_000, socket.closed(60_000)), "resolved");
    // Nothing left: it resolves at once.
    assert.equal(await within(500, socket.closed(60_000)), "resolved");
  },
});

Deno.test("answeredSocketOption()'s socket refuses a connect made after its closed() was called, at once and without connecting: one postgres.js makes after its end, from a reconnect timer the end left running", async () => {
  let accepted = 0;
  const server = net.createServer((peer) => {
    accepted++;
    peer.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  const connects = countedConnects();
  const { socket } = answeredSocketOption(2_000);
  try {
    // The client's stop: it ended, and nothing was open.
    await socket.closed(1_000);
    const made = socket({
      host: ["127.0.0.1"],
      port: [port],
      target_session_attrs: "primary",
    });
    const errors: Error[] = [];
    made.on("error", (error) => errors.push(error));
    // Its error, then its close, as a connect refused.
    await new Promise((resolve) => made.once("close", resolve));
    assert.equal(errors.length, 1);
    assert.match(
      errors[0]?.message ?? "",
      /^Cannot connect to 127\.0\.0\.1:\d+ as this client's socket option was closed \(its closed\(\) was called/,
    );
    assert.equal(connects.count(), 0);
    assert.equal(accepted, 0);
    // Nothing left open: at once.
    assert.equal(await within(500, socket.closed(60_000)), "resolved");
  } finally {
    connects.restore();
    await new Promise((resolve) => server.close(resolve));
  }
});

Deno.test("answeredSocketOption()'s socket refuses a connect to a socket dir after its closed() was called too, without connecting: a Unix socket's client reconnects after its end as a TCP one does", async () => {
  // Nothing listens there: a connect would fail in other words (and ask
  // for net access to the path, which the test run does not grant).
  const path = "/run/relayer-no-such-dir/.s.PGSQL.5432";
  const connects = countedConnects();
  const { socket } = answeredSocketOption(2_000);
  try {
    await socket.closed(1_000);
    const made = socket({
      host: ["/run/relayer-no-such-dir"],
      port: [5432],
      path,
    });
    const errors: Error[] = [];
    made.on("error", (error) => errors.push(error));
    await new Promise((resolve) => made.once("close", resolve));
    assert.deepEqual(errors.map((error) => error.message.split(" (")[0]), [
      `Cannot connect to ${path} as this client's socket option was closed`,
    ]);
    assert.equal(connects.count(), 0);
  } finally {
    connects.restore();
  }
});

Deno.test({
  name:
    "answeredSocketOption()'s closed() destroys, at its bound, a connection postgres.js opened after its end (a reconnect its end left waiting), so that it closes and its timers end with it",
  ignore: !postgresAvailable,
  async fn() {
    const answered = answeredSocketOption(10_000);
    const { socket } = answered;
    // Each connect, once the client ended.
    let ended = false;
    let connectedLate: () => void = () => {};
    const late = new Promise<void>((resolve) => connectedLate = resolve);
    const spy = Object.assign(
      (options: Parameters<typeof socket>[0]) => {
        if (ended) connectedLate();
        return socket(options);
      },
      { closed: socket.closed },
    );
    let closes = 0;
    let closedOnce: () => void = () => {};
    const closedByServer = new Promise<void>((resolve) => closedOnce = resolve);
    const sql = postgres(await postgresUrl(), {
      max: 1,
      onnotice: () => {},
      // Fixed: the reconnect below waits past the end.
      backoff: () => 0.3,
      onclose: () => {
        if (++closes === 1) closedOnce();
      },
      socket: spy,
    } as postgres.Options<Record<string, never>>);
    const [row] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
    const shared = await sharedClient();
    await shared`SELECT pg_terminate_backend(${row!.pid})`;
    await closedByServer;
    // Given the closed connection, the query waits out its backoff: the
    // end fails it and leaves the reconnect timer running, whose connect
    // comes after the end, before the stop's closed().
    const waiting = sql`SELECT 1`.then(() => "answered", () => "failed");
    await sql.end({ timeout: 0 });
    ended = true;
    assert.equal(await waiting, "failed");
    await late;
    await new Promise((resolve) => setTimeout(resolve, 200));
    await socket.closed(200);
    // Before: 1, the connection open on the server, idle, its lifetime
    // timer (up to an hour) running past the stop.
    assert.equal(closes, 2);
  },
});
