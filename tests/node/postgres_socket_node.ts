/**
 * `answeredSocketOption` on Node and on Bun, where its socket's stream
 * (`node:stream`'s Duplex over `node:net`) is the runtime's own, not
 * Deno's: run as a plain script (`node postgres_socket.mjs`, `bun run
 * postgres_socket.mjs`) over the bundle `deno task node-check` and
 * `deno task bun-check` build, against the real server whose URL and
 * socket dir they pass (`RELAYER_PG_URL`, `RELAYER_PG_SOCKET_DIR`). It
 * checks, in about 1 s:
 *
 * - a query answered through the socket over TCP and over the Unix socket;
 * - a client that asks for TLS over the Unix socket failed at once, in the
 *   socket's words, twice on a pool of one (the place freed), its sockets
 *   closed;
 * - the wait between rounds in which every host failed (two hosts down,
 *   `target_session_attrs=primary`) drawn from the injected random: 25,
 *   50, 100, 200 ms at 0, 50, 100, 200, 400 ms at the top;
 * - `sql.end()` while a round's close is held (the socket reads "open"),
 *   not awaiting `closed()`: the process exits within 400 ms of the end
 *   (a close left held kept it up to 1 s).
 *
 * It prints a line per check and exits 1 if one failed.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import process from "node:process";
import postgres from "postgres";
import {
  answeredSocketOption,
  type PostgresSocket,
} from "../../store/postgres_socket.ts";
import { downPort } from "../store/_down_port.ts";

const url = process.env.RELAYER_PG_URL;
const socketDir = process.env.RELAYER_PG_SOCKET_DIR;
if (!url || !socketDir) {
  throw new Error(
    "RELAYER_PG_URL or RELAYER_PG_SOCKET_DIR is not set: run deno task node-check or deno task bun-check",
  );
}
const runtime = process.versions.bun === undefined
  ? `Node ${process.version}`
  : `Bun ${process.versions.bun}`;
const failed: string[] = [];

/** Prints `what` as passed or failed, and keeps a failure. */
function check(ok: boolean, what: string): void {
  console.log(`${ok ? "ok" : "FAIL"} ${what}`);
  if (!ok) failed.push(what);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Options = postgres.Options<Record<string, never>>;

/**
 * A client on the socket, with each socket it made and when; `random`
 * drawn for the held waits.
 */
function client(options: Record<string, unknown>, random?: () => number) {
  const answered = answeredSocketOption(2_000, undefined, random);
  const made: { socket: PostgresSocket; at: number; closed: boolean }[] = [];
  const sql = postgres({
    max: 1,
    onnotice: () => {},
    ...options,
    socket: (options: Parameters<typeof answered.socket>[0]) => {
      const socket = answered.socket(options);
      const entry = { socket, at: performance.now(), closed: false };
      socket.once("close", () => entry.closed = true);
      made.push(entry);
      return socket;
    },
  } as unknown as Options);
  return { sql, made, closed: answered.socket.closed };
}

/** The code or message a query failed with, or "answered". */
const outcome = (query: Promise<unknown>) =>
  query.then(
    () => "answered",
    (error: Error & { code?: string }) => error.code ?? error.message,
  );

const port = Number(new URL(url).port);

// 1. Answered over TCP and over the Unix socket.
for (
  const [where, options] of [
    ["TCP", { host: "127.0.0.1", port, pass: new URL(url).password }],
    ["the Unix socket", { host: socketDir, port }],
  ] as const
) {
  const { sql, made, closed } = client({
    ...options,
    user: "postgres",
    database: "postgres",
  });
  const [row] = await sql`SELECT 41 + 1 AS n`.catch(() => [undefined]);
  await sql.end();
  const started = performance.now();
  await closed(2_000);
  check(
    row?.n === 42 && made.length === 1 &&
      performance.now() - started < 500 && made[0]!.closed,
    `${runtime}: a query through answeredSocketOption's socket over ${where} answered, and its socket closed at the end`,
  );
}

// 2. TLS asked for over the Unix socket: failed before it connects.
{
  const { sql, made, closed } = client({
    host: socketDir,
    port,
    user: "postgres",
    database: "postgres",
    ssl: "require",
    connect_timeout: 5,
    backoff: 0.05,
  });
  const path = `${socketDir}/.s.PGSQL.${port}`;
  const said: string[] = [];
  const ms: number[] = [];
  for (let i = 0; i < 2; i++) {
    const started = performance.now();
    said.push(await outcome(sql`SELECT 1`));
    ms.push(performance.now() - started);
  }
  await sql.end({ timeout: 0 });
  const started = performance.now();
  await closed(2_000);
  const drained = performance.now() - started;
  const expected =
    `Cannot connect to the Unix socket ${path} with TLS (ssl require): PostgreSQL does not do TLS on a Unix socket`;
  check(
    said.every((line) => line.startsWith(expected)) &&
      ms.every((ms) => ms < 1_000) && drained < 500 &&
      made.every(({ closed }) => closed),
    `${runtime}: ssl require over the Unix socket failed twice on a pool of one, at once (${
      ms.map((ms) => ms.toFixed(0)).join(", ")
    } ms), saying so, and its sockets closed (${drained.toFixed(0)} ms): ${
      said[0]?.slice(0, 80)
    }…`,
  );
}

// Two hosts down under target_session_attrs=primary: every round fails.
async function downClient(random: () => number) {
  return client({
    host: ["127.0.0.1", "127.0.0.1"],
    port: [await downPort(), await downPort()],
    target_session_attrs: "primary",
  }, random);
}

// 4's client, started now so that its rounds go on while 3 runs.
const held = await downClient(() => 1);
const heldQuery = outcome(held.sql`SELECT 1`);

// 3. The held waits drawn from the injected random.
/** One run of it: whether the waits were as asked, and a line saying them. */
async function heldWaits(): Promise<{ ok: boolean; line: string }> {
  let draws = 0;
  const low = await downClient(() => (draws++, 0));
  const high = await downClient(() => 1);
  const queries = [low, high].map(({ sql }) => outcome(sql`SELECT 1`));
  // Rounds of two connects: the fifth round's first connect follows the
  // fourth round's held close (400 ms at the top).
  const started = performance.now();
  while (
    (low.made.length < 9 || high.made.length < 9) &&
    performance.now() - started < 5_000
  ) await sleep(10);
  // The gap before each round's first connect is the wait held before it.
  const waits = ({ made }: typeof low) =>
    [2, 4, 6, 8].map((i) => (made[i]?.at ?? NaN) - (made[i - 1]?.at ?? NaN));
  const [lowWaits, highWaits] = [waits(low), waits(high)];
  // Never shorter than asked; later by at most 190 ms (a loaded machine's
  // timers), so the fourth wait at 0 (200 ms) is told from the top's (400).
  const near = (got: number[], want: number[]) =>
    got.every((ms, i) => ms >= want[i]! - 5 && ms < want[i]! + 190);
  await Promise.all([low, high].map(({ sql }) => sql.end({ timeout: 0 })));
  // A connect refused as the client ends fails its query with that error
  // (postgres.js's own socket does the same), any other with the end's.
  const outcomes = await Promise.all(queries);
  await Promise.all([low, high].map(({ closed }) => closed(2_000)));
  return {
    ok: near(lowWaits, [25, 50, 100, 200]) &&
      near(highWaits, [50, 100, 200, 400]) && draws >= 4 &&
      outcomes.every((code) =>
        code === "CONNECTION_DESTROYED" || code === "ECONNREFUSED"
      ),
    line: `${
      lowWaits.map((ms) => ms.toFixed(0)).join(", ")
    } ms at 0 (25, 50, 100, 200 asked), ${
      highWaits.map((ms) => ms.toFixed(0)).join(", ")
    } ms at the top (50, 100, 200, 400 asked), ${draws} draws; the end failed the queries waiting through the rounds (${
      outcomes.join(", ")
    })`,
  };
}
{
  // Run again once if it failed: a stalled machine's timer fires late.
  const first = await heldWaits();
  const waits = first.ok ? first : await heldWaits();
  check(
    waits.ok,
    `${runtime}: the waits between failed rounds follow the injected random: ${waits.line}${
      first.ok ? "" : ` (run again; the first run: ${first.line})`
    }`,
  );
}

// 4. sql.end() while a close is held, not awaiting closed(): the process
// exits at once.
{
  const { sql, made } = held;
  // Rounds held 50, 100, 200 and 400 ms, then the fifth 800 ms: its
  // close held once both its connects were refused.
  const started = performance.now();
  while (made.length < 10 && performance.now() - started < 5_000) {
    await sleep(10);
  }
  await sleep(100);
  const open = made.filter(({ closed }) => !closed);
  const reads = open.map(({ socket }) => socket.readyState);
  const ended = performance.now();
  await sql.end({ timeout: 0 });
  const code = await heldQuery;
  check(
    open.length === 1 && reads[0] === "open" &&
      code === "CONNECTION_DESTROYED",
    `${runtime}: a held close's socket read ${
      JSON.stringify(reads)
    } (${open.length} of ${made.length} open), and sql.end() failed the query waiting through the rounds (${code})`,
  );
  process.once("exit", () => {
    const ms = performance.now() - ended;
    const ok = ms < 400;
    check(
      ok,
      `${runtime}: the process exited ${
        ms.toFixed(0)
      } ms after sql.end() (not awaiting closed()), with ${
        made.filter(({ closed }) => !closed).length
      } socket open`,
    );
    process.exitCode = failed.length === 0 ? 0 : 1;
  });
}
