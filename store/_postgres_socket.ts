/**
 * A socket for postgres.js (its `socket` option) that a network partition
 * cannot keep forever. Where the network drops packets (a cloud network
 * blip, a failover whose old primary's address stops answering), a
 * connection gets no FIN, no RST and no error: postgres.js waits for the
 * answer of a query it sent with no bound of its own (its `max_lifetime`
 * and `idle_timeout` wait for the query, TCP's retransmissions take
 * minutes, its keep-alive starts only on an idle connection), and the
 * connection stays busy for good. Once each connection of the pool has
 * sent one query into the partition, the pool never answers again, even
 * after the network heals.
 *
 * This socket is closed (and `onCut` told why) when bytes it
 * wrote are followed by none from the server within `answerMs`: the
 * server answers the store's writes within the store's own bounds (their
 * lock waits end at half of `connectionWaitMs`), so a silence that long is
 * a lost network, or a read held as long (behind a table lock, or in a
 * pooler's queue for a server connection: the store cancels it at
 * `connectionWaitMs`, and the cancel's answer can come after this socket
 * gave up), which the line names too. postgres.js then fails what waited on it
 * and connects again, as after a server that ended the session. The
 * client's idle connections are closed with it (they went the same way,
 * and each would otherwise be found out only by the next query given to
 * it, after as long); one that waits for an answer keeps its own watch.
 * A false alarm (a statement of the caller's own that runs longer) costs
 * the pool's idle connections a reconnect, and a statement given to one
 * at that instant fails as lost. It wraps
 * the TCP socket in a stream of its own, so postgres.js's TLS runs over it
 * and the watch sees the bytes either way.
 *
 * Node-only API (`node:net`): for `main.ts` and `answeredSocketOption`
 * (`./postgres_socket.ts`, `@relayer/poison/postgres-socket`), not for the
 * Workers build.
 *
 * @module
 */

import net from "node:net";
import { Duplex } from "node:stream";
import { jittered } from "../policy/_jittered.ts";

/**
 * How long a connection must have stayed open past the server's first byte
 * to count as one that succeeded: a client that passes over a standby
 * ends its connection as soon as it logged in (a few round trips); one
 * kept for queries lives longer.
 */
const SETTLED_MS = 1_000;
/** The wait after the first round in which every host failed; it doubles with each such round after it. */
const FIRST_ROUND_WAIT_MS = 50;
/** The most a failed connection's close is held back (postgres.js's next connect with it). */
const MOST_ROUND_WAIT_MS = 1_000;

/**
 * A stream postgres.js can use as its socket: a TCP socket's stand-in.
 *
 * @example One made by the option's `socket`, for a server's host and port
 * ```ts
 * import { answeredSocketOption, type PostgresSocket } from "@relayer/poison/postgres-socket";
 * import { createServer } from "node:net";
 * import assert from "node:assert/strict";
 *
 * const server = createServer((peer) => peer.end());
 * await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
 * const { port } = server.address() as { port: number };
 * const { socket } = answeredSocketOption(10_000);
 * const made: PostgresSocket = socket({ host: ["127.0.0.1"], port: [port] });
 * assert.deepEqual([made.host, made.port], ["127.0.0.1", port]);
 * made.destroy();
 * await socket.closed(1_000);
 * await new Promise((resolve) => server.close(resolve));
 * ```
 */
export interface PostgresSocket extends Duplex {
  /** The server's host, which postgres.js names to TLS (SNI, the certificate check). */
  host?: string;
  /**
   * The server's port, which postgres.js names with the host in its
   * connection errors (`write CONNECT_TIMEOUT <host>:<port>`).
   */
  port?: number;
  /**
   * The TCP socket's state ("opening", "open", …), as `net.Socket` says it;
   * "open" while its close is held (see `answeredSocket`), so that the
   * client's end, which ends only an open socket, hands the close on.
   */
  readonly readyState: string;
  /** Sets the TCP socket's keep-alive, as `net.Socket.setKeepAlive` does. */
  setKeepAlive(enable?: boolean, initialDelay?: number): PostgresSocket;
}

/**
 * postgres.js's `socket` option, made by {@linkcode answeredSocket}.
 *
 * @example Wait for its sockets to close, as a stop does after `sql.end()`
 * ```ts
 * import { type AnsweredSocket, answeredSocketOption } from "@relayer/poison/postgres-socket";
 *
 * const { socket }: { socket: AnsweredSocket } = answeredSocketOption(10_000);
 * // No socket made yet: it resolves at once (else within the 1 s given).
 * await socket.closed(1_000);
 * ```
 */
