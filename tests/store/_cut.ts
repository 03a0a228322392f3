/**
 * What the tests of a connection the server ends at a chosen moment share
 * (postgres_flight_cut_test.ts, postgres_pooler_check_test.ts,
 * ../relayer/claim_answer_lost_test.ts): in the child process, a relay in
 * front of PostgreSQL that holds a client's bytes while the test ends a
 * session (or cuts the client off once a chunk was done), and the pool's
 * connections each used afterwards; in the test, the child run and its one
 * line read. And, in the test's own process (postgres_outside_write_test.ts,
 * postgres_commit_cancelled_test.ts, postgres_begin_rollback_cut_test.ts),
 * a client through such a relay on a fresh schema (`throughRelay`), a
 * query put behind a sleep (`sleepingQuery`), a prepared statement's text
 * rewritten (`parseRewritten`) or a word misspelt (`misspelt`), and a
 * cancel (`cancelOnceRunning`).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { connect, freshSchema, postgresUrl } from "./../_postgres.ts";

/**
 * A relay on 127.0.0.1 in front of the server of `url`: each chunk a
 * client sends waits for `hold(text, connection)` (the chunk as latin1,
 * and the client's connection to the relay, numbered from 0) before it
 * goes on, so the test can end a session at that moment. If `hold`
 * answers `"cut"`, the chunk goes on, the server's answer to it is
 * dropped and the client's connection closed as that answer arrives: what
 * the chunk asked for was done, and the client never hears so. If it
 * answers bytes, those go on instead of the chunk (a message rewritten).
 * Once
 * `stop` is aborted, the relay closes its listener and every connection
 * (in a child process it lives as long as the process).
 *
 * @returns `url` through the relay.
 */
export function relayed(
  url: string,
  hold: (
    text: string,
    connection: number,
  ) => Promise<void | "cut" | Uint8Array>,
  stop?: AbortSignal,
): string {
  const real = new URL(url);
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const text = new TextDecoder("latin1");
  const open = new Set<Deno.Conn>();
  stop?.addEventListener("abort", () => {
    for (const closable of [listener, ...open]) {
      try {
        closable.close();
      } catch {
        // already closed
      }
    }
  }, { once: true });
  (async () => {
    let connections = 0;
    for await (const client of listener) {
      open.add(client);
      const connection = connections++;
      (async () => {
        const server = await Deno.connect({
          hostname: real.hostname,
          port: Number(real.port || 5432),
        });
        open.add(server);
        let cut = false;
        (async () => {
          const answers = client.writable.getWriter();
          for await (const chunk of server.readable) {
            if (cut) {
              client.close();
              server.close();
              return;
            }
            await answers.write(chunk);
          }
          await answers.close();
        })().catch(() => {});
        const writer = server.writable.getWriter();
        try {
          for await (const chunk of client.readable) {
            const held = await hold(text.decode(chunk), connection);
            if (held === "cut") cut = true;
            await writer.write(held instanceof Uint8Array ? held : chunk);
          }
        } catch {
          // either side gone
        }
      })().catch(() => {});
    }
  })().catch(() => {});
  const proxied = new URL(url);
  proxied.port = String((listener.addr as Deno.NetAddr).port);
  return proxied.href;
}

/**
 * Ends every session named `name` in `state` through `admin`, and tells
 * whether it ended exactly one (a relay that ended none proves nothing).
 */
export async function endSession(
  admin: postgres.Sql,
  name: string,
  state: string,
): Promise<boolean> {
  const [row] = await admin`
    SELECT count(pg_terminate_backend(pid))::int AS n
    FROM pg_stat_activity
    WHERE application_name = ${name} AND state = ${state}`;
  return row?.n === 1;
}

/** Waits for the server's goodbye and the close to reach the client (300 ms). */
export function goodbye(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 300));
}

/**
 * A write and a read of a fresh intent on each of 8 tries at once, each
 * retried for 2 s: a connection handed back broken is among the pool's.
 *
 * @returns How many were written and read back.
 */
