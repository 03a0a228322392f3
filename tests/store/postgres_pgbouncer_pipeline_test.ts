/**
 * PostgresStore through a real PgBouncer (Debian's `pgbouncer` package) in
 * transaction mode with `prepare: false`: no read is sent behind one of
 * the store's probes of the server after a lost connection, behind a
 * write's flight (committed, refused, or outlasting `connectionWaitMs`) on
 * the connection it reserved, nor behind `migrate()`'s check of the
 * schema run while the store serves. Through PgBouncer, a statement sent behind another that ends
 * its transaction can lose its answer: PgBouncer 1.18 forwards it to the
 * same server session, hands that session back to its pool at the first
 * one's ReadyForQuery, and drops the answer that follows ("got packet '1'
 * from server when not linked"). postgres.js then waits for that answer
 * for good, and so does every statement given to that connection after it.
 *
 * The server gets its bytes 80 ms late here (a relay between PgBouncer and
 * PostgreSQL, as across a network or from a server under load), and reads
 * are given to the store the moment a probe reaches the relay, while its
 * answer is due; a relay between the client and PgBouncer notes what the
 * client sent behind a ReadyForQuery that ended a transaction. (A
 * statement sent behind another leaves the client once the first one's
 * bytes were acknowledged: at once, or after the pooler's delayed ACK,
 * 40 ms on Linux; a first answer that comes later than that is what lets
 * PgBouncer lose the second.)
 *
 * Skipped, with one loud line, where PostgreSQL or PgBouncer is missing,
 * except under `CI=true`, where that fails the run.
 *
 * @module
 */

import assert from "node:assert/strict";
import net from "node:net";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  processPostgres,
  startPgBouncer,
} from "../../support/postgres_server.ts";
import { freshSchema, pgbouncerAvailable, sharedClient } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

const available: boolean = await pgbouncerAvailable();

/** A TCP relay on 127.0.0.1 to `port`, with a hook on each direction's bytes. */
interface Relay {
  readonly port: Promise<number>;
  /** Resets the connections opened through it so far (an RST to the client). */
  reset(): void;
  close(): void;
}

function relay(
  port: number,
  hooks: {
    /** Called with the bytes from the client, which go on after it calls `pass`. */
    up(bytes: Uint8Array, pass: () => void, connection: number): void;
    down?(bytes: Uint8Array, connection: number): void;
  },
): Relay {
  const pairs: [net.Socket, net.Socket][] = [];
  let connections = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect(port, "127.0.0.1");
    const connection = connections++;
    pairs.push([client, upstream]);
    client.on("error", () => {});
    upstream.on("error", () => {});
    client.on("data", (bytes) =>
      hooks.up(bytes, () => {
        if (!upstream.destroyed) upstream.write(bytes);
      }, connection));
    upstream.on("data", (bytes) => {
      hooks.down?.(bytes, connection);
      if (!client.destroyed) client.write(bytes);
    });
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  return {
    port: new Promise((resolve) =>
      server.listen(
        0,
        "127.0.0.1",
        () => resolve((server.address() as net.AddressInfo).port),
      )
    ),
    reset() {
      for (const [client, upstream] of pairs.splice(0)) {
        client.resetAndDestroy();
        upstream.destroy();
      }
    },
    close() {
      server.close();
      this.reset();
    },
  };
}

/**
 * The protocol messages' types in a stream, chunk by chunk (a message may
 * span chunks); the first message of a client's stream (its startup
 * packet, or an SSL request) has no type byte.
 */
function messages(untyped: boolean): (bytes: Uint8Array) => string[] {
  let rest = new Uint8Array(0);
  let first = untyped;
  return (bytes) => {
    const all = new Uint8Array(rest.length + bytes.length);
    all.set(rest);
    all.set(bytes, rest.length);
    const view = new DataView(all.buffer);
    const types: string[] = [];
    let at = 0;
    for (;;) {
      if (first) {
        if (all.length - at < 4) break;
        const length = view.getInt32(at);
        if (all.length - at < length) break;
        at += length;
        first = false;
        continue;
      }
      if (all.length - at < 5) break;
      const length = view.getInt32(at + 1);
      if (all.length - at < 1 + length) break;
      types.push(String.fromCharCode(all[at]!));
      at += 1 + length;
    }
    rest = all.slice(at);
    return types;
  };
}

