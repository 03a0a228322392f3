/**
 * A connection postgres.js closes (its `terminate()`: the store's
 * `closeSession` after a flight unanswered past its bound, or the client's
 * end) writes its goodbye (Terminate) and ends its socket, then waits for
 * the server's side to close before it frees its place in the pool. Behind
 * a partition no close comes (the peer stopped reading: no FIN, no RST),
 * and the service's socket (`answeredSocket`) took the goodbye for one more
 * write to watch, closing it only after another `answerMs` of silence: the
 * pool's place stayed taken for twice the store's bound after the flight.
 * The goodbye asks for no answer, so the socket closes once it is handed
 * to the system, which still delivers it to a live server.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { answeredSocket } from "../../store/_postgres_socket.ts";
import { postgresAvailable, postgresUrl } from "../_postgres.ts";
import { connect } from "../_postgres.ts";
import { relayed } from "./_cut.ts";

/** The watch's bound here: a close that waits for it takes this long. */
const ANSWER_MS = 2_000;

Deno.test({
  name:
    "answeredSocket closes a connection once its goodbye is written, not a bound later, when the peer stopped reading",
  ignore: !postgresAvailable,
  async fn() {
    const stop = new AbortController();
    const stopped = new Promise<void>((resolve) =>
      stop.signal.addEventListener("abort", () => resolve(), { once: true })
    );
    let partitioned = false;
    // Once partitioned, the relay holds the client's next chunk (the
    // goodbye) and reads nothing more from it, with its sockets open.
    const url = relayed(
      await postgresUrl(),
      async () => {
        if (partitioned) await stopped;
      },
      stop.signal,
    );
    const cuts: string[] = [];
    const socket = answeredSocket(ANSWER_MS, (line) => cuts.push(line));
    const sql = postgres(url, {
      max: 1,
      onnotice: () => {},
      max_lifetime: null,
      socket,
    } as postgres.Options<Record<string, never>>);
    try {
      await sql`SELECT 1`;
      partitioned = true;
      const start = performance.now();
      // An idle connection's end: postgres.js's terminate(), then a wait
      // for the socket's close.
      await sql.end();
      await socket.closed(10_000);
      const ms = performance.now() - start;
      assert.ok(
        ms < ANSWER_MS / 2,
        `the connection closed ${Math.round(ms)}ms after its goodbye`,
      );
      assert.deepEqual(cuts, [], "closed as a goodbye, not as a cut");
    } finally {
      stop.abort();
      await sql.end({ timeout: 0 });
    }
  },
});

Deno.test({
  name:
    "answeredSocket's close after the goodbye still ends the session on a live server, once its statement is done",
  ignore: !postgresAvailable,
  async fn() {
    const admin = await connect(1);
    const name = `goodbye_${Deno.pid}`;
    const socket = answeredSocket(10_000);
    const sql = postgres(await postgresUrl(), {
      max: 1,
      onnotice: () => {},
      max_lifetime: null,
      socket,
      connection: { application_name: name },
    } as postgres.Options<Record<string, never>>);
    try {
      const sessions = async (running: boolean) => {
        const [row] = await admin`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE application_name = ${name}
            AND (${!running} OR query LIKE 'SELECT pg_sleep%')`;
        return row?.n;
      };
      // A slow statement on a live server when the client ends: it runs
      // on to its end, then the session reads the goodbye and ends. The
      // end waits until the server runs it (a loaded machine may take more
      // than a moment to connect): ended before, nothing runs on.
      const slow = sql`SELECT pg_sleep(2)`.catch(() => {});
      for (let tries = 0; tries < 250 && await sessions(true) !== 1; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.equal(await sessions(true), 1, "the statement runs");
      const start = performance.now();
      await sql.end({ timeout: 0 });
      await slow;
      await socket.closed(10_000);
      if (performance.now() - start < 1_000) {
        assert.equal(await sessions(true), 1, "the statement runs on");
      }
      for (let tries = 0; tries < 250 && await sessions(false) !== 0; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.equal(await sessions(false), 0, "the session ended");
      // Its statement had at least a second to run when the client ended.
      assert.ok(performance.now() - start >= 1_000, "not before its statement");
    } finally {
      await sql.end({ timeout: 0 });
      await admin.end();
    }
  },
});
