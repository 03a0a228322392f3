/**
 * A query handed to a connection between its socket's error and its close.
 * postgres.js 3.4.9 fails what a connection holds when its socket errs,
 * but keeps the connection in its pool until the close: a query given to
 * it in between (by code that runs on the error, a retry or the next
 * caller) is written to a socket already destroyed, its bytes dropped,
 * and a close with an error (`hadError`) fails nothing. The query then
 * waits until the pool opens that connection again, and is resolved there
 * with the answer of the connection's startup: no rows, which a read
 * takes as "no such row". The service's socket (`answeredSocket`) hands
 * postgres.js the error and the close together, so that no query can
 * come between them: it goes to the pool, which opens the connection
 * again for it.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Duplex } from "node:stream";
import postgres from "postgres";
import { reconnectBackoffS } from "../../store/postgres.ts";
import { answeredSocket } from "../../store/_postgres_socket.ts";
import { postgresAvailable, postgresUrl } from "../_postgres.ts";
import { refusingRelay } from "../_refusing_relay.ts";

/** What a query came to: its rows, its error's code, or nothing yet. */
type Outcome =
  | { rows: unknown[]; command: string | null }
  | { error: string }
  | "unsettled";

Deno.test({
  name:
    "answeredSocket() leaves no query on a connection between its socket's error and its close: the query is answered on the connection opened again",
  ignore: !postgresAvailable,
  async fn() {
    const relay = await refusingRelay(await postgresUrl());
    const made = answeredSocket(10_000);
    let outcome: Outcome = "unsettled";
    let handed: Promise<void> | undefined;
    let closed!: () => void;
    const close = new Promise<void>((resolve) => closed = resolve);
    // The first connection's socket: on its error (this listener runs
    // before postgres.js's, and the query reaches the pool a microtask
    // later, after postgres.js took the error), a query is handed to the
    // pool, whose one connection is that one, idle.
    let first = true;
    const socket = Object.assign(
      (options: { host: string[]; port: number[] }) => {
        const opened = made(options) as Duplex;
        if (first) {
          first = false;
          opened.on("error", () => {
            handed ??= sql`SELECT 1 AS one`.then(
              (rows) =>
                void (outcome = { rows: [...rows], command: rows.command }),
              (error) =>
                void (outcome = { error: String(error?.code ?? error) }),
            );
          });
          opened.on("close", () => closed());
        }
        return opened;
      },
      { closed: made.closed },
    );
    // Made once the socket is: the listener above runs only after.
    const sql = postgres(relay.url, {
      max: 1,
      onnotice: () => {},
      backoff: reconnectBackoffS,
      socket,
    } as postgres.Options<Record<string, never>>);
    try {
      assert.deepEqual([...await sql`SELECT 1 AS one`], [{ one: 1 }]);
      relay.reset();
      await close;
      assert.ok(handed, "the socket's error came before its close");
      // Within 5 s of the close (a reconnect takes 25 to 50 ms here).
      const deadline = Date.now() + 5_000;
      while (outcome === "unsettled" && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const settled: Outcome = outcome;
      // Then another query, on the same connection: before, it waited out
      // postgres.js's connect timeout (30 s) behind the first one's bytes.
      const next = await sql`SELECT 2 AS two`.then(
        (rows) => [...rows],
        (error) => String(error?.code ?? error),
      );
      assert.deepEqual(
        { within5s: settled, next },
        {
          within5s: { rows: [{ one: 1 }], command: "SELECT" },
          next: [{ two: 2 }],
        },
      );
    } finally {
      relay.close();
      await sql.end({ timeout: 0 });
      await made.closed(5_000);
    }
  },
});