Deno.test({
  name:
    "PostgresStore through PgBouncer in transaction mode (prepare: false) sends no read behind its probe of the server after a lost connection, where PgBouncer could drop the read's answer",
  ignore: !available,
  // A read whose answer was dropped would wait for good: fail, not hang.
  fn: timeout(60_000, async () => {
    // Reads given to the store the moment a probe reaches the server.
    let onProbe = () => {};
    const { store, behind, reset, close } = await lateBouncer((text) => {
      // The probe's whole statement, ended by its NUL on the wire: a
      // statement holding "SELECT 1" in a subquery (row security's check)
      // is no probe, and taken for one it gave reads that gave checks.
      if (/SELECT (?:1|\$1::int)\0/.test(text)) onProbe();
    });
    const reads: Promise<unknown>[] = [];
    try {
      await store.createIntent({ id: "pi_1", state: "created" });
      let probes = 0;
      onProbe = () => {
        probes++;
        for (let n = 0; n < 3; n++) reads.push(store.getIntent("pi_1"));
      };
      // The connection reset: the read under it fails as lost, and the
      // store probes the server once it is open again.
      const lost = store.getIntent("pi_1");
      reset();
      await lost.then(() => {}, () => {});
      await new Promise((resolve) => setTimeout(resolve, 1500));
      assert.ok(probes >= 2, `probes: ${probes}`);
      await allAnswered(reads, behind);
      assert.equal((await store.getIntent("pi_1"))?.state, "created");
    } finally {
      onProbe = () => {};
      await Promise.allSettled(reads);
      await close();
    }
  }),
});

/**
 * The `ReadyForQuery` statuses in a stream of the server's messages, chunk
 * by chunk (`I` idle: the statement ended its transaction; `T` in one;
 * `E` in one that failed).
 */
function readyStatuses(): (bytes: Uint8Array) => string[] {
  let rest = new Uint8Array(0);
  return (bytes) => {
    const all = new Uint8Array(rest.length + bytes.length);
    all.set(rest);
    all.set(bytes, rest.length);
    const view = new DataView(all.buffer);
    const statuses: string[] = [];
    let at = 0;
    while (all.length - at >= 5) {
      const length = view.getInt32(at + 1);
      if (all.length - at < 1 + length) break;
      if (all[at] === 90) statuses.push(String.fromCharCode(all[at + 5]!));
      at += 1 + length;
    }
    rest = all.slice(at);
    return statuses;
  };
}

/**
 * A relay to PgBouncer at `port` that notes, per client connection, each
 * ReadyForQuery that ends a transaction (status I) while the client has
 * already sent more behind the statement it answers.
 */
function watchEnds(port: number): { watch: Relay; behind: string[] } {
  const text = new TextDecoder("latin1");
  const behind: string[] = [];
  const state = new Map<
    number,
    {
      up: (b: Uint8Array) => string[];
      down: (b: Uint8Array) => string[];
      sent: string[];
    }
  >();
  const of = (connection: number) => {
    let s = state.get(connection);
    if (s === undefined) {
      s = { up: messages(true), down: readyStatuses(), sent: [] };
      state.set(connection, s);
    }
    return s;
  };
  const watch = relay(port, {
    up(bytes, pass, connection) {
      const s = of(connection);
      const said = text.decode(bytes).replace(/[^ -~]+/g, " ").trim();
      for (const type of s.up(bytes)) s.sent.push(`${type} ${said}`);
      pass();
    },
    down(bytes, connection) {
      const s = of(connection);
      for (const status of s.down(bytes)) {
        // The statement answered: up to its Sync, or its simple Query.
        let answered = "";
        while (s.sent.length > 0) {
          answered = s.sent.shift()!;
          if (answered[0] === "S" || answered[0] === "Q") break;
        }
        const more = s.sent.filter((m) => m[0] !== "X");
        if (status === "I" && more.length > 0) {
          behind.push(`${answered.slice(0, 60)} => ${more[0]!.slice(0, 60)}`);
        }
      }
    },
  });
  return { watch, behind };
}

/**
 * A migrated store on a fresh schema through a real PgBouncer in
 * transaction mode, over a client of one connection with `prepare: false`
 * (whatever the pool has waiting when a connection comes back is sent on
 * it at once). The server gets its bytes 80 ms late: a flight (BEGIN, two
 * writes described first, COMMIT) takes five round trips, 400 ms and more;
 * `later` holds a chunk (as latin1) that many ms more, and the
 * connection's chunks behind it.
 * `behind` lists what the client sent behind a ReadyForQuery that ended a
 * transaction (see {@linkcode watchEnds}); `sent` is called with each chunk
 * PgBouncer sends the server (as latin1), as it arrives; `reset` resets the
 * client's connections (an RST).
 */
async function lateBouncer(
  sent: (text: string) => void = () => {},
  later: (text: string) => number = () => 0,
) {
  const { server, missing } = await processPostgres();
  if (server === null) throw new Error(missing);
  const text = new TextDecoder("latin1");
  // Each connection's bytes go on in the order they came, a chunk held
  // longer holding those behind it.
  const due = new Map<number, number>();
  const late = relay(server.port, {
    up(bytes, pass, connection) {
      const said = text.decode(bytes);
      sent(said);
      const now = performance.now();
      const at = Math.max(now + 80 + later(said), due.get(connection) ?? 0);
      due.set(connection, at);
      setTimeout(pass, at - now);
    },
  });
  const bouncer = await startPgBouncer(
    { ...server, port: await late.port },
    { mode: "transaction", poolSize: 2 },
  );
  const { watch, behind } = watchEnds(Number(new URL(bouncer.url).port));
  const url = new URL(bouncer.url);
  url.port = String(await watch.port);
  const sql = postgres(url.href, {
    prepare: false,
    max: 1,
    max_lifetime: null,
    onnotice: () => {},
  });
  const schema = freshSchema();
  const store = new PostgresStore(sql, { schema, connectionWaitMs: 3000 });
  const close = async () => {
    await sql.end({ timeout: 0 });
    watch.close();
    await bouncer.stop();
    late.close();
    await (await sharedClient()).unsafe(
      `DROP SCHEMA IF EXISTS "${schema}" CASCADE`,
    );
  };
  try {
    await store.migrate();
  } catch (error) {
    await close();
    throw error;
  }
  return { sql, store, schema, behind, reset: () => watch.reset(), close };
}

