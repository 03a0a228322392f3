/**
 * A bound on how long a postgres.js connection may go unanswered, for a
 * service of your own on Node, Deno or Bun: postgres.js's `socket` option,
 * the one `main.ts` gives its client (docs/postgres.md, "A network
 * partition"). Node-only API (`node:net`): a Cloudflare Worker uses
 * `@relayer/poison/postgres` without it (postgres.js's Workers build opens
 * its own sockets).
 *
 * A partition drops packets (a cloud network blip, a failover whose old
 * primary's address stops answering): no FIN, no RST, no error. postgres.js
 * 3.4.9 waits for an answer with no bound of its own, so a connection with
 * a query lost in it stays busy for good, and a connection the store gives
 * up on (`terminate()`) keeps its place in the pool until its socket
 * closes, which no peer that stopped reading lets happen. Once every
 * connection of the pool is held so, the store's calls still answer
 * within `connectionWaitMs`, each with a failure, and go on failing after
 * the network heals, until the process restarts. This socket closes a
 * connection whose writes get no byte back within `answerMs`, with the
 * client's idle connections that heard nothing since; postgres.js fails
 * what waited on it as a lost connection and connects again.
 *
 * ```ts ignore
 * import postgres from "postgres";
 * import { PostgresStore, reconnectBackoffS } from "@relayer/poison/postgres";
 * import { answeredSocketOption } from "@relayer/poison/postgres-socket";
 *
 * const sql = postgres(process.env.DATABASE_URL!, {
 *   backoff: reconnectBackoffS,
 *   ...answeredSocketOption(10_000, (line) => console.error(`relayer: ${line}`)),
 * });
 * const store = new PostgresStore(sql, { connectionWaitMs: 10_000 });
 * ```
 *
 * @module
 */

import { assertRandom, MAX_TIMER_MS } from "../policy/_validate.ts";
import { type AnsweredSocket, answeredSocket } from "./_postgres_socket.ts";

export type { AnsweredSocket, PostgresSocket } from "./_postgres_socket.ts";