export interface AnsweredSocket {
  /** Called with the client's options, for each connection. */
  (options: {
    host: string[];
    port: number[];
    target_session_attrs?: string | null;
    path?: string | false;
    ssl?: unknown;
    sslnegotiation?: unknown;
  }): PostgresSocket;
  /**
   * Resolves once every socket made so far has closed, or, after `ms`,
   * once it destroyed those left (a connection the client's end let go of
   * unclosed) and they closed, their connections' timers with them (after
   * another `ms` at most).
   * postgres.js 3.4.9's `sql.end()` resolves before a busy connection's
   * socket closes, and the timers of that connection (its lifetime, this
   * socket's watch on the Terminate it wrote) run until it does: a stop
   * that returns at once leaves them behind it. A close held between
   * failed rounds is handed on at the client's end (or its connect
   * timeout), not left behind.
   *
   * Call it once the client ended, as its stop: from this call on, every
   * connect is refused at once, with nothing sent (an error, then the
   * close, as a connect refused). postgres.js 3.4.9's end leaves
   * a reconnect timer running (a connection waiting out its backoff for a
   * query the end failed), whose connect came after the stop and, to a
   * standby listed alone under `target_session_attrs`, stayed open on it.
   */
  closed(ms: number): Promise<void>;
}

/**
 * The `socket` option of a postgres.js client whose server must answer
 * each write within `answerMs` (see the module).
 *
 * @param answerMs How long a write may go with nothing read back.
 * @param onCut Told, in a line, of each connection so closed.
 * @param random The jitter of a held close's wait (drawn at each hold,
 *   clamped into `[0, 1)`): equal jitter, from half the wait to all of it.
 * @returns postgres.js's `socket` option: called with the client's options, for each connection.
 */
