/**
 * A postgres.js client that counts what PostgresStore costs: round trips
 * (the client's flushes to the server: postgres.js gathers the messages of
 * one turn, pipelined statements included, into one write, then waits for
 * the answers) and statements (every query it runs, `BEGIN` and `COMMIT`
 * included). One connection, so every statement goes through the counted
 * socket.
 *
 * @module
 */

import net from "node:net";
import postgres from "postgres";
import { PostgresStore } from "../store/postgres.ts";
import { assertTook, type PathId, PATHS, preparePath } from "./store_paths.ts";

/** What a piece of work cost. */
export interface PostgresCounts {
  /** Client-to-server flushes: one per wait for the server. */
  readonly roundTrips: number;
  /** Statements run, `BEGIN` and `COMMIT` included. */
  readonly statements: number;
}

/** A one-connection client on `url` that counts round trips and statements. */
export class CountingPostgres {
  #roundTrips = 0;
  #statements = 0;
  /** The client to hand to a PostgresStore. */
  readonly sql: postgres.Sql;

  constructor(url: string) {
    const { hostname, port } = new URL(url);
    const options = {
      max: 1,
      onnotice: () => {},
      debug: () => {
        this.#statements++;
      },
      // Undocumented in the client's types, but part of its API: a
      // connected socket of our own, whose writes we count.
      socket: () =>
        new Promise<net.Socket>((resolve, reject) => {
          const socket = net.connect(Number(port), hostname);
          const write = socket.write.bind(socket) as (
            ...args: unknown[]
          ) => boolean;
          socket.write = ((...args: unknown[]) => {
            this.#roundTrips++;
            return write(...args);
          }) as typeof socket.write;
          socket.once("connect", () => resolve(socket));
          socket.once("error", reject);
        }),
    };
    this.sql = postgres(
      url,
      options as postgres.Options<Record<string, never>>,
    );
  }

  /** The counts so far. */
  get counts(): PostgresCounts {
    return { roundTrips: this.#roundTrips, statements: this.#statements };
  }

  /** Runs `work` and returns what it cost. */
  async measure<T>(
    work: () => Promise<T>,
  ): Promise<{ result: T } & PostgresCounts> {
    const before = this.counts;
    const result = await work();
    const after = this.counts;
    return {
      result,
      roundTrips: after.roundTrips - before.roundTrips,
      statements: after.statements - before.statements,
    };
  }
}

/** One delivery of every path on a fresh intent; the second run of each is measured. */
export async function measurePostgresPaths(
  url: string,
): Promise<Map<PathId, PostgresCounts>> {
  const counting = new CountingPostgres(url);
  const schema = `ops_${crypto.randomUUID().slice(0, 8)}`;
  const store = new PostgresStore(counting.sql, { schema });
  await store.migrate();
  const measured = new Map<PathId, PostgresCounts>();
  let n = 0;
  try {
    for (const path of PATHS) {
      for (const round of [1, 2]) {
        const intentId = `pi_ops_${path.id}_${++n}`;
        const run = await preparePath(path, store, intentId);
        const { result, roundTrips, statements } = await counting.measure(run);
        assertTook(path, result, await store.getIntent(intentId));
        if (round === 2) measured.set(path.id, { roundTrips, statements });
      }
    }
  } finally {
    await counting.sql.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
    await counting.sql.end();
  }
  return measured;
}
