/**
 * The service's socket (`answeredSocket`) says when every connection it
 * made has closed: postgres.js 3.4.9's `sql.end()` resolves before a busy
 * connection's socket closes, and that connection's timers (its lifetime,
 * the socket's watch on the Terminate it wrote) run on until it does. A
 * stop that awaits `closed()` leaves none behind it; this test, run with
 * the sanitizers on, fails with their leak otherwise.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { reconnectBackoffS } from "../../store/postgres.ts";
import { answeredSocket } from "../../store/_postgres_socket.ts";
import { postgresAvailable, postgresUrl } from "../_postgres.ts";

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