export function answeredSocket(
  answerMs: number,
  onCut: (line: string) => void = () => {},
  random: () => number = Math.random,
): AnsweredSocket {
  // This client's open sockets, each with whether it waits for an answer
  // and when it last heard from the server (or was made, if never).
  const sockets = new Map<
    net.Socket,
    { waiting: () => boolean; heard: number }
  >();
  // Every socket not yet closed (a cut one too, until its close), and who
  // waits for none to be left.
  const live = new Set<net.Socket>();
  const drained = new Set<() => void>();
  // Whether `closed()` was called: the client ended. postgres.js 3.4.9's
  // end leaves a connection's reconnect timer running (one waiting out
  // its backoff for a query the end then failed), which connects after
  // the end: under target_session_attrs, to a standby listed alone, the
  // connection skipped the check (its query gone), stayed open and idle
  // on the standby, and kept the process from exiting. Such a connect is
  // refused before it connects.
  let stopped = false;
  // The client's hosts: each connection goes to the one in use, and the
  // next is used once a connect to it fails. postgres.js 3.4.9 moves on
  // at each connect of its own socket; given this one it opens none, and
  // it swallows a connect error while another host is listed, so a first
  // host that was down held every query. A first host that answers keeps
  // every connection (a standby listed second gets none). Under
  // `target_session_attrs` the client ends a connection to a host of the
  // wrong kind (a standby, for `primary`) as soon as it logged in, and
  // connects again: the next connection goes to the next host, or it went
  // back to that one, hundreds of times a second, and no query answered.
  let current = 0;
  // Failed connects since the last one that succeeded: the hosts that
  // failed in the round under way, and the rounds in which every host
  // failed. postgres.js 3.4.9 connects again at once for the query that
  // opened a connection, outside its backoff, when a connect to one of
  // several hosts fails (it swallows the error while another host is
  // listed) and when it ended a connection under `target_session_attrs`:
  // while no listed host is a primary (the primary down, the standby not
  // yet promoted, or a standby listed alone), it went round the hosts
  // hundreds of times a second, each time a login on the standby. The
  // close of the connection that ends a round in which every host failed
  // is handed on late (50 ms, doubling with each such round, at most 1 s,
  // with equal jitter: from half of that to all of it, so that instances
  // that lost the same primary do not connect again in step), and with it
  // postgres.js's next connect; one that fails within a round
  // is not, so a host back is reached after one held close at most. A
  // connection that succeeds is never held, and clears the count.
  const failedHosts = new Set<number>();
  let failedRounds = 0;
  // When the server first answered each open socket, and whether the
  // client ended it.
  const opened = new Map<net.Socket, { answeredAt?: number; ended: boolean }>();
  const settled = (now: number) => {
    for (const { answeredAt, ended } of opened.values()) {
      if (
        !ended && answeredAt !== undefined && now - answeredAt >= SETTLED_MS
      ) {
        return true;
      }
    }
    return false;
  };
  const make = (options: Parameters<AnsweredSocket>[0]) => {
    const hosts = Math.max(1, options.host.length);
    const choosy = (options.target_session_attrs ?? "any") !== "any";
    const choosing = hosts > 1 && choosy;
    const at = current % hosts;
    const host = options.host[at]!;
    const port = options.port[at] ?? options.port[0]!;
    // A socket dir as the host (`{ host: "/run/postgresql" }`, `PGHOST`):
    // postgres.js names its socket file, `<dir>/.s.PGSQL.<port>`, here.
    const path = typeof options.path === "string" && options.path !== ""
      ? options.path
      : null;
    const where = path ?? `${host}:${port}`;
    // TLS asked for over a Unix socket, which PostgreSQL does not do:
    // each connection failed its TLS handshake, in words that read as a
    // network fault. Failed before it connects, as a connect refused.
    const refused = stopped
      ? new Error(
        `Cannot connect to ${where} as this client's socket option was closed (its closed() was called, at the client's stop): postgres.js opened a connection after its end (a reconnect its end left waiting); make a new client, with a new socket option, to connect again`,
      )
      : path === null
      ? null
      : tlsOverSocket(options.ssl, options.sslnegotiation, path);
    const raw = refused !== null
      ? new net.Socket()
      : path === null
      ? net.connect(port, host)
      : net.connect(path);
    let reached = false;
    raw.once("connect", () => reached = true);
    live.add(raw);
    const state: { answeredAt?: number; ended: boolean } = { ended: false };
    opened.set(raw, state);
    let silent: ReturnType<typeof setTimeout> | undefined;
    // Whether this connection is postgres.js's to cancel a query (its
    // first bytes a CancelRequest): that promise postgres.js drops, so an
    // error here (the cancel's connect refused) would be an unhandled
    // rejection, which ends the process; it closes as a cut does instead.
    let cancel: boolean | undefined;
    // Whether its first bytes are TLS's (direct TLS, `sslnegotiation=direct`):
    // a close before a word fails the TLS handshake already, in TLS's own
    // words ("… before secure TLS connection was established").
    let tls: boolean | undefined;
    // Whether whoever reads this stream destroyed it (postgres.js at its
    // end, or the TLS socket over it as it closed): what raw reports
    // after that (a reset its own destroy met) is no one's to hear.
    let unwound = false;
    // The close held back (see failedHosts), handed on as soon as the
    // client ends or destroys this stream: postgres.js 3.4.9's `sql.end()`
    // does not wait for it, and its connect timer (30 s by default), which
    // only the close cancels, ran on with it. Handed on after the turn of
    // that end, not within it: postgres.js gives a closed connection the
    // next query waiting for the pool's place, and its end fails those
    // only after it ended each connection (one handed on within it
    // connected again for such a query, and went on connecting after the
    // end, for good).
    let holding:
      | { timer: ReturnType<typeof setTimeout>; close: () => void }
      | undefined;
    const handOn = () => {
      if (holding === undefined) return;
      const { timer, close } = holding;
      holding = undefined;
      clearTimeout(timer);
      close();
    };
    const self = {
      waiting: () => silent !== undefined,
      heard: performance.now(),
    };
    sockets.set(raw, self);
    const quiet = () => {
      clearTimeout(silent);
      silent = undefined;
    };
    const socket = new Duplex({
      // The close is raw's, with whether it had an error (postgres.js
      // counts failed connects in its backoff by it).
      emitClose: false,
      read() {
        raw.resume();
      },
      write(chunk, encoding, done) {
        // Closed here (a cut) before its close reached postgres.js: the
        // bytes are dropped, as the network would, and the close that
        // follows fails what waits on them (an error would reject a
        // cancel's promise, which postgres.js drops).
        cancel ??= isCancelRequest(chunk);
        tls ??= isTlsRecord(chunk);
        if (raw.destroyed) return done();
        const since = performance.now();
        silent ??= setTimeout(() => {
          silent = undefined;
          // Closed without an error: postgres.js fails what waited on the
          // connection as closed (CONNECTION_CLOSED), and rejects a cancel's
          // promise, which it drops, on an error (an unhandled rejection).
          sockets.delete(raw);
          raw.destroy();
          // The pool's idle connections that heard nothing from the server
          // since this one's silence began went the same way, and would
          // each be found out only by the next query given to it, after as
          // long: closed too, to be opened again when needed. One that
          // waits for an answer keeps its own watch; one that heard the
          // server since is left.
          let idle = 0;
          for (const [other, { waiting, heard }] of sockets) {
            if (waiting() || heard >= since) continue;
            sockets.delete(other);
            other.destroy();
            idle++;
          }
          onCut(
            `PostgreSQL sent nothing for ${answerMs}ms after the client wrote to it: the connection to ${where} was closed${
              idle === 0 ? "" : `, and the ${idle} idle with it`
            }: the network to it looks cut (a partition, or a failover whose old address stopped answering), or a statement waited that long for its answer (a read behind a table lock, which a schema change, VACUUM FULL or LOCK TABLE holds: see pg_stat_activity, wait_event_type 'Lock'; or in a pooler's queue for a server connection: PgBouncer's SHOW POOLS, cl_waiting)`,
          );
        }, answerMs);
        // A failed write is told by raw's error, handed on with its close;
        // failing this stream with it would come first, and hide the
        // error that says why (a refused connect's queued bytes fail as
        // "Socket closed before the connection was established").
        raw.write(chunk, encoding, () => done());
      },
      final(done) {
        // Ended while its close is held (the end of a client, which ends
        // a socket it finds open): the close is handed on after this turn.
        if (holding !== undefined) {
          setImmediate(handOn);
          return done();
        }
        // Ended by the client: under `target_session_attrs`, maybe as this
        // host is not of the kind asked for. The next connection tries the
        // next host (one the client ended for its idle time or lifetime
        // costs the next connect at most a host passed over).
        if (choosing && current % hosts === at) current = at + 1;
        state.ended = true;
        // postgres.js ends its socket only after its goodbye (Terminate,
        // from `terminate()`), with nothing of its own left waiting for an
        // answer, and frees the connection's place in the pool only at the
        // close. That close waited for the server's side: behind a
        // partition none comes, and the goodbye, watched as one more
        // write, kept the place for another `answerMs`. The goodbye asks
        // for no answer: closed once it and the FIN are handed to the
        // system, which still delivers them to a live server (whose
        // statement, if one runs, goes on to its end, then the session
        // reads the goodbye). Should the system take nothing more (a
        // peer that stopped reading filled its window), the watch closes
        // it at its bound, as before.
        raw.end(() => {
          quiet();
          raw.destroy();
        });
        done();
      },
      destroy(error, done) {
        // Destroyed while its close is held (postgres.js's connect timed
        // out): the close follows, handed on after this turn.
        if (holding !== undefined) {
          setImmediate(handOn);
          return done(error);
        }
        quiet();
        unwound = true;
        raw.destroy();
        done(error);
      },
    }) as PostgresSocket;
    // Whether the server sent anything, and whether it ended the
    // connection (a FIN) after that, or without.
    let answered = false;
    let endedUnanswered = false;
    raw.on("data", (bytes) => {
      answered = true;
      state.answeredAt ??= performance.now();
      self.heard = performance.now();
      quiet();
      if (!socket.push(bytes)) raw.pause();
    });
    raw.on("end", () => {
      endedUnanswered = !answered;
      socket.push(null);
    });
    // An error, and the close after it, handled after what postgres.js
    // queued before them: a connect refused can come before its first
    // bytes reach this stream (it writes them on the next turn), which
    // say whether it is a cancel. Both are handed on at once, the error
    // then the close, with nothing run between them: postgres.js 3.4.9
    // fails what the connection holds on the error but keeps it in its
    // pool until the close, and a query given to it in between (by code
    // that runs on the error) is written to nothing, then failed by no
    // close that had an error: it waited until the connection was opened
    // again, whose startup its bytes, left in postgres.js's buffer, held
    // up until the connect timed out (30 s).
    let failure: Error | undefined;
    // The first error is the one that says why: a refused connect is
    // followed by "Socket closed before the connection was established".
    raw.on("error", (error) => {
      // Not reached: the next connection tries the next host.
      if (!reached && current % hosts === at) current = at + 1;
      // Over TLS the TLS socket listens here and hands an error on to
      // postgres.js, which took its listeners off as the TLS socket
      // closed: a reset met after that was an uncaught ECONNRESET, which
      // ended the process at a client's end.
      if (unwound) return;
      failure ??= path === null ? error : unreachedPath(error, path);
    });
    raw.on("close", (closedOnError) => {
      let hadError = closedOnError && !unwound;
      // Ended by the server's side before it said a word to the startup
      // (a proxy or balancer whose database is down takes the connection
      // and closes it): no PostgreSQL closes a session so (it answers an
      // error first; one before 17 given direct TLS closes without, which
      // TLS reports in its own words), and none closes a cancel's
      // connection before it was written. Closed without an error, postgres.js 3.4.9 connects again
      // at once, outside its backoff, for as long as that lasts (hundreds
      // of connections a second), and the query it opened the connection
      // for waits through it all (porsager/postgres#1193). Handed on as
      // an error, that query fails, and postgres.js waits its backoff.
      if (
        failure === undefined && endedUnanswered && cancel === false &&
        tls === false
      ) {
        failure = Object.assign(
          new Error(
            `${where} closed the connection before answering its startup: no PostgreSQL answered there (a proxy whose database is down?)`,
          ),
          { code: "ECONNRESET" },
        );
        hadError = true;
      }
      // Closed with not a byte heard from the server: its connect timed
      // out (a host that drops packets), this socket's watch cut a
      // startup no one answered (a hung server, a proxy whose database
      // hangs), or it closed unanswered (above). postgres.js connects
      // again for the query it opened the connection for, and the next
      // connection tries the next host, as its own socket's would. A
      // cancel's connection is closed unanswered by any server.
      if (!answered && cancel !== true && current % hosts === at) {
        current = at + 1;
      }
      sockets.delete(raw);
      opened.delete(raw);
      quiet();
      const hold = cancel === true ? 0 : held(at, hosts, choosy);
      // A standby listed alone, passed over: postgres.js 3.4.9 connects
      // again on its backoff, which counts only a close that had an error
      // (and starts again at the next login it keeps).
      if (hold < 0) hadError = true;
      const close = () => {
        if (!socket.destroyed) socket.destroy();
        if (
          failure !== undefined && !cancel && socket.listenerCount("error") > 0
        ) socket.emit("error", failure);
        socket.emit("close", hadError);
        live.delete(raw);
        if (live.size === 0) { for (const done of [...drained]) done(); }
      };
      if (hold > 0) holding = { timer: setTimeout(handOn, hold), close };
      else if (failure !== undefined) setImmediate(close);
      else close();
    });
    // "open" while the close is held, so that the client's end (which ends
    // a socket only when it is open) ends it, and the close is handed on.
    Object.defineProperty(socket, "readyState", {
      get: () => holding === undefined ? raw.readyState : "open",
    });
    socket.setKeepAlive = (enable, initialDelay) => {
      raw.setKeepAlive(enable, initialDelay);
      return socket;
    };
    // postgres.js names the host to TLS by it (SNI, the certificate check).
    socket.host = host;
    // And names it with the port in its connection errors: without it,
    // a connect timed out read `write CONNECT_TIMEOUT 127.0.0.1:undefined`.
    socket.port = port;
    // How long this connection's close is held back (see failedHosts):
    // 0 unless it failed, after a round in which every host failed; -1
    // for the one host listed, passed over.
    const held = (at: number, hosts: number, choosy: boolean): number => {
      const now = performance.now();
      const since = state.answeredAt === undefined
        ? undefined
        : now - state.answeredAt;
      // Open long enough past its first answer (ended by the server, its
      // idle time or lifetime), or another connection is: the server
      // takes this client.
      if ((since !== undefined && since >= SETTLED_MS) || settled(now)) {
        failedHosts.clear();
        failedRounds = 0;
        return 0;
      }
      // Passed over: ended by the client under target_session_attrs as
      // soon as it logged in (a standby, for `primary`).
      const passedOver = choosy && state.ended && since !== undefined;
      if (passedOver && hosts === 1) return -1;
      // Unreached, or closed before a word (a connect refused or timed
      // out, a startup unanswered). One host alone postgres.js connects
      // to again only on its backoff.
      const failed = passedOver || (!answered && !state.ended && hosts > 1);
      if (!failed) return 0;
      // Only the close that ends a round is held: one within a round
      // goes on to the next host at once, so that a host back (a primary
      // restarted) is reached after at most one held close, not one for
      // each host listed before it.
      failedHosts.add(at);
      if (failedHosts.size < hosts) return 0;
      failedHosts.clear();
      failedRounds++;
      // At least 25 ms: a hold is never 0 (closed as not held).
      return jittered(
        Math.min(
          MOST_ROUND_WAIT_MS,
          FIRST_ROUND_WAIT_MS * 2 ** (failedRounds - 1),
        ),
        "equal",
        random,
      );
    };
    // Its error, then its close with an error, as a connect refused (TLS
    // asked for over a Unix socket, or a connect after `closed()`): the
    // query that opened it fails with the error, and the pool's place is
    // free again.
    if (refused !== null) raw.destroy(refused);
    return socket;
  };
  return Object.assign(make, {
    closed(ms: number): Promise<void> {
      stopped = true;
      if (live.size === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          drained.delete(done);
          resolve();
        };
        // At the bound, the sockets left are the ones the client's end let
        // go of without closing: a connect its end left waiting, made
        // before this call (postgres.js 3.4.9 opens it anew, with no query,
        // and keeps it in its ended pool), or one still connecting as the
        // end came (it ends only an open socket, and takes its listeners
        // off). Each stayed open on the server with its connection's
        // connect and lifetime timers running, up to an hour. Destroyed, their
        // close reaches postgres.js, which ends those timers; then it
        // resolves (another `ms` at most).
        let timer = setTimeout(() => {
          for (const raw of live) raw.destroy();
          timer = setTimeout(done, ms);
        }, ms);
        drained.add(done);
      });
    },
  });
}