/**
 * postgres.js's `socket` option, as an object to spread into the client's
 * options (postgres.js 3.4.9 takes the option, and its types do not name
 * it): each connection's socket is closed when bytes it wrote are
 * followed by none from the server within `answerMs`, and the client's
 * idle connections that heard nothing since are closed with it.
 * postgres.js then fails what waited on it as a lost connection
 * (`CONNECTION_CLOSED`) and connects again. Give it the store's
 * `connectionWaitMs` (10 s by default): the server answers the store's
 * writes within that (their lock waits end at half of it), and the store
 * cancels a read that waits as long. A statement of your own on the same
 * client that runs longer without a byte back is taken for a cut.
 *
 * TLS (`ssl`, `sslnegotiation`) runs over this socket as over postgres.js's
 * own. It opens plain TCP to the client's first host, and to the next
 * once a connect fails or the host says nothing (a connect timed out, a
 * startup unanswered within `answerMs`), as postgres.js moves on with its
 * own, or once the client ended a connection under `target_session_attrs` (a standby, for
 * `primary`). A socket dir given as the host (`{ host: "/run/postgresql" }`,
 * or `PGHOST`) it connects to over the Unix socket there, as postgres.js
 * does (tests/store/postgres_socket_unix_test.ts); a connection that asks
 * for TLS there, which PostgreSQL does not do on a Unix socket, it fails
 * before it connects, with an error that says to leave `ssl` out
 * (tests/store/postgres_socket_unix_tls_test.ts). Once every listed host
 * failed in a row (a connect refused or timed out, a standby passed over),
 * it hands on the close that ends that round, and with it postgres.js's
 * next connect, 50 ms later, doubling with each such round, at most 1 s,
 * each wait with equal jitter (from half of it to all of it, drawn from
 * `random`, so instances that lost the same primary do not connect again
 * in step; postgres.js 3.4.9 connects again at once there, outside its
 * backoff);
 * a standby listed alone and passed over it closes as a failed connect, for
 * postgres.js's backoff. A connection that succeeds is never held
 * (tests/store/postgres_failover_backoff_test.ts). The client's end hands
 * a held close on at once. A query that waits through the rounds fails at
 * postgres.js's `connect_timeout` after the round's last connect (its
 * `CONNECT_TIMEOUT`, naming the last host tried and its port, though
 * every listed host refused or was passed over), the wait then cut
 * short, and postgres.js's backoff spaces the next connect
 * (tests/store/postgres_socket_held_end_test.ts). Measured through a relay that stopped
 * forwarding and reading (tests/store/postgres_partition_pool_test.ts, a
 * pool of 2, a bound of 1 s): on a plain client no read answered within
 * 6 s of the relay being replaced; on one given this, the first read did.
 *
 * @param answerMs How long a write may go with nothing read back, in ms
 *   (a whole number from 1 to 2147483647, as a longer timer fires at
 *   once): the store's `connectionWaitMs`; 10000 (the store's default)
 *   when left out.
 * @param onCut Told, in one line, of each connection so closed (what may
 *   have caused it, and where to look); nothing by default.
 * @param random The jitter of the wait between failed rounds, drawn at
 *   each such wait (its outputs clamped into `[0, 1)`); `Math.random` by
 *   default.
 * @returns `{ socket }`, to spread into postgres.js's options. Its
 *   `socket.closed(ms)` resolves once every socket it made has closed (or,
 *   after `ms`, once it destroyed those left and they closed), for a stop
 *   that must leave no timer behind; call it once
 *   the client ended: from then on it refuses every connect at once (one
 *   postgres.js 3.4.9 makes after its end, from a reconnect timer the end
 *   left running).
 * @throws {RangeError} If `answerMs` is not a whole number from 1 to
 *   2147483647.
 * @throws {TypeError} If `onCut` or `random` is given and is not a
 *   function.
 *
 * @example A client whose pool comes back after a partition
 * ```ts
 * import postgres from "postgres";
 * import { PostgresStore, reconnectBackoffS } from "@relayer/poison/postgres";
 * import { answeredSocketOption } from "@relayer/poison/postgres-socket";
 * import assert from "node:assert/strict";
 *
 * const answered = answeredSocketOption(10_000, (line) => console.error(`relayer: ${line}`));
 * // postgres.js connects on the first query: this needs no database.
 * const sql = postgres("postgres://relayer@127.0.0.1:5432/payments", {
 *   backoff: reconnectBackoffS,
 *   ...answered,
 * });
 * const store = new PostgresStore(sql, { connectionWaitMs: 10_000 });
 * assert.equal(typeof answered.socket, "function");
 * store.close();
 * await sql.end();
 * await answered.socket.closed(1_000); // no socket was opened: at once
 * ```
 */
export function answeredSocketOption(
  answerMs = 10_000,
  onCut: (line: string) => void = () => {},
  random: () => number = Math.random,
): { socket: AnsweredSocket } {
  // A longer timer fires at once: every write's watch would cut its
  // connection.
  if (
    !Number.isSafeInteger(answerMs) || answerMs < 1 || answerMs > MAX_TIMER_MS
  ) {
    throw new RangeError(
      `Cannot make the PostgreSQL socket as 'answerMs' must be a whole number of milliseconds from 1 to ${MAX_TIMER_MS} (give it the store's connectionWaitMs, 10000 by default): current value is ${
        String(answerMs)
      }`,
    );
  }
  // Called first at a cut, in a timer: a TypeError there ends the process.
  if (typeof onCut !== "function") {
    throw new TypeError(
      `Cannot make the PostgreSQL socket as 'onCut' must be a function taking one line (such as line => console.error(line)), or left out: current value is ${
        onCut === null ? "null" : typeof onCut
      }`,
    );
  }
  // Drawn first at a held close, in a timer: a TypeError there ends the
  // process.
  assertRandom("make the PostgreSQL socket", random);
  return { socket: answeredSocket(answerMs, onCut, random) };
}
