/**
 * PostgresStore's plain requests (its reads, a `migrate()`'s `begin()`),
 * on the client its writes reserve connections of, are never handed to a
 * connection postgres.js is handing to a write's `reserve()`, on a real
 * server.
 *
 * postgres.js 3.4.9 hands an idle connection to the `reserve()` at the
 * head of its queue while the connection is still among its busy ones,
 * and takes it out only when that `reserve()` resumes, a microtask later.
 * A query handed to the pool in between goes out on it, and the write's
 * first query is written behind it: a query described first (every one
 * with parameters under `prepare: false`) took the write's answers as its
 * own, and the write was refused "unnamed prepared statement does not
 * exist" (the project's CI met it once, in `postgres_reserve_turns_test.ts`);
 * a `begin()`'s `BEGIN` there gives the connection two owners.
 *
 * postgres.js hands a query to its pool a microtask after it is awaited;
 * Deno's `node:net` reads a socket's chunk in a microtask of its own, which
 * can come in between. That moment is made here: the pool's one connection
 * is kept busy by a query whose answer the socket holds, a write waits for
 * that connection, and the held answer is read in that microtask of the
 * request under test (or, where the store holds the request back, 200 ms
 * later).
 *
 * @module
 */

import assert from "node:assert/strict";
import net from "node:net";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  freshSchema,
  postgresAvailable,
  postgresUrl,
  serverUpFirst,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

serverUpFirst();

/** A socket option whose connections' answers can be held, then read all at once. */
function holdingSockets() {
  const held = {
    on: false,
    chunks: [] as [(chunk: unknown) => void, unknown][],
  };
  const socket = (options: { host: string[]; port: number[] }) => {
    const made = net.connect(options.port[0]!, options.host[0]);
    const on = made.on.bind(made);
    made.on = ((event: string, listener: (chunk: unknown) => void) =>
      on(
        event,
        event !== "data" ? listener : (chunk: unknown) => {
          if (held.on) held.chunks.push([listener, chunk]);
          else listener(chunk);
        },
      )) as typeof made.on;
    return made;
  };
  /** Reads every held answer, in this turn. */
  const letGo = () => {
    held.on = false;
    for (const [listener, chunk] of held.chunks.splice(0)) listener(chunk);
  };
  return { held, socket, letGo };
}

/** Within `ms`, or what it was doing. */
function within<T>(ms: number, what: Promise<T>, doing: string) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    what,
    new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve(`${doing} hung`), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * A client of one connection (`prepare: false`, as behind a pooler in
 * transaction mode), through which the store's request that `trigger`
 * marks reads the held answer at the moment under test.
 */
async function windowClient() {
  const sockets = holdingSockets();
  const sql = postgres(await postgresUrl(), {
    max: 1,
    prepare: false,
    onnotice: () => {},
    max_lifetime: null,
    socket: sockets.socket,
  } as postgres.Options<Record<string, never>>);
  const armed = { read: false, begin: false };
  const client = new Proxy(sql, {
    apply(target, self, args) {
      const query = Reflect.apply(target, self, args) as {
        handler?: (query: unknown) => void;
      };
      const send = query.handler;
      if (armed.read && typeof send === "function") {
        // The first handed to the pool (a fragment of it never is): the
        // held answer is read first.
        query.handler = (self: unknown) => {
          if (armed.read) {
            armed.read = false;
            sockets.letGo();
          }
          send(self);
        };
      }
      return query;
    },
    get(target, name) {
      const value = Reflect.get(target, name);
      if (name !== "begin" || typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (armed.begin) {
          armed.begin = false;
          // Read after `BEGIN` is awaited, before it is handed to the pool.
          queueMicrotask(sockets.letGo);
        }
        return Reflect.apply(value, target, args);
      };
    },
  });
  /** Runs `request` while a write of `store` waits for the held connection. */
  const whileWriteWaits = async (
    store: PostgresStore,
    id: string,
    arm: keyof typeof armed,
    request: () => Promise<string>,
  ) => {
    sockets.held.on = true;
    // Not described first: the connection stays among the busy ones.
    const busy = sql`SELECT 1 AS busy`.then(() => {});
    await new Promise((resolve) => setTimeout(resolve, 50));
    const write = store.createIntent({ id }).then(
      (intent) => intent.state,
      (error: Error) => error.message,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    armed[arm] = true;
    const asked = request();
    // The store held the request back: the answer is read now.
    const late = setTimeout(sockets.letGo, 200);
    try {
      await busy;
      return [
        await within(10_000, asked, "the request"),
        await within(10_000, write, "the write"),
      ];
    } finally {
      clearTimeout(late);
    }
  };
  return { sql, client, sockets, whileWriteWaits };
}

Deno.test({
  name:
    "PostgresStore: a read handed to the pool as its one connection is handed to a waiting write takes its own answer, and the write lands",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const { sql, client, sockets, whileWriteWaits } = await windowClient();
    const schema = freshSchema();
    const store = new PostgresStore(client, { schema });
    try {
      await store.migrate();
      await store.createIntent({ id: "pi_read", state: "authorized" });
      const answers = await whileWriteWaits(
        store,
        "pi_write",
        "read",
        () =>
          store.getIntent("pi_read").then(
            (intent) => intent?.state ?? "none",
            (error: Error) => error.message,
          ),
      );
      assert.deepEqual(answers, ["authorized", "created"]);
      assert.equal((await store.getIntent("pi_write"))?.state, "created");
    } finally {
      sockets.letGo();
      store.close();
      await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await sql.end();
    }
  }),
});

Deno.test({
  name:
    "PostgresStore: a migrate() begun as the client's one connection is handed to a waiting write of another store on it takes a connection of its own, and both land",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const { sql, client, sockets, whileWriteWaits } = await windowClient();
    const schemas = [freshSchema(), freshSchema()];
    const [writer, migrating] = schemas.map((schema) =>
      new PostgresStore(client, { schema })
    );
    try {
      await writer!.migrate();
      const answers = await whileWriteWaits(
        writer!,
        "pi_write",
        "begin",
        () =>
          migrating!.migrate().then(
            () => "migrated",
            (error: Error) => error.message,
          ),
      );
      assert.deepEqual(answers, ["migrated", "created"]);
      await migrating!.createIntent({ id: "pi_other" });
      assert.equal((await writer!.getIntent("pi_write"))?.state, "created");
      assert.equal(
        (await migrating!.getIntent("pi_other"))?.state,
        "created",
      );
    } finally {
      sockets.letGo();
      for (const store of [writer, migrating]) store!.close();
      for (const schema of schemas) {
        await sql.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      }
      await sql.end();
    }
  }),
});