/**
 * Why a connection over the Unix socket `path` cannot be made with the
 * TLS asked for (postgres.js 3.4.9 starts it for every `ssl` but
 * `prefer`, and for `prefer` too under direct negotiation), or `null`
 * where none is asked for.
 */
function tlsOverSocket(
  ssl: unknown,
  negotiation: unknown,
  path: string,
): Error | null {
  const direct = negotiation === "direct";
  if (ssl === undefined || ssl === null || ssl === false) return null;
  if (ssl === "prefer" && !direct) return null;
  // postgres.js reads these as no TLS only in the URL.
  const off = ssl === "disable" || ssl === "false";
  return new Error(
    `Cannot connect to the Unix socket ${path} with TLS (${
      off
        ? `ssl "${ssl}", which postgres.js 3.4.9 reads as TLS, not as no TLS`
        : `ssl ${typeof ssl === "string" ? ssl : "given"}`
    }${
      direct ? ", sslnegotiation direct" : ""
    }): PostgreSQL does not do TLS on a Unix socket (every connection would fail its TLS handshake): ${
      off
        ? "give ssl: false (and leave PGSSL unset)"
        : "leave ssl out for a socket (and PGSSL unset), or connect over TCP to keep TLS"
    }`,
  );
}

/**
 * A connect to a Unix socket that failed before it reached a server, in
 * words that say what to check (the system's say only `connect ENOENT
 * <path>`); its `code` kept. Any other error as it is.
 */