/** Every read answered, and nothing was sent behind a transaction's end. */
async function allAnswered(
  reads: readonly Promise<unknown>[],
  behind: readonly string[],
): Promise<void> {
  const answers = await Promise.allSettled(reads);
  const failed = answers.flatMap((answer) =>
    answer.status === "rejected" ? [String(answer.reason)] : []
  );
  assert.deepEqual(failed, [], `${failed.length} of ${reads.length}`);
  assert.deepEqual(
    behind,
    [],
    "statements sent behind one ending its transaction",
  );
}

Deno.test({
  name:
    "PostgresStore through PgBouncer in transaction mode (prepare: false) sends nothing behind a statement that ends its transaction in its writes: a flight refused inside, and one not answered within connectionWaitMs, hand their connection back only once their last statement answered",
  ignore: !available,
  // A read whose answer was dropped would wait for good: fail, not hang.
  fn: timeout(60_000, async () => {
    // The flight of the write that outlasts its bound, held 1.5 s more
    // than its bound (1 s): only the flight, so the write's read, one
    // round trip, answers within the bound however loaded the machine.
    let holdFlight = false;
    const { sql, store, schema, behind, close } = await lateBouncer(
      () => {},
      (text) => holdFlight && /\bBEGIN\b/.test(text) ? 1_500 : 0,
    );
    const reads: Promise<unknown>[] = [];
    try {
      for (const id of ["pi_1", "pi_2"]) {
        await store.createIntent({ id, state: "authorized", hold: "pending" });
      }
      const move = (on: PostgresStore, id: string) =>
        on.transition(id, {
          from: "authorized",
          to: "settling",
          version: "1",
          at: 500,
        });
      // Two writes on one version: both read it, one commits, the other's
      // flight is refused at its head (the transaction fails, its COMMIT
      // rolls it back); reads given as the first answers wait for the
      // connection the second holds.
      const both = [move(store, "pi_1"), move(store, "pi_1")];
      await Promise.race(both.map((m) => m.then(() => {}, () => {})));
      for (let n = 0; n < 3; n++) reads.push(store.getIntent("pi_1"));
      const moved = await Promise.allSettled(both);
      assert.deepEqual(
        moved.map((m) =>
          m.status === "fulfilled" ? "written" : (m.reason as Error).name
        ).sort(),
        ["ConflictError", "written"],
      );
      // Answered before the next write, whose read waits at most its bound.
      await Promise.allSettled(reads);
      // A write whose flight outlasts its bound: it answers that it may
      // have landed, and its connection goes back to the pool once the
      // flight (and the statement sent behind it) answered; reads given
      // as it answers wait for that. (Its bound was 250 ms, under the five
      // round trips of a flight and over the read's one, and a loaded
      // machine's read outlasted it: "did not answer the store's read
      // within 250ms".)
      const hasty = new PostgresStore(sql, {
        schema,
        connectionWaitMs: 1_000,
      });
      holdFlight = true;
      await assert.rejects(
        move(hasty, "pi_2"),
        /did not answer the write within 1000ms/,
      );
      holdFlight = false;
      for (let n = 0; n < 3; n++) reads.push(store.getIntent("pi_2"));
      await allAnswered(reads, behind);
      assert.equal((await store.getIntent("pi_2"))?.state, "settling");
    } finally {
      await Promise.allSettled(reads);
      await close();
    }
  }),
});

Deno.test({
  name:
    "PostgresStore through PgBouncer in transaction mode (prepare: false) sends nothing behind migrate()'s check of the schema, run again while the store serves",
  ignore: !available,
  // A read whose answer was dropped would wait for good: fail, not hang.
  fn: timeout(60_000, async () => {
    const { store, behind, close } = await lateBouncer();
    const reads: Promise<unknown>[] = [];
    try {
      await store.createIntent({ id: "pi_1", state: "created" });
      // migrate() again (nothing left to create) while reads come in, as
      // an operator's or a second start's would on a shared client.
      const again = store.migrate();
      for (let n = 0; n < 3; n++) reads.push(store.getIntent("pi_1"));
      await again;
      await allAnswered(reads, behind);
      assert.equal((await store.getIntent("pi_1"))?.state, "created");
    } finally {
      await Promise.allSettled(reads);
      await close();
    }
  }),
});
