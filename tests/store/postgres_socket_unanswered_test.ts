/**
 * The service's socket (`answeredSocket`) where something takes the
 * connection and closes it before a word (a FIN, no bytes): a proxy or
 * balancer in front of a database that is down. postgres.js 3.4.9 took
 * such a close as the end of a connection still opening and connected
 * again at once, outside its backoff, for as long as it lasted (here, 442
 * connections in 2 s through one connection of the pool), and the query
 * it opened the connection for waited through it all
 * (porsager/postgres#1193). The socket hands such a close on as an error:
 * the query fails, and postgres.js waits its backoff between connects.
 * Direct TLS is left to TLS, which fails such a handshake itself.
 *
 * @module
 */

import assert from "node:assert/strict";
import net from "node:net";
import postgres from "postgres";
import { reconnectBackoffS } from "../../store/postgres.ts";
import { answeredSocket } from "../../store/_postgres_socket.ts";
import { connect, postgresAvailable, postgresUrl } from "../_postgres.ts";

/**
 * Asks for 1.5 s, one query after another, on a client of one connection
 * made with `options` and the service's socket, a server that closes each
 * connection before a word: each query must fail as `said`, and the
 * connects slow down as postgres.js's backoff grows with each failed one
 * (`reconnectBackoffS`: 50-100 ms, then 100-200 ms, … up to 1 s): 6 in
 * 1.5 s here, where a backoff that never grew (25-50 ms) took 39.
 */
async function closedBeforeAWord(
  options: Partial<postgres.Options<Record<string, never>>>,
  said: RegExp,
): Promise<void> {
  let accepted = 0;
  const taken: net.Socket[] = [];
  const server = net.createServer((client) => {
    accepted++;
    taken.push(client);
    client.on("error", () => {});
    client.end();
  });
  await new Promise<void>((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve())
  );
  const { port } = server.address() as net.AddressInfo;
  const socket = answeredSocket(10_000);
  const sql = postgres(`postgres://relayer:secret@127.0.0.1:${port}/db`, {
    max: 1,
    onnotice: () => {},
    backoff: reconnectBackoffS,
    socket,
    ...options,
  } as postgres.Options<Record<string, never>>);
  // Each query's answer, or none within 2 s (the timer also keeps the
  // test's event loop alive while postgres.js waits to connect again).
  const timers: ReturnType<typeof setTimeout>[] = [];
  const ask = () =>
    Promise.race([
      sql`SELECT 1`.then(
        () => "answered",
        (error: Error & { code?: string }) =>
          `failed: ${error.code}: ${error.message}`,
      ),
      new Promise<string>((resolve) => {
        timers.push(setTimeout(() => resolve("no answer within 2 s"), 2_000));
      }),
    ]);
  try {
    // Each query connects once more, after the backoff: no loop of
    // connects in between.
    const until = performance.now() + 1_500;
    let asked = 0;
    while (asked < 2 || performance.now() < until) {
      assert.match(await ask(), said);
      asked++;
    }
    assert.ok(accepted <= 8, `${accepted} connections taken for ${asked}`);
  } finally {
    for (const timer of timers) clearTimeout(timer);
    await sql.end({ timeout: 0 });
    await socket.closed(5_000);
    for (const client of taken) client.destroy();
    await new Promise((resolve) => server.close(resolve));
  }
}

Deno.test(
  "answeredSocket: a server that closes each connection before a word fails the query on it, and postgres.js connects again on its backoff, not at once",
  () =>
    closedBeforeAWord(
      {},
      /^failed: ECONNRESET: 127\.0\.0\.1:\d+ closed the connection before answering its startup: no PostgreSQL answered there \(a proxy whose database is down\?\)$/,
    ),
);

Deno.test(
  "answeredSocket: over direct TLS, a server that closes each connection before a word fails the query in TLS's words, and nothing else fails",
  () =>
    // Its ClientHello the first bytes: TLS fails the handshake itself,
    // and an error of the socket's own beside it would reach no handler.
    closedBeforeAWord(
      { ssl: "require", sslnegotiation: "direct" } as Partial<
        postgres.Options<Record<string, never>>
      >,
      /^failed: ECONNRESET: Client network socket disconnected before secure TLS connection was established$/,
    ),
);

Deno.test({
  name:
    "answeredSocket: a session PostgreSQL ends after it answered (pg_terminate_backend) fails its query as a closed connection, not as one no PostgreSQL answered",
  ignore: !postgresAvailable,
  async fn() {
    const admin = await connect(1);
    const socket = answeredSocket(10_000);
    const sql = postgres(await postgresUrl(), {
      max: 1,
      onnotice: () => {},
      backoff: reconnectBackoffS,
      socket,
    } as postgres.Options<Record<string, never>>);
    try {
      const [session] = await sql`SELECT pg_backend_pid() AS pid`;
      const busy = sql`SELECT pg_sleep(5)`.then(
        () => "answered",
        (error: Error & { code?: string }) =>
          `failed: ${error.code}: ${error.message}`,
      );
      for (;;) {
        const [row] = await admin`SELECT count(*)::int AS waiting
          FROM pg_stat_activity
          WHERE pid = ${session?.pid} AND wait_event = 'PgSleep'`;
        if (Number(row?.waiting) > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await admin`SELECT pg_terminate_backend(${session?.pid})`;
      // The server said goodbye (an error), then closed: postgres.js's
      // own word for it, not the socket's for a close before a word.
      assert.match(
        await busy,
        /^failed: CONNECTION_CLOSED: write CONNECTION_CLOSED 127\.0\.0\.1:\d+$/,
      );
    } finally {
      await sql.end({ timeout: 0 });
      await socket.closed(5_000);
      await admin.end();
    }
  },
});