function unreachedPath(error: Error, path: string): Error {
  const code = (error as { code?: unknown }).code;
  const why = code === "ENOENT"
    ? "no PostgreSQL socket there (the dir, or the socket file in it, does not exist)"
    : code === "ECONNREFUSED"
    ? "no PostgreSQL socket there (a socket file no server listens on: one that stopped without removing it)"
    : code === "EACCES"
    ? "this process may not open that socket (the dir or the file's permissions)"
    : null;
  if (why === null) return error;
  return Object.assign(
    new Error(
      `${error.message}: ${why}: start the server, or give the client as its host the dir the server puts its socket in (SHOW unix_socket_directories) and as its port the server's port (the file is .s.PGSQL.<port>)${
        code === "EACCES"
          ? ", and run as a user the socket lets in (its group, often postgres)"
          : ""
      }`,
      { cause: error },
    ),
    { code, errno: (error as { errno?: unknown }).errno, address: path },
  );
}

/** Whether `chunk` begins a TLS handshake record (content type 22). */
function isTlsRecord(chunk: unknown): boolean {
  return chunk instanceof Uint8Array && chunk.length > 0 && chunk[0] === 0x16;
}

/** Whether `chunk` is a CancelRequest (16 bytes: its length, then 80877102). */
function isCancelRequest(chunk: unknown): boolean {
  return chunk instanceof Uint8Array && chunk.length === 16 &&
    new DataView(chunk.buffer, chunk.byteOffset, 16).getInt32(4) === 80877102;
}