export async function useThePool(store: PostgresStore): Promise<number> {
  let answered = 0;
  await Promise.all(Array.from({ length: 8 }, async (_, i) => {
    for (let tries = 0; tries < 20; tries++) {
      try {
        await store.createIntent({ id: `x${i}`, state: "authorized" });
        assert.equal((await store.getIntent(`x${i}`))?.state, "authorized");
        answered++;
        return;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }));
  return answered;
}

/**
 * Runs `child` (a module beside this one) on a fresh schema of the test
 * server, with its sessions named `name` and `args` after, and returns
 * the line it printed; fails if the process ended otherwise than by
 * itself (the crash these tests look for ends it).
 */
export async function runCut(
  child: string,
  name: string,
  ...args: string[]
): Promise<string> {
  const admin = await connect(1);
  const schema = freshSchema();
  try {
    await new PostgresStore(admin, { schema }).migrate();
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--allow-net=127.0.0.1,localhost",
        "--allow-env",
        "--allow-read",
        new URL(child, import.meta.url).pathname,
        await postgresUrl(),
        schema,
        // Its sessions, found by this name (the server is shared).
        `${name}_${Deno.pid}`,
        ...args,
      ],
      cwd: new URL("../../", import.meta.url).pathname,
      stdin: "null",
    }).output();
    assert.equal(
      code,
      0,
      `the process ended: ${new TextDecoder().decode(stderr)}`,
    );
    return new TextDecoder().decode(stdout).trim();
  } finally {
    await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

/**
 * A test body on a fresh schema, migrated through `admin`, and a client
 * of `client.max` connections (named `client.name`, with
 * `client.fetch_types` and `client.prepare` where given) through a relay,
 * in front of `client.url` (a pooler's) or else the test server, whose
 * `hold` (see {@linkcode relayed}) `relay` makes from `admin` and the
 * schema. Whether the test passes or throws, the client is ended, the
 * schema dropped, `admin` ended and the relay closed.
 */
export async function throughRelay(
  client: {
    max: number;
    name?: string;
    url?: string;
    fetch_types?: false;
    prepare?: false;
  },
  relay: (
    fresh: { admin: postgres.Sql; schema: string },
  ) => Parameters<typeof relayed>[1],
  test: (
    fresh: { admin: postgres.Sql; schema: string; sql: postgres.Sql },
  ) => Promise<void>,
): Promise<void> {
  const stop = new AbortController();
  const admin = await connect(2);
  const schema = freshSchema();
  const { max, name, url, ...options } = client;
  const through = relayed(
    url ?? await postgresUrl(),
    relay({ admin, schema }),
    stop.signal,
  );
  const sql = postgres(through, {
    max,
    onnotice: () => {},
    max_lifetime: null,
    ...options,
    ...(name ? { connection: { application_name: name } } : {}),
  });
  try {
    await new PostgresStore(admin, { schema }).migrate();
    await test({ admin, schema, sql });
  } finally {
    await sql.end({ timeout: 1 });
    await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
    stop.abort();
  }
}

/**
 * Cancels (`pg_cancel_backend`) the session of `admin`'s server named
 * `name` once it runs a query that begins with `prefix` (a `pg_sleep` a
 * relay put before the query to be cut), trying every 10 ms, 200 times
 * at most.
 *
 * @returns Whether a cancel reached such a query, once it did or the
 *   tries ran out.
 */
export async function cancelOnceRunning(
  admin: postgres.Sql,
  name: string,
  prefix: string,
): Promise<boolean> {
  for (let tries = 0; tries < 200; tries++) {
    const [row] = await admin`
      SELECT count(pg_cancel_backend(pid))::int AS n
      FROM pg_stat_activity
      WHERE application_name = ${name} AND state = 'active'
        AND query LIKE ${prefix + "%"}`;
    if (row?.n === 1) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return false;
}

/**
 * The chunk `text` (latin1, whole messages from its start) with the body
 * of its first message of type `type` (one letter: 'Q' a simple query,
 * 'P' a Parse) that `rewrite` answers a body for replaced by that body,
 * or `undefined` when the chunk has no such message (or ends inside one).
 */
export function messageRewritten(
  text: string,
  type: string,
  rewrite: (body: string) => string | undefined,
): Uint8Array | undefined {
  const bytes = Uint8Array.from(text, (c) => c.charCodeAt(0));
  const view = new DataView(bytes.buffer);
  for (let at = 0; at + 5 <= bytes.length;) {
    const end = at + 1 + view.getUint32(at + 1);
    if (end > bytes.length) return;
    const body = text[at] === type
      ? rewrite(text.slice(at + 5, end))
      : undefined;
    if (body !== undefined) {
      const out = new Uint8Array(bytes.length - (end - at) + 5 + body.length);
      out.set(bytes.subarray(0, at));
      out[at] = type.charCodeAt(0);
      new DataView(out.buffer).setUint32(at + 1, 4 + body.length);
      out.set(Uint8Array.from(body, (c) => c.charCodeAt(0)), at + 5);
      out.set(bytes.subarray(end), at + 5 + body.length);
      return out;
    }
    at = end;
  }
}

/**
 * The chunk `text` (latin1, whole messages from its start) with `sleep`
 * put before the text of its first simple query ('Q') that `which`
 * picks: a cancel then cuts that query before it ran, as one that reaches
 * the server as it begins does. `undefined` when the chunk has no such
 * query (or ends inside a message).
 */
export function sleepingQuery(
  text: string,
  sleep: string,
  which: (query: string) => boolean,
): Uint8Array | undefined {
  return messageRewritten(
    text,
    "Q",
    (query) => which(query) ? sleep + query : undefined,
  );
}

/**
 * The chunk `text` (latin1, whole messages from its start) with the
 * statement text of its first Parse ('P') of `from` made `to`, or
 * `undefined` if it has none.
 */
export function parseRewritten(
  text: string,
  from: string,
  to: string,
): Uint8Array | undefined {
  return messageRewritten(text, "P", (body) => {
    const name = body.indexOf("\u0000");
    if (!body.startsWith(from + "\u0000", name + 1)) return undefined;
    return body.slice(0, name + 1) + to + body.slice(name + 1 + from.length);
  });
}

/**
 * The chunk `text` (latin1) with the first `word` in it spelt `as` (of
 * the same length), or `undefined` if it has none: a statement the server
 * then refuses before it runs.
 */
export function misspelt(
  text: string,
  word: string,
  as: string,
): Uint8Array | undefined {
  const at = text.indexOf(word);
  if (at < 0) return undefined;
  const bytes = Uint8Array.from(text, (c) => c.charCodeAt(0));
  bytes.set(Uint8Array.from(as, (c) => c.charCodeAt(0)), at);
  return bytes;
}
