/**
 * The service: `deno serve main.ts` locally, and Deno Deploy's entry. It
 * reads its settings from the environment (see `webhook/config.ts`),
 * refuses to start on a bad one with a line that names it, opens its store
 * (PostgreSQL when `DATABASE_URL` is set, migrated at start; else Deno KV),
 * and serves the webhook. With `KV_QUEUE=1` it also consumes the local
 * Deno KV queue in the same process.
 *
 * `deno task start` listens on 127.0.0.1 only; in a container, serve with
 * `--host 0.0.0.0` (see docs/webhook.md). SIGTERM (or SIGINT) drains: the
 * local queue's new messages go back to the queue, a new connection is
 * refused (`deno serve` closes its listener at once) and a request that
 * still reaches the service gets a 503, both of which the queue retries,
 * deliveries in flight finish (for at most
 * {@linkcode DRAIN_MS}, or {@linkcode DEPLOY_DRAIN_MS} on Deno Deploy), then
 * the store closes and the process exits 0. A Deno KV file another program
 * holds in a write transaction through the drain is left open (closing it
 * would wait for that lock with no end): the process exits 1, in one line
 * that names the lock. A second signal exits at once, saying how many
 * deliveries it cut short.
 *
 * Of the modules the service runs, this file is the only one that touches
 * `Deno.*` (`tests/portable_test.ts` holds the rest to it): it opens the
 * Deno KV handle and gives it to `KvStore`.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import postgres from "postgres";
import {
  describePolicy,
  type Job,
  jobIdOf,
  parseJob,
  type Store,
} from "./mod.ts";
import { HttpSender } from "./relayer/http_sender.ts";
import {
  type AnsweredSocket,
  answeredSocket,
} from "./store/_postgres_socket.ts";
import { type KvAtomic, type KvKey, type KvLike, KvStore } from "./store/kv.ts";
import { whileLocked } from "./store/_group_commit.ts";
import { countKeptMs } from "./store/_rules.ts";
import { tlsRefusalOf } from "./store/_postgres_tls.ts";
import { messageOf, secretMasker } from "./policy/_walk.ts";
import { formatDuration } from "./policy/format_duration.ts";
import {
  clientTls,
  isTypeFetchLost,
  PostgresStore,
  reconnectBackoffS,
} from "./store/postgres.ts";
import { createApp, qstashPublisher, type WebhookApp } from "./webhook/app.ts";
import {
  type Config,
  ConfigError,
  loadConfig,
  offLoopbackRefusal,
  openRoutesOf,
  routeOptions,
  SESSION_ATTRS_NAMED,
} from "./webhook/config.ts";
import {
  type LocalEnqueue,
  localQueueConsumer,
  type LocalQueueMessage,
  quietly,
} from "./webhook/_local_queue.ts";
import {
  serviceSettings,
  unknownSettingLines,
  unreadSettingLines,
} from "./webhook/_settings.ts";
import { oncePer } from "./webhook/_step_back.ts";
import { jsonLine } from "./webhook/_json_answer.ts";
import { insecureDevMode, onLoopback, rotationState } from "./webhook/_auth.ts";
import {
  isFolder,
  readOnlyRefusal,
  refuseNoFile,
  refuseNotAStore,
  unwritableFolder,
} from "./webhook/_kv_file.ts";

/** What {@linkcode openService} can be given instead of the real thing (tests). */
export interface ServiceOptions {
  /**
   * The clock.
   *
   * @default {Date.now}
   */
  readonly now?: () => number;
  /**
   * The source of randomness for the jitter.
   *
   * @default {Math.random}
   */
  readonly random?: () => number;
  /** Google's keys for Pub/Sub (tests pass a local JWKS). */
  readonly jwks?: readonly JsonWebKey[];
  /**
   * Where log lines go.
   *
   * @default {console.log}
   */
  readonly log?: (line: string) => void;
  /**
   * How long the start waits for PostgreSQL to answer and be migrated, in
   * milliseconds, before it stops with a line naming `DATABASE_URL`.
   *
   * @default {20000}
   */
  readonly databaseWaitMs?: number;
  /**
   * How long PostgreSQL may leave the service without an answer, in
   * milliseconds: a store call fails after it (`connectionWaitMs`), and a
   * connection that wrote and heard nothing back for it is closed (a
   * network partition), so the pool connects again.
   *
   * @default {10000}
   */
  readonly databaseAnswerMs?: number;
}

/** What {@linkcode Service.fetch} reads of `Deno.ServeHandlerInfo`. */
export interface ServedInfo {
  /** Settles once the answer was sent, or could not be. */
  readonly completed?: Promise<void>;
}

/** A running service. */
export interface Service {
  /** The webhook. */
  readonly app: WebhookApp;
  /**
   * How many deliveries are running now (a request until its answer is
   * sent, a local-queue message until it is handled): what a stop that
   * exits at once cuts short.
   */
  readonly inFlight: number;
  /** The store it keeps its state in. */
  readonly store: Store;
  /** The Deno KV handle it opened; `null` on PostgreSQL (`DATABASE_URL`). */
  readonly kv: Deno.Kv | null;
  /** One line that says what runs, without secrets. */
  readonly description: string;
  /**
   * Answers a request through the webhook, counted as in flight until its
   * answer is sent (`info.completed`, from `deno serve` or `Deno.serve`;
   * without it, until the webhook returns); a 503 once draining.
   */
  fetch(request: Request, info?: ServedInfo): Promise<Response>;
  /**
   * Stops taking work (the local queue's new messages are put back, new
   * requests get a 503), waits for the deliveries in flight for at most
   * `timeoutMs`, then closes KV, or closes the PostgreSQL store and ends
   * its client (a call to the store after that fails at once). A `KV_PATH`
   * file is closed once Deno KV answers, within what is left of
   * `timeoutMs` (at least 500 ms); else it is left open, and
   * {@linkcode Service.lockedKvPath} names it.
   *
   * @returns How many deliveries were still running when it gave up waiting.
   */
  drain(timeoutMs?: number): Promise<number>;
  /** Stops the queue consumer and closes KV, or closes the PostgreSQL store and ends its client. */
  close(): Promise<void>;
  /**
   * The `KV_PATH` file a drain left open, `null` until then (and on any
   * other store): another program held a write transaction on it through
   * the drain, Deno KV's SQLite thread waits for that lock with no end
   * (its deletion of expired keys, due at least once a minute), and
   * `kv.close()` would wait for that thread, the whole process with it.
   * Nothing ends that wait but the lock's end: the process should exit.
   */
  readonly lockedKvPath: string | null;
}

/**
 * How long a drain waits for deliveries in flight: under the 10 s a
 * container platform usually allows between SIGTERM and SIGKILL. A delivery
 * cut short is a crash the relayer is built for (write-ahead, lease TTL).
 */
export const DRAIN_MS = 8_000;

/**
 * How long a drain waits, at least, for Deno KV's SQLite thread to answer
 * before it closes KV ({@linkcode probeKv}): what is left of the drain,
 * or this once the deliveries used it all. DRAIN_MS, this and
 * EXIT_GRACE_MS stay under 10 s.
 */
const KV_ANSWER_MS = 500;

/**
 * How long a stop, or a start that failed, waits for the database's sockets
 * to close once its client ended (within a drain's budget): a busy
 * connection's end returns before its socket closes.
 */
const SOCKETS_CLOSED_MS = 1_000;

/**
 * The drain on Deno Deploy (`DENO_DEPLOYMENT_ID` set), which kills an
 * instance 5 s after its `SIGINT`: the drain and the exit grace end before.
 */
export const DEPLOY_DRAIN_MS = 3_500;

/**
 * How long the process may outlive the last drain, for `deno serve` to
 * finish sending the answers the drain waited for; DRAIN_MS and this stay
 * under 10 s. Under `deno serve --parallel` the last drain is any isolate's:
 * the exit of one ends them all.
 */
const EXIT_GRACE_MS = 1_000;

/**
 * How soon after the first signal a second one is the same signal heard
 * twice, not an operator's second: a shell's `kill %N` or Ctrl-C signals
 * the job's whole process group, and `deno task start` passes what it
 * hears on to `deno serve`, a few milliseconds later.
 */
const ECHO_MS = 250;

/**
 * `text` with the KV Connect access token replaced, in each form
 * {@linkcode secretMasker} knows (JSON's escapes, %-escapes, base64), then
 * any other credential after `Bearer` ({@linkcode maskBearer}).
 */
function maskToken(text: string, token: string | undefined): string {
  return maskBearer(
    token ? secretMasker([[token, "<DENO_KV_ACCESS_TOKEN>"]])(text) : text,
  );
}

/**
 * A credential after `Bearer` and a space (or `%20`, `+`, `\u0020`), its
 * characters as a header carries them or as JSON or a URL escapes them.
 * `Bearer` follows no letter, but may follow a digit: the header written
 * whole in a URL (`Authorization%3A%20Bearer%20…`) or in JSON that escapes
 * every character but letters and digits (`:\u0020Bearer`).
 */
const BEARER_CREDENTIAL =
  /(?<![A-Za-z])(Bearer(?:\s|%20|\+|\\u0020)+)(?:[\w.~+/=-]|\\\/|%[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4})+/gi;

/**
 * `text` with any credential after `Bearer` replaced: KV Connect's data
 * path is called with the token the metadata exchange gave, a credential
 * to the database until the metadata expires, and Deno's error quotes the
 * data endpoint's refusal, which may echo it. Its value is Deno's alone,
 * so it is found by its scheme: an echo without `Bearer` before it is not,
 * nor one of fewer than 20 letters alone, which reads as a word.
 */
function maskBearer(text: string): string {
  return text.replace(
    BEARER_CREDENTIAL,
    (credential, scheme: string) =>
      // A word of prose (`a Bearer token.`) is left: letters alone, and
      // shorter than a token of letters alone would be.
      /^[A-Za-z]{1,19}[.=]?$/.test(credential.slice(scheme.length))
        ? credential
        : `${scheme}<KV Connect token>`,
  );
}

/**
 * A KV Connect handle whose errors never carry its access token. Deno
 * fetches the database's metadata again when it expires, and a refused
 * fetch quotes the endpoint's answer, which may echo the `Authorization`
 * header: that error reaches a delivery's answer and the log. A refused
 * read or write quotes the data endpoint's answer alike, which may echo
 * the token the metadata gave: masked after its `Bearer`.
 */
export function withoutToken(kv: Deno.Kv, token: string): KvLike {
  const mask = secretMasker([[token, "<DENO_KV_ACCESS_TOKEN>"]]);
  const clean = (error: unknown): unknown => {
    if (error instanceof Error) {
      const text = maskBearer(mask(error.message));
      if (text !== error.message) {
        error.message = text;
        error.stack = `${error.name}: ${text}`;
      }
    }
    return error;
  };
  const atomic = (inner: KvAtomic): KvAtomic => {
    const outer: KvAtomic = new Proxy(inner, {
      get(target, key) {
        const value = Reflect.get(target, key, target);
        if (typeof value !== "function") return value;
        if (key === "commit") {
          return () =>
            target.commit().catch((error) => {
              throw clean(error);
            });
        }
        // The builder's own methods return it: hand back this wrapper.
        return (...args: unknown[]) => {
          const result = value.apply(target, args);
          return result === target ? outer : result;
        };
      },
    });
    return outer;
  };
  return {
    getMany: (keys) =>
      kv.getMany(keys as Deno.KvKey[]).catch((error) => {
        throw clean(error);
      }),
    list: (selector, options) => {
      const entries = kv.list(selector, options);
      return {
        async *[Symbol.asyncIterator]() {
          try {
            yield* entries;
          } catch (error) {
            throw clean(error);
          }
        },
      };
    },
    atomic: () => atomic(kv.atomic() as unknown as KvAtomic),
  };
}

/**
 * Why a KV Connect database could not be opened, in one line of at most
 * 300 characters. Deno's error quotes the metadata endpoint's answer, which
 * may echo the Authorization header: the access token is replaced, and any
 * other credential after `Bearer` (the data path's token, in a refused
 * read's answer).
 *
 * @param error What `Deno.openKv(url)` threw.
 * @param token The access token to keep out (`DENO_KV_ACCESS_TOKEN`).
 * @returns The reason, on one line, without the token.
 *
 * @example A refusal that echoed the token
 * ```ts
 * import { remoteKvRefusal } from "./main.ts";
 * import assert from "node:assert/strict";
 *
 * const error = new Error("responded with 401:\n you sent Bearer tok_1");
 * assert.equal(
 *   remoteKvRefusal(error, "tok_1"),
 *   "responded with 401: you sent Bearer <DENO_KV_ACCESS_TOKEN>",
 * );
 * ```
 */
export function remoteKvRefusal(
  error: unknown,
  token: string | undefined = Deno.env.get("DENO_KV_ACCESS_TOKEN"),
): string {
  const message = messageOf(error);
  // Masked before white space is collapsed: a token may hold a run of it.
  const text = maskToken(message, token).replace(/\s+/g, " ");
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

/**
 * How long the start waits for a remote Deno KV database to open and answer
 * its first read.
 */
const REMOTE_KV_PROBE_MS = 10_000;

/**
 * The database `open` opens, once one read of it came back, both within
 * `REMOTE_KV_PROBE_MS`. Opening a KV Connect database does not read it
 * (Deno 2.5, the version Deno Deploy names, to 2.8 resolve the opening before
 * any request, then fetch its metadata only; 2.9 fetches it as it opens, and
 * waits 30 s for it), so a database
 * whose reads are refused, or never answered, would start the service and
 * fail every delivery. The database is closed when the read fails or does
 * not come back in time, and when it opens too late. A read that never came
 * back stays in flight (Deno retries it and `close()` does not end it;
 * nothing can cancel a `Deno.Kv` read): the start that refuses exits at
 * once.
 */
async function openRemote(open: () => Promise<Deno.Kv>): Promise<Deno.Kv> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let step = "from its metadata endpoint";
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `no answer ${step} within ${formatDuration(REMOTE_KV_PROBE_MS)}`,
          ),
        ),
      REMOTE_KV_PROBE_MS,
    );
  });
  const opening = open();
  let kv: Deno.Kv;
  try {
    kv = await Promise.race([opening, late]);
  } catch (error) {
    clearTimeout(timer);
    // One that opens after all is closed then.
    opening.then((opened) => opened.close(), () => {});
    throw error;
  }
  step = "to a read";
  const read = kv.get(["relayer", "start-probe"]);
  read.catch(() => {});
  try {
    await Promise.race([read, late]);
    return kv;
  } catch (error) {
    kv.close();
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * What Deno KV answered, within `ms`, a commit that writes nothing and
 * takes no lock (its check fails: no key has versionstamp 0): `null` if it
 * did not answer in time, else `{ error }`, the error it threw (a store it
 * opened read-only refuses the commit before it reads the check), or
 * `undefined`. Its SQLite thread answers at once while it is free, even
 * with the file locked; a thread that met another program's write lock
 * in a write of its own (its deletion of expired keys, due at least once a
 * minute) retries it with no end, until that lock ends, and answers
 * nothing: `kv.close()` would wait for it, and block the process.
 */
async function probeKv(
  kv: Deno.Kv,
  ms: number,
): Promise<{ readonly error: unknown } | null> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const probe = kv.atomic()
    .check({ key: ["relayer", "probe"], versionstamp: "0".repeat(20) })
    .commit()
    .then(() => ({ error: undefined }), (error: unknown) => ({ error }));
  try {
    return await Promise.race([
      probe,
      new Promise<null>((resolve) => {
        timer = setTimeout(() => resolve(null), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The line of a stop whose drain left `path` open ({@linkcode Service.lockedKvPath}),
 * with what it cut short.
 */
function lockedAtStop(path: string, left: number): string {
  return `KV_PATH: ${path} stayed locked by another handle through the drain: a program holds it in a write transaction (sqlite3, a backup tool), and closing KV would wait for it with no end. Exiting without closing it, as a kill would (the store is built for that)${
    left === 0 ? "" : `; ${cutShort(left)}`
  }; end that transaction before the next start.`;
}

async function openKv(config: Config): Promise<Deno.Kv> {
  if ("url" in config.kv) {
    const { url } = config.kv;
    try {
      return await openRemote(() => Deno.openKv(url));
    } catch (error) {
      throw new ConfigError(
        "KV_URL",
        `KV_URL: cannot open the KV Connect database (${
          remoteKvRefusal(error)
        }): check KV_URL and DENO_KV_ACCESS_TOKEN.`,
      );
    }
  }
  if ("platform" in config.kv) {
    // The database Deno Deploy attached (loadConfig checked there is one),
    // reached over KV Connect with the token Deploy set.
    try {
      return await openRemote(() => Deno.openKv());
    } catch (error) {
      throw new ConfigError(
        "DENO_KV_DEFAULT_PATH",
        `Deno Deploy KV: cannot open the Deno KV database attached to this app (${
          remoteKvRefusal(error)
        }): check in the Deno Deploy dashboard, Databases, that it is assigned to this app and Connected (Fix retries a failed one), then redeploy.`,
      );
    }
  }
  const { path } = config.kv;
  const dir = path.replace(/[^/]*$/, "");
  // The folder that holds the store, "." for a bare file name.
  const folder = dir === "" ? "." : dir;
  // A store in memory has no file, folder or disk to check.
  const onDisk = path !== ":memory:";
  try {
    if (onDisk) await refuseNoFile(path);
    if (onDisk && await isFolder(path)) {
      // Deno KV would fail on the files it writes beside it (-shm, -wal),
      // and the message below would ask for a wider --allow-write.
      throw new ConfigError(
        "KV_PATH",
        `KV_PATH: ${path} is a folder: Deno KV keeps its store in a file, so name one in it, such as KV_PATH=${
          path.replace(/\/+$/, "")
        }/relayer.kv.`,
      );
    }
    if (onDisk && dir !== "") await Deno.mkdir(dir, { recursive: true });
    if (onDisk) await refuseNotAStore(path, folder);
    // Deno KV's open does not wait for a lock (its switch of a new file's
    // journal to WAL meets the lock of another instance making the same
    // store at that moment): waited out here as a commit waits, for
    // LOCKED_AT_START_MS in all (an open of a file held exclusively, in a
    // rollback journal, itself waits 5 s before it fails).
    const opening = performance.now();
    const kv = await whileLocked(
      () => Deno.openKv(path),
      (error) =>
        lockedAtOpen(error) &&
        performance.now() - opening < LOCKED_AT_START_MS,
    );
    if (onDisk) await refuseReadOnly(kv, path);
    return kv;
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    // `deno task start` may write ./data only: say which setting and why.
    if (
      error instanceof Deno.errors.NotCapable ||
      error instanceof Deno.errors.PermissionDenied
    ) {
      const may = (name: "read" | "write") =>
        Deno.permissions.querySync({ name, path: folder }).state ===
          "granted";
      if (!may("read")) {
        throw new ConfigError(
          "KV_PATH",
          `KV_PATH: cannot open ${path}: this process may not read there. Serve with --allow-read (deno task start does), or --allow-read=${folder}.`,
        );
      }
      throw new ConfigError(
        "KV_PATH",
        `KV_PATH: cannot write ${path}: this process may not write there (deno task start may write ./data only). Put the store under ./data (KV_PATH=./data/relayer.kv), or serve with --allow-write=${folder} instead of --allow-write=./data.`,
      );
    }
    if (lockedAtOpen(error)) {
      throw new ConfigError(
        "KV_PATH",
        lockedRefusal(
          path,
          `${(error as Error).name}: ${(error as Error).message}`,
        ),
      );
    }
    // A folder this process cannot write (a volume mounted read-only):
    // SQLite says only "unable to open database file".
    const unwritable = await unwritableFolder(folder);
    if (unwritable !== undefined) {
      throw new ConfigError(
        "KV_PATH",
        readOnlyRefusal(
          path,
          `its folder cannot be written: ${unwritable}`,
          `the folder ${folder}`,
        ),
      );
    }
    const why = error instanceof Error
      ? `${error.name}: ${error.message}`
      : "unknown error";
    // The file may hold every payment's record (the write-aheads of the
    // sends): a refusal never sends the operator to a new file, where the
    // service would start afresh and could send a payment a second time.
    if (damagedAtOpen(error)) {
      throw new ConfigError(
        "KV_PATH",
        `KV_PATH: ${path} is damaged, or is not a SQLite file (${why}): keep it as it is (it may hold every payment's record). Check that KV_PATH names this service's store; if it does, restore the store from a backup (or recover its rows: sqlite3 ${path} .recover), then start again.`,
      );
    }
    // Anything else (a file where the folder should be, a table another
    // program changed): one line that names the setting.
    throw new ConfigError(
      "KV_PATH",
      `KV_PATH: cannot open ${path} as a Deno KV store (${why}): check that KV_PATH names this service's store, a file this process can open, and keep that file as it is (it may hold every payment's record).`,
    );
  }
}

/**
 * Whether Deno KV's open failed as its SQLite file was locked by another
 * handle (SQLITE_BUSY, an `Error` "database is locked" there).
 */
function lockedAtOpen(error: unknown): boolean {
  return error instanceof Error && /^database is locked\b/.test(error.message);
}

/**
 * Whether Deno KV's open failed as SQLite found the file damaged, or not a
 * SQLite file at all (SQLITE_CORRUPT, SQLITE_NOTADB).
 */
function damagedAtOpen(error: unknown): boolean {
  return error instanceof Error &&
    /^(?:database disk image is malformed|file is not a database)\b/.test(
      error.message,
    );
}

/**
 * How long a start waits out a lock another handle holds on the store:
 * about as long as a commit waits ({@linkcode whileLocked}).
 */
const LOCKED_AT_START_MS = 5_000;

/** The refusal of a `KV_PATH` another handle held locked past the start's wait. */
function lockedRefusal(path: string, why: string): string {
  return `KV_PATH: ${path} stayed locked by another handle for ${
    formatDuration(LOCKED_AT_START_MS)
  } (${why}): a program holds it in a transaction (sqlite3, a backup tool). End that transaction, then start again (keep KV_PATH: the store holds every payment's record).`;
}

/**
 * Refuses a store Deno KV opened read-only: it does so, with no word, when
 * it cannot write the file but can read it and the WAL beside it (a volume
 * mounted read-only after a crash left the WAL, files another user owns),
 * and every write after fails. The probe writes nothing: a check that
 * fails (no key has versionstamp 0) commits nothing, and Deno KV refuses
 * a read-only store's commit before it reads a check. Refuses too a store
 * whose probe waits past {@linkcode LOCKED_AT_START_MS}: another program
 * holds a write transaction open on it (Deno KV waits for such a lock
 * with no end, and so would `kv.close()`: the handle is left open, and
 * the start that refuses exits at once). Else `kv` is closed before the
 * refusal, and before any other error of the probe is thrown.
 */
async function refuseReadOnly(kv: Deno.Kv, path: string): Promise<void> {
  const probe = await probeKv(kv, LOCKED_AT_START_MS);
  if (probe === null) {
    // Not closed: a close waits for the probe, which waits for the lock.
    throw new ConfigError(
      "KV_PATH",
      lockedRefusal(path, "a write waited for it with no answer"),
    );
  }
  const { error } = probe;
  if (error === undefined) return;
  const message = messageOf(error);
  // Answered: Deno KV's thread is free, and the close does not wait.
  kv.close();
  if (!/\bread-?only\b/i.test(message)) throw error;
  throw new ConfigError(
    "KV_PATH",
    readOnlyRefusal(
      path,
      `Deno KV opened it read-only: "${message}"`,
      "the file, its -wal and -shm files and their folder",
    ),
  );
}

/**
 * Where the local queue keeps each job's line: the id of the message of
 * the job enqueued last, or `{ ended: <id> }` once that message's delivery
 * ended the job (`webhook/_local_queue.ts`, `LocalLine`).
 *
 * @example The line of a job
 * ```ts ignore
 * const { value } = await kv.get<string | { ended: string }>([...LINE_PREFIX, "pi_0001/settle"]);
 * ```
 */
export const LINE_PREFIX: readonly string[] = ["relayer_line"];

/** Where Deno KV keeps a local-queue message it gave up delivering. */
export const UNDELIVERED_PREFIX: readonly string[] = ["relayer_undelivered"];

/**
 * Deno KV's redeliveries of a local-queue message whose handler threw (it
 * could not put the message back: the same KV was failing): the most Deno
 * takes, five of at most an hour, about 2 h 11 min in all. Its default is
 * five within about 96 s, after which the message is dropped.
 */
export const KV_BACKOFF_SCHEDULE: readonly number[] = [
  1_000,
  60_000,
  600_000,
  3_600_000,
  3_600_000,
];

/** How often a running service puts undelivered messages back on the queue. */
const REQUEUE_EVERY_MS = 60_000;

/**
 * The options of every local-queue enqueue: the redelivery schedule, and
 * a key of its own where Deno KV keeps the message if that runs out, so it
 * is put back ({@linkcode requeueUndelivered}), never dropped.
 */
function undeliveredOptions(): {
  backoffSchedule: number[];
  keysIfUndelivered: KvKey[];
} {
  return {
    backoffSchedule: [...KV_BACKOFF_SCHEDULE],
    keysIfUndelivered: [[...UNDELIVERED_PREFIX, crypto.randomUUID()]],
  };
}

/**
 * Puts every message Deno KV gave up delivering back on the queue, each in
 * one commit with the removal of its key (checked, so two processes never
 * both put one back). Instances starting at once on one file race for the
 * same keys, and SQLite refuses a checked commit another handle's write
 * overtook as "database is locked", having written nothing: tried again,
 * as the store's commits are.
 *
 * @returns How many it put back.
 */
export async function requeueUndelivered(
  kv: Deno.Kv,
  log: (line: string) => void,
): Promise<number> {
  let requeued = 0;
  for await (const entry of kv.list({ prefix: [...UNDELIVERED_PREFIX] })) {
    const { ok } = await whileLocked(() =>
      kv.atomic().check(entry).delete(entry.key)
        .enqueue(entry.value, undeliveredOptions()).commit()
    );
    if (ok) requeued++;
  }
  if (requeued > 0) {
    log(
      `queue   put ${requeued} message(s) Deno KV had given up delivering back on the queue`,
    );
  }
  return requeued;
}

/**
 * How many times the start runs the migration, at most, while PostgreSQL
 * loses the connection under it, and the wait before the second try
 * (doubled before each next one: 1.75 s in all, inside the start's budget).
 */
const MIGRATE_TRIES = 4;
const MIGRATE_RETRY_MS = 250;

/**
 * Whether `error` is a connection PostgreSQL lost or ended under the
 * migration (a restart, a failover, `pg_terminate_backend`, a server
 * starting up or shutting down), which another try may not meet; not a
 * refusal every try would meet again (a closed port, a name, TLS, a
 * password, a grant).
 */
function lostAtStart(error: unknown): boolean {
  const { code, message } = (error ?? {}) as {
    code?: unknown;
    message?: unknown;
  };
  // A server that does not take TLS where the URL asks for it ends the
  // socket before the handshake, an ECONNRESET too: every try meets it
  // again, and the refusal says so (openHint), not "start again once the
  // database is up".
  if (typeof message === "string" && TLS_NOT_TAKEN.test(message)) return false;
  return typeof code === "string" &&
    /^(?:57P0[123]|ECONNRESET|EPIPE|CONNECTION_(?:CLOSED|ENDED|DESTROYED))$/
      .test(code);
}

/** What Deno says of a socket the server ended before the TLS handshake. */
const TLS_NOT_TAKEN = /before secure TLS connection/i;

/** Where the client's `target_session_attrs` came from, as a refusal names it. */
export interface SessionAttrsSource {
  /** `DATABASE_URL's target_session_attrs=…`, or the environment's. */
  readonly named: string;
  /** What more to do (`""`, or unset the environment's). */
  readonly fix: string;
}

/**
 * Where the client's `target_session_attrs` (`client`, as postgres.js
 * resolved it) came from: `DATABASE_URL`'s query (`fromUrl`), else the
 * environment's `PGTARGETSESSIONATTRS`, which postgres.js reads where the
 * URL sets none; `null` where it has none.
 */
function sessionAttrsSource(
  fromUrl: string | null,
  client: string | null,
): SessionAttrsSource | null {
  if (fromUrl) {
    return { named: `DATABASE_URL's target_session_attrs=${fromUrl}`, fix: "" };
  }
  if (!client) return null;
  return {
    named:
      `PGTARGETSESSIONATTRS=${client} (the environment's, which the client reads where DATABASE_URL sets no target_session_attrs)`,
    fix: ", or unset PGTARGETSESSIONATTRS",
  };
}

/**
 * Where the `target_session_attrs` of `sql`, a client made from the URL
 * `url`, came from: the URL's query, else the environment's
 * `PGTARGETSESSIONATTRS`, which postgres.js reads where the URL sets none;
 * `null` where the client has none. The service's start and
 * `deno task kv-to-postgres` name it where the client ended every
 * connection at its start ({@linkcode unfitSessionHint}).
 *
 * @param url The URL the client was made from (`DATABASE_URL`).
 * @param sql The client, as postgres.js resolved its options.
 * @returns Where its `target_session_attrs` came from, or `null`.
 *
 * @example Set in the URL
 * ```ts
 * import postgres from "postgres";
 * import { sessionAttrsOf } from "./main.ts";
 * import assert from "node:assert/strict";
 *
 * const url = "postgres://u:p@127.0.0.1:5432/db?target_session_attrs=primary";
 * const sql = postgres(url);
 * assert.equal(sessionAttrsOf(url, sql)?.named, "DATABASE_URL's target_session_attrs=primary");
 * await sql.end();
 * ```
 */
export function sessionAttrsOf(
  url: string,
  sql: postgres.Sql,
): SessionAttrsSource | null {
  return sessionAttrsSource(
    new URL(url).searchParams.get("target_session_attrs"),
    (sql.options as { target_session_attrs?: string | null })
      .target_session_attrs ?? null,
  );
}

/**
 * What to look at where the client ended each connection at its start
 * (postgres.js's `CONNECTION_DESTROYED`) as its `target_session_attrs`
 * (`attrs`) asks of a server that does not fit it, or `""` for another
 * error or a client with none: the service's start and
 * `deno task kv-to-postgres` add it to the line that names `DATABASE_URL`.
 *
 * @param error The error the client's first use failed with.
 * @param attrs Where the client's `target_session_attrs` came from
 * ({@linkcode sessionAttrsOf}).
 * @param tries How many tries each met it, said where more than one.
 * @returns The hint, in parentheses after a space, or `""`.
 *
 * @example A standby, for read-write
 * ```ts
 * import { unfitSessionHint } from "./main.ts";
 * import assert from "node:assert/strict";
 *
 * const attrs = { named: "DATABASE_URL's target_session_attrs=read-write", fix: "" };
 * const ended = Object.assign(new Error("write CONNECTION_DESTROYED db:5432"), { code: "CONNECTION_DESTROYED" });
 * assert.match(unfitSessionHint(ended, attrs), /^ \(the client ended each connection at its start, as DATABASE_URL's/);
 * assert.equal(unfitSessionHint(ended, null), "");
 * assert.equal(unfitSessionHint(new Error("other"), attrs), "");
 * ```
 */
export function unfitSessionHint(
  error: unknown,
  attrs: SessionAttrsSource | null,
  tries = 1,
): string {
  // postgres.js ends a connection itself, at its start, to a server that
  // does not fit the target_session_attrs, and tries the same host again.
  if (
    attrs === null ||
    (error as { code?: unknown } | null)?.code !== "CONNECTION_DESTROYED"
  ) return "";
  return ` (the client ended each connection at its start, ${
    tries > 1 ? `at each of ${tries} tries, ` : ""
  }as ${attrs.named} asks of a server that does not fit it: for primary or read-write, a hot standby (an old primary after a failover; SELECT pg_is_in_recovery()), or sessions read-only for the role or database (SHOW default_transaction_read_only); point DATABASE_URL at the primary, or turn that setting off${attrs.fix})`;
}

/**
 * `store.migrate()`, tried again (up to {@linkcode MIGRATE_TRIES} times in
 * all) when the connection is lost under it, saying so each time; the
 * migration is one transaction, so a lost try left nothing half done.
 * Stops trying once `gaveUp()` says the start has given up.
 */
async function migrateAtStart(
  store: PostgresStore,
  waitMs: number,
  log: (line: string) => void,
  gaveUp: () => boolean,
  hide: (text: string) => string,
  attrs: SessionAttrsSource | null = null,
): Promise<void> {
  for (let tries = 1;; tries++) {
    try {
      // The start's own bound (`databaseWaitMs`) ends the wait first, in
      // its words: the store's is set past it, a whole number no longer
      // than a timer takes (as migrate() asks).
      return await store.migrate({
        waitMs: Math.min(Math.ceil(waitMs) + 1_000, 2_147_483_647),
      });
    } catch (error) {
      if (!lostAtStart(error) || gaveUp()) throw error;
      const message = hide(messageOf(error));
      if (tries === MIGRATE_TRIES) {
        // Each try met a server that does not fit the client's
        // target_session_attrs, the database up: said so, not lost.
        const unfit = unfitSessionHint(error, attrs, MIGRATE_TRIES);
        throw new Error(
          unfit !== ""
            ? `${message}${unfit}`
            : `${message} (the connection was lost at each of ${MIGRATE_TRIES} tries: start again once the database is up)`,
          { cause: error },
        );
      }
      const waitMs = MIGRATE_RETRY_MS * 2 ** (tries - 1);
      log(
        `relayer: PostgreSQL lost the connection during the migration at start (${message}): tries again in ${
          waitMs / 1000
        }s (try ${tries + 1} of ${MIGRATE_TRIES})`,
      );
      await new Promise((resolve) => setTimeout(resolve, waitMs));
      if (gaveUp()) throw error;
    }
  }
}

/**
 * Opens PostgreSQL and migrates it, trying the migration again a few times
 * when the connection is lost under it. A database that cannot be reached
 * or migrated stops the start like a bad setting: one line naming
 * `DATABASE_URL`, without the URL (it holds the password).
 */
async function openPostgres(
  database: NonNullable<Config["database"]>,
  waitMs: number,
  answerMs: number,
  now: () => number,
  log: (line: string) => void,
): Promise<
  { store: PostgresStore; sql: postgres.Sql; socket: AnsweredSocket }
> {
  let sql: postgres.Sql | undefined;
  let store: PostgresStore | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let gaveUp = false;
  const socket = answeredSocket(answerMs, cutLines(now, log));
  try {
    // TLS as the URL says (and the start line tells), whatever PGSSL or
    // PGSSLNEGOTIATION say. postgres.js 3.4.9 reads `sslnegotiation`; its
    // types do not name it.
    const tls = {
      ssl: clientTls(database),
      sslnegotiation: database.sslnegotiation,
    } as Pick<postgres.Options<Record<string, never>>, "ssl">;
    // postgres() itself throws on a URL it cannot decode.
    sql = postgres(database.url, {
      // The name decoded, as the start line says it: postgres.js sends
      // the URL's path undecoded (`pay%40ments`, not `pay@ments`).
      ...(database.name ? { database: database.name } : {}),
      // An IPv6 address, which postgres.js cannot read in the URL, as
      // lists (its types name a string, which it would dial as localhost).
      ...(database.hosts as object | undefined),
      onnotice: () => {},
      backoff: reconnectBackoffS,
      // A partition drops packets: no close, no error, and postgres.js
      // would wait for the answers it sent for with no bound, its pool
      // stuck for good (docs/postgres.md, "A network partition").
      socket,
      ...tls,
    } as postgres.Options<Record<string, never>>);
    store = new PostgresStore(sql, { connectionWaitMs: answerMs });
    // Something that takes the connection and never answers as PostgreSQL
    // does (another service on the port, a black-holing proxy) would hold
    // the start for as long as postgres.js retries, with nothing said.
    const migrated = migrateAtStart(
      store,
      waitMs,
      log,
      () => gaveUp,
      (text) => text.replaceAll(database.url, "DATABASE_URL"),
      sessionAttrsOf(database.url, sql),
    );
    migrated.catch(() => {});
    await Promise.race([
      migrated,
      new Promise((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new Error(
                `no answer within ${waitMs}ms: is it a PostgreSQL server this process can reach, and is the migration not waiting on another's lock?`,
              ),
            ),
          waitMs,
        );
      }),
    ]);
    return { store, sql, socket };
  } catch (error) {
    gaveUp = true;
    // First, as a stop does: its probes of the pool after a connection
    // lost under the migration stop, with their timer.
    store?.close();
    await sql?.end({ timeout: 0 }).catch(() => {});
    // Its connections' own timers end with their sockets, which a busy
    // connection's end leaves open a moment longer.
    await socket.closed(SOCKETS_CLOSED_MS);
    // The runtime's words for a TLS refusal, which openHint reads: not the
    // store's, which names Node's setting too.
    const message = messageOf(tlsRefusalOf(error));
    throw new ConfigError(
      "DATABASE_URL",
      `DATABASE_URL: cannot open ${database.description}: ${message}${
        openHint(
          message,
          database.sslnegotiation === "direct",
          missingDenoCert(),
          sqlStateOf(error),
        )
      }`.replaceAll(database.url, "DATABASE_URL"),
    );
  } finally {
    clearTimeout(timer);
  }
}

/** How often a connection closed as the network to PostgreSQL looks cut is logged again. */
const CUT_LOG_INTERVAL_MS = 60_000;

/**
 * Logs the line of a connection closed as the network to PostgreSQL looks
 * cut: the first at once, then at most once a `CUT_LOG_INTERVAL_MS` with
 * how many went unsaid, so a partition of an hour, in which each new
 * connection is closed in turn, writes a few dozen lines, not thousands.
 */
function cutLines(
  now: () => number,
  log: (line: string) => void,
): (line: string) => void {
  let saidAt: number | undefined;
  let unsaid = 0;
  return (line) => {
    const at = now();
    if (
      saidAt !== undefined && at >= saidAt && at - saidAt < CUT_LOG_INTERVAL_MS
    ) {
      unsaid++;
      return;
    }
    log(
      `relayer: ${line}${
        unsaid === 0
          ? ""
          : ` (and ${unsaid} more connection(s) so closed since the last line)`
      }`,
    );
    saidAt = at;
    unsaid = 0;
  };
}

/**
 * The path `DENO_CERT` names where there is no file there, or `undefined`
 * (unset, a file there, or one this process may not look at). Deno trusts
 * no CA of a path it cannot open and says nothing of it, so a TLS refusal
 * would send the operator to set the DENO_CERT they had set.
 *
 * @example Unset, nothing to name
 * ```ts
 * import { missingDenoCert } from "./main.ts";
 * import assert from "node:assert/strict";
 *
 * if (Deno.env.get("DENO_CERT") === undefined) {
 *   assert.equal(missingDenoCert(), undefined);
 * }
 * ```
 */
export function missingDenoCert(): string | undefined {
  let path: string | undefined;
  try {
    path = Deno.env.get("DENO_CERT");
  } catch {
    return undefined; // no permission to read it
  }
  if (!path) return undefined;
  try {
    Deno.statSync(path);
    return undefined;
  } catch (error) {
    return error instanceof Deno.errors.NotFound ? path : undefined;
  }
}

/**
 * What to do about a database that could not be opened, where the error
 * says (`""` where it does not): the service's start and
 * `deno task kv-to-postgres` add it to the line that names `DATABASE_URL`.
 *
 * @param message The error's message.
 * @param direct Whether `DATABASE_URL` asks for direct TLS
 * (`?sslnegotiation=direct`).
 * @param missingCert The path `DENO_CERT` names where no file is there
 * ({@linkcode missingDenoCert}): Deno trusts no CA from it, and says
 * nothing of the file.
 * @param code The error's SQLSTATE, where the server gave one
 * ({@linkcode sqlStateOf}): read where the words are in another language
 * than English (a server whose `lc_messages` is German says
 * "Passwort-Authentifizierung für Benutzer »svc« fehlgeschlagen").
 * @returns The hint, in parentheses after a space, or `""`.
 *
 * @example Nothing listening
 * ```ts
 * import { openHint } from "./main.ts";
 * import assert from "node:assert/strict";
 *
 * assert.match(openHint("connect ECONNREFUSED 127.0.0.1:5432", false), /nothing listens at that host and port/);
 * assert.equal(openHint("something else", false), "");
 * assert.match(
 *   openHint("unable to verify the first certificate", false, "/etc/ssl/ca.pem"),
 *   /DENO_CERT names "\/etc\/ssl\/ca\.pem", where there is no file/,
 * );
 * ```
 */
export function openHint(
  message: string,
  direct: boolean,
  missingCert?: string,
  code?: string,
): string {
  if (/\bECONNREFUSED\b/.test(message)) {
    return " (nothing listens at that host and port: start the server, or correct the host and port in DATABASE_URL)";
  }
  if (
    (/permission denied/i.test(message) || code === "42501") &&
    !/schema's owner/.test(message)
  ) {
    return " (the role needs the grants docs/postgres.md lists, or a migration run once by the schema's owner)";
  }
  // 53300, the server's words: the role's or database's CONNECTION LIMIT,
  // or max_connections less the slots kept for superusers.
  if (
    /too many (clients|connections for (role|database))|remaining connection slots are reserved/
      .test(message) || code === "53300"
  ) {
    return " (the server has no connection slot left for this role: its CONNECTION LIMIT, the database's or the server's max_connections is reached; see pg_stat_activity for who holds them, end the idle ones or raise the limit, then try again)";
  }
  // 28P01: the server says the same of a wrong password and of one past
  // the role's VALID UNTIL (the reason goes to its log alone).
  if (
    /password authentication failed for user/.test(message) ||
    code === "28P01"
  ) {
    return " (the server refused this user and password: check them in DATABASE_URL, and that the role's password has not expired (SELECT rolvaliduntil FROM pg_roles; renew it with ALTER ROLE … VALID UNTIL), then try again)";
  }
  // 28000, before any authentication: the client sent no user, as
  // postgres.js does where DATABASE_URL names none, PGUSER is unset and it
  // cannot read the OS user (no --allow-sys: it falls back to USER).
  if (/no PostgreSQL user name specified/.test(message)) {
    return " (DATABASE_URL names no user, and the client found none to send in its place (PGUSER, else the login name in USER): name the role in DATABASE_URL, postgres://user:password@host:5432/dbname)";
  }
  // 28000 where the server takes the connection without a password (trust,
  // peer): a password-checked one says "password authentication failed".
  if (/\brole ".*" does not exist\b/.test(message)) {
    return " (no role of that name on this server: correct the user in DATABASE_URL, postgres://user:password@host:5432/dbname, or create the role (CREATE ROLE … LOGIN); a DATABASE_URL that names no user logs in as PGUSER, else as the login name in USER)";
  }
  // 3D000, at the connection's start.
  if (
    /^database ".*" does not exist$|: database ".*" does not exist$/.test(
      message,
    ) || code === "3D000"
  ) {
    return " (no database of that name on this server: correct the name in DATABASE_URL, or create it (CREATE DATABASE); one renamed or dropped since the service last ran is missing too)";
  }
  // postgres.js reads target_session_attrs (DATABASE_URL's, else the
  // environment's PGTARGETSESSIONATTRS) as the client is made, and takes
  // five of libpq's values: libpq's default, any, is none of them.
  const attrs = /\btarget_session_attrs (\S+) is not supported\b/.exec(message);
  if (attrs) {
    return ` (the PostgreSQL client takes target_session_attrs ${SESSION_ATTRS_NAMED} only; ${
      attrs[1] === "any"
        ? "any, libpq's default, is what it does without one: remove it"
        : "set one of those, or remove it"
    } from DATABASE_URL, or unset PGTARGETSESSIONATTRS, which the client reads where DATABASE_URL sets none)`;
  }
  // PgBouncer's refusal of a setting the URL's query sent at connect
  // (postgres.js sends each parameter it does not read as one); the server
  // itself takes them. A newer PgBouncer (Neon's, Supabase's) names the
  // setting inside ?options= instead, and some add advice after a '.'.
  const unsupported =
    /\bunsupported startup parameter( in options)?: ([\w.]*\w)/.exec(message);
  if (unsupported) {
    const [, inOptions, name] = unsupported;
    const sent = inOptions ? `-c ${name}=… in ?options=` : `?${name}=`;
    return ` (the pooler in front of PostgreSQL (PgBouncer) takes no ${sent} from DATABASE_URL at connect: remove it from DATABASE_URL and set what it sets on the role instead (ALTER ROLE … SET …), which each server session the pooler opens takes)`;
  }
  if (/certificate|self[- ]signed/i.test(message) && missingCert) {
    return ` (DENO_CERT names ${
      JSON.stringify(missingCert)
    }, where there is no file, so Deno trusts no CA from it: set DENO_CERT to the path of the CA's PEM file, and connect by a name the server's certificate holds)`;
  }
  if (/certificate|self[- ]signed/i.test(message)) {
    return " (the server's TLS certificate does not chain to a CA this process trusts, or names another host: give Deno the CA with DENO_CERT=<file>, and connect by a name the certificate holds)";
  }
  if (TLS_NOT_TAKEN.test(message)) {
    return direct
      ? " (the server did not take direct TLS, which needs PostgreSQL 17 or later: remove ?sslnegotiation=direct, or make it offer TLS)"
      : " (the server did not take TLS: make it offer TLS, or change ?sslmode= in DATABASE_URL)";
  }
  return "";
}

/**
 * The SQLSTATE of the server's error in `error` or its causes (three
 * deep), for {@linkcode openHint}; `undefined` where there is none (the
 * runtime's and postgres.js's own errors carry other codes).
 *
 * @example
 * ```ts
 * import { sqlStateOf } from "./main.ts";
 * import assert from "node:assert/strict";
 *
 * const refused = Object.assign(new Error("…"), { code: "28P01" });
 * assert.equal(sqlStateOf(new Error("Cannot …", { cause: refused })), "28P01");
 * assert.equal(sqlStateOf(Object.assign(new Error("…"), { code: "EPIPE" })), undefined);
 * ```
 */
export function sqlStateOf(error: unknown): string | undefined {
  let at = error;
  for (
    let depth = 0;
    depth < 4 && typeof at === "object" && at !== null;
    depth++
  ) {
    const code = (at as { code?: unknown }).code;
    if (
      typeof code === "string" && /^[0-9A-Z]{2}[0-9A-Z]{3}$/.test(code) &&
      /\d/.test(code)
    ) {
      return code;
    }
    at = (at as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * What insecure dev mode leaves open, said on the start-up line: every
 * route whose keys are not set accepts unsigned requests, even beside
 * routes that are signed, so an operator who left the flag on sees which.
 */
function insecureRoutes(config: Config): string {
  return insecureDevMode(openRoutesOf(config));
}

/**
 * Opens the store (PostgreSQL with `DATABASE_URL`, else KV), wires the
 * Sender and the webhook, and starts the local queue consumer when
 * configured.
 *
 * @param config Checked settings (`loadConfig`).
 * @param options Clock, randomness, keys and logger, for tests.
 * @returns The running service.
 */
export async function openService(
  config: Config,
  options: ServiceOptions = {},
): Promise<Service> {
  const {
    now = Date.now,
    random = Math.random,
    log = console.log,
    databaseWaitMs = 20_000,
    databaseAnswerMs = 10_000,
  } = options;
  const database = config.database
    ? await openPostgres(
      config.database,
      databaseWaitMs,
      databaseAnswerMs,
      now,
      log,
    )
    : null;
  const kv = database ? null : await openKv(config);
  // KV Connect's access token: KV_URL's, or the one Deno Deploy set for
  // the database it attached, which Deno sends to its metadata endpoint
  // again each time the metadata expires.
  const token = "path" in config.kv
    ? undefined
    : Deno.env.get("DENO_KV_ACCESS_TOKEN");
  const store: Store = database?.store ??
    new KvStore(
      token ? withoutToken(kv!, token) : kv!,
      // A redrive enqueues in the commit that removes the letter: with
      // the same schedule and keep-if-undelivered key as every enqueue.
      config.kvQueue ? { enqueueOptions: undeliveredOptions } : {},
    );
  const sender = new HttpSender({
    url: config.sender.url,
    timeoutMs: config.sender.timeoutMs,
  });
  // A job's line is kept past its message's delay, or past the delivery
  // that ended the job, as long as the store keeps the job's count: past
  // the longest wait a message of the job may have been enqueued with
  // (CAP, or a busy delivery's LEASE and CLOCK_SKEW twice). One gone
  // before such a message comes lets it be handled as a fresh job,
  // counted again from 1, and a dropped job's would send.
  const lineKept = countKeptMs(
    config.policy.capMs,
    config.leaseMs,
    config.clockSkewMs,
  );
  // loadConfig refuses KV_QUEUE with DATABASE_URL: here `kv` is open.
  const send: LocalEnqueue | undefined = config.kvQueue && kv
    ? async (message, delay) => {
      // An id of its own, kept through Deno KV's redeliveries of it.
      const id = crypto.randomUUID();
      let jobId: string | undefined;
      try {
        jobId = jobIdOf(parseJob(message.job));
      } catch {
        // Not a job (a malformed message put back): it has no line.
      }
      const atomic = kv.atomic();
      if (jobId !== undefined) {
        // The job's line, in the commit that enqueues: this message is
        // its newest, and the older ones are acked unhandled.
        atomic.set([...LINE_PREFIX, jobId], id, {
          expireIn: delay + lineKept,
        });
      }
      atomic.enqueue(
        { ...message, id, ...(jobId === undefined ? {} : { line: true }) },
        { delay, ...undeliveredOptions() },
      );
      const { ok } = await atomic.commit();
      if (!ok) throw new Error(`could not enqueue ${jobId ?? "a message"}`);
    }
    : undefined;
  const enqueue = send && ((job: Job) => send({ job }, 0));

  // The relayer's options; the app builds the one relayer of the process.
  const relayerOptions = {
    store,
    sender,
    policy: config.policy,
    now,
    random,
    leaseMs: config.leaseMs,
    clockSkewMs: config.clockSkewMs,
  };
  // Jobs published through QStash carry the retries the start-up check
  // accepted and the failure callback that resolves what QStash gives up on.
  const publisher = config.qstashPublish
    ? qstashPublisher({
      ...config.qstashPublish,
      retries: config.queues.qstash.retries,
    })
    : undefined;
  const app = createApp({
    ...relayerOptions,
    ...routeOptions(config, options.jwks ? { jwks: options.jwks } : {}),
    ...(publisher
      ? {
        enqueue: async (job: Job) => void await publisher.publish(job),
        redriveTo: {
          publish: async (job: Job, deduplicationId: string) =>
            void await publisher.publish(job, { deduplicationId }),
        },
      }
      : {}),
    ...(enqueue
      ? {
        enqueue: (job: Job) => enqueue(job),
        // A redrive enqueues in the commit that removes the dead letter.
        redriveTo: {
          message: (job: Job) =>
            ({ job, id: crypto.randomUUID() }) satisfies LocalQueueMessage,
        },
      }
      : {}),
    log,
  });

  let draining = false;
  let lockedKvPath: string | null = null;
  let requeueTimer: ReturnType<typeof setInterval> | undefined;
  const inFlight = new Set<Promise<unknown>>();
  function track<T>(work: Promise<T>): Promise<T> {
    inFlight.add(work);
    const done = () => inFlight.delete(work);
    work.then(done, done);
    return work;
  }

  if (send && kv) {
    const consume = localQueueConsumer({
      // The app's relayer: one count of sends in flight for both lanes,
      // so a job the queue sends is busy on the webhook, and the reverse.
      relayer: app.relayer,
      enqueue: send,
      line: async (jobId) => {
        const { value, versionstamp } = await kv.get<unknown>([
          ...LINE_PREFIX,
          jobId,
        ]);
        // The message's id, or `{ ended }`: the id of the message whose
        // delivery ended the job.
        const ended = typeof (value as { ended?: unknown } | null)?.ended ===
            "string"
          ? (value as { ended: string }).ended
          : undefined;
        return {
          id: ended ?? (typeof value === "string" ? value : null),
          ended: ended !== undefined,
          versionstamp,
        };
      },
      endLine: async (jobId, id, read) => {
        const key = [...LINE_PREFIX, jobId];
        // Checked: another handle on the file (a second instance, a
        // worker of deno serve --parallel) that wrote between its check
        // and its write has it refused as "database is locked", nothing
        // written: tried again, as the store's commits are.
        const { ok } = await whileLocked(() =>
          kv.atomic()
            .check({ key, versionstamp: read.versionstamp })
            .set(key, { ended: id }, { expireIn: lineKept })
            .commit()
        );
        return ok;
      },
      log,
    });
    kv.listenQueue(quietly((message: unknown) => {
      if (draining) {
        // Not ours to run any more: back on the queue for the next start
        // (or for this process, if it is still here in a second), as it
        // came: its id and its job's line unchanged.
        return kv.enqueue(message, { delay: 1000, ...undeliveredOptions() })
          .then(({ ok }) => {
            if (!ok) throw new Error("could not put a message back");
          });
      }
      return track(consume(message));
    }, log));
    // What Deno KV gave up delivering (the consumer could not even put a
    // message back, through its every redelivery) goes back on the queue:
    // now, for what an earlier process left, and every minute.
    // Not a delivery: a stop does not wait for it, and one it cuts short
    // loses nothing (each message is put back in one commit) and says
    // nothing.
    const requeue = () =>
      void requeueUndelivered(kv, log).catch((error) => {
        if (draining) return;
        log(
          `queue   could not look for undelivered messages: ${
            messageOf(error)
          }`,
        );
      });
    requeue();
    requeueTimer = setInterval(requeue, REQUEUE_EVERY_MS);
  }

  const routes = [
    config.qstash ? "qstash and its failure callback" : undefined,
    config.pubsub ? "pubsub" : undefined,
    config.pubsubDeadLetter ? "pubsub dead-letter" : undefined,
    // A rotation under way, or over and left half done, is said.
    config.webhookSecret
      ? rotationState(
        "deliveries",
        config.webhookSecret,
        config.webhookSecretNext,
      )
      : undefined,
    // Without a token the ops routes answer 503, unless dev mode opens them.
    config.opsToken
      ? rotationState("ops", config.opsToken, config.opsTokenNext)
      : config.insecureDev
      ? undefined
      : "ops closed (no OPS_TOKEN)",
    config.kvQueue ? "local KV queue" : undefined,
    config.insecureDev ? insecureRoutes(config) : undefined,
  ].filter(Boolean).join(", ");
  const where = config.database
    ? config.database.description
    : "path" in config.kv
    ? config.kv.path
    : "url" in config.kv
    ? "KV Connect"
    : "Deno Deploy KV";
  // Said, so that a QStash deployment without QSTASH_TOKEN shows it
  // before its first POST /v1/jobs is refused.
  const retries = config.queues.qstash?.retries;
  const jobs = config.qstashPublish
    ? `jobs to QStash${retries === undefined ? "" : ` (${retries} retries)`}`
    : config.kvQueue
    ? "jobs to the local KV queue"
    : config.database
    // KV_QUEUE=1 is refused with DATABASE_URL: not offered.
    ? "no queue for jobs (POST /v1/jobs and redrives answer 503: QSTASH_TOKEN gives them one; the local KV queue does not run with DATABASE_URL)"
    : config.onDeploy
    // KV_QUEUE=1 is refused on Deno Deploy, which runs no Deno KV queue
    // (and KV_PATH, a store of each isolate's own there).
    ? "no queue for jobs (POST /v1/jobs and redrives answer 503: QSTASH_TOKEN gives them one; Deno Deploy runs no local KV queue)"
    : "url" in config.kv
    // KV_QUEUE=1 is refused with KV_URL: KV Connect runs no queue.
    ? "no queue for jobs (POST /v1/jobs and redrives answer 503: QSTASH_TOKEN gives them one; a KV Connect database runs no local KV queue)"
    : "no queue for jobs (POST /v1/jobs and redrives answer 503: QSTASH_TOKEN, or KV_QUEUE=1 locally, gives them one)";
  return {
    app,
    store,
    kv,
    description: `${
      describePolicy(config.policy)
    }; store ${where}; ${jobs}; routes: ${routes}`,
    get inFlight() {
      return inFlight.size;
    },
    get lockedKvPath() {
      return lockedKvPath;
    },
    fetch(request, info) {
      if (draining) {
        return Promise.resolve(
          new Response(
            jsonLine({
              type: "urn:relayer:problem:shutting-down",
              title: "Shutting down",
              status: 503,
              detail:
                "The relayer is draining before it stops; the queue will redeliver.",
            }),
            {
              status: 503,
              headers: {
                "content-type": "application/problem+json",
                "retry-after": "5",
              },
            },
          ),
        );
      }
      const answered = Promise.resolve(app.fetch(request));
      if (info?.completed === undefined) return track(answered);
      // A drain that ends when the webhook returns would exit before the
      // answer leaves: wait until it was sent (or its client went away).
      track(answered.then(() => info.completed).catch(() => {}));
      return answered;
    },
    async drain(timeoutMs = DRAIN_MS) {
      draining = true;
      clearInterval(requeueTimer);
      const started = performance.now();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const waited = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      });
      await Promise.race([Promise.allSettled([...inFlight]), waited]);
      clearTimeout(timer);
      const left = inFlight.size;
      // A file another program may hold locked: closed only once Deno KV's
      // thread answers, within what is left of the drain (at least
      // KV_ANSWER_MS), else left open for the process's exit to end.
      const file = "path" in config.kv && config.kv.path !== ":memory:"
        ? config.kv.path
        : null;
      if (
        kv && file !== null &&
        await probeKv(
            kv,
            Math.max(KV_ANSWER_MS, timeoutMs - (performance.now() - started)),
          ) === null
      ) {
        lockedKvPath = file;
        return left;
      }
      kv?.close();
      // Within the same budget: the connections get what is left of it
      // (none once the deliveries ran out of time: their queries are cut,
      // as the deliveries are), so a stop never outlasts DRAIN_MS.
      const remainingS = Math.max(
        0,
        Math.floor((timeoutMs - (performance.now() - started)) / 1000),
      );
      // First: a write a delivery cut short starts after the end would
      // wait its whole connectionWaitMs for a connection that never comes.
      database?.store.close();
      await database?.sql.end({ timeout: left > 0 ? 0 : remainingS });
      await database?.socket.closed(
        Math.max(
          0,
          Math.min(
            SOCKETS_CLOSED_MS,
            timeoutMs - (performance.now() - started),
          ),
        ),
      );
      return left;
    },
    async close() {
      draining = true;
      clearInterval(requeueTimer);
      kv?.close();
      database?.store.close();
      await database?.sql.end({ timeout: 5 });
      await database?.socket.closed(SOCKETS_CLOSED_MS);
    },
  };
}

/** Where {@linkcode batchedLog} writes: `Deno.stdout` fits. */
export interface LogOutput {
  /** Writes some of `bytes`; returns how many. */
  writeSync(bytes: Uint8Array): number;
}

/** A log whose lines are written in batches. */
export interface BatchedLog {
  /** Adds one line; it is written with its batch. */
  readonly line: (line: string) => void;
  /** Writes every line added so far, now (before an exit). */
  flush(): void;
}

/** Options of {@linkcode batchedLog}. */
export interface BatchedLogOptions {
  /**
   * How long the first line of a batch waits for others, in milliseconds.
   *
   * @default {10}
   */
  readonly delayMs?: number;
  /**
   * A batch this long (in characters) is written at once.
   *
   * @default {65536}
   */
  readonly maxBatch?: number;
}

/**
 * A log that writes its lines in batches: one write for every line logged
 * within `delayMs` (or `maxBatch` characters), in order. `console.log`
 * makes one blocking write per line, a system call per delivery on the
 * request path: under load, the largest cost of the served relayer.
 *
 * @param out Where the lines go (`Deno.stdout`).
 * @param options The batch's delay and size.
 * @returns The log (`line`) and its `flush`.
 *
 * @example Lines in order, one write per batch
 * ```ts
 * import { batchedLog } from "./main.ts";
 * import assert from "node:assert/strict";
 *
 * const writes: string[] = [];
 * const log = batchedLog({
 *   writeSync: (bytes) => {
 *     writes.push(new TextDecoder().decode(bytes));
 *     return bytes.length;
 *   },
 * });
 * log.line("one");
 * log.line("two");
 * assert.deepEqual(writes, []);
 * log.flush();
 * assert.deepEqual(writes, ["one\ntwo\n"]);
 * ```
 */
export function batchedLog(
  out: LogOutput,
  options: BatchedLogOptions = {},
): BatchedLog {
  const { delayMs = 10, maxBatch = 65_536 } = options;
  const encoder = new TextEncoder();
  let pending: string[] = [];
  let size = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    if (pending.length === 0) return;
    let bytes = encoder.encode(pending.join(""));
    pending = [];
    size = 0;
    try {
      while (bytes.length > 0) bytes = bytes.subarray(out.writeSync(bytes));
    } catch {
      // A closed stdout: the lines have nowhere to go; the service goes on.
    }
  };
  return {
    line(line) {
      pending.push(`${line}\n`);
      size += line.length + 1;
      if (size >= maxBatch) flush();
      else timer ??= setTimeout(flush, delayMs);
    },
    flush,
  };
}

/** What a stop says of the `left` (one or more) deliveries it did not wait for. */
function cutShort(left: number): string {
  return `${left} ${left === 1 ? "delivery" : "deliveries"} still running ${
    left === 1 ? "was" : "were"
  } cut short (their leases expire and the queue redelivers)`;
}

let service: Service | undefined;
/** Where the start-up lines go once the service runs (`deno serve` only). */
let announce: ((line: string) => void) | undefined;
/** Writes the stdout lines batched so far: before a refusal on stderr. */
let flushLog: (() => void) | undefined;
/** Whether the runtime served the default export (its `onListen` ran). */
let listened = false;
/**
 * The settings read at start, judged again where the service listens (a
 * secret anyone can read, `RELAYER_INSECURE_DEV`: taken on loopback only).
 */
let started: Config | undefined;
/** The environment's `PORT` at start, which `main.ts` never reads. */
let portSetting: string | undefined;
/** `PUBLIC_URL` as set (checked), QStash's or not: who reaches the service. */
let publicUrlSetting: string | undefined;

/**
 * What went wrong when `deno serve` tried to listen, in one line, or
 * `undefined` for any other error (which keeps its stack: a bug). A
 * refused permission is the listen's only while nothing listens yet.
 */
function listenRefusal(reason: unknown): string | undefined {
  if (!listened && reason instanceof Deno.errors.NotCapable) {
    // deno serve lets its own --host and --port through --allow-net: a
    // --deny-net refuses them (or, under deno run, an --allow-net without).
    const address = /net access to "([^"]+)"/.exec(reason.message)?.[1];
    if (address !== undefined) {
      return `this process may not listen on ${address}: its permissions refuse the address (a --deny-net that names it, or under deno run an --allow-net that leaves it out). Serve without that --deny-net (deno serve lets its own --host and --port through), or under deno run add --allow-net=${address}.`;
    }
  }
  if (!listened && reason instanceof Deno.errors.PermissionDenied) {
    return `the system refuses to let this process listen on its port (${reason.message}): a port below 1024 needs root or CAP_NET_BIND_SERVICE. Serve on a port of 1024 or more (deno task start takes --port 8000) behind a proxy or a port mapping, or grant the deno binary CAP_NET_BIND_SERVICE (systemd's AmbientCapabilities=CAP_NET_BIND_SERVICE).`;
  }
  if (reason instanceof Deno.errors.AddrInUse) {
    return `the address to listen on is in use (${reason.message}): another process, perhaps a relayer still running, holds the port. Stop it, or serve on another port: deno serve --host 127.0.0.1 --port 8001 --allow-net --allow-env --allow-read --allow-write=./data main.ts (deno task start always takes 8000).`;
  }
  if (reason instanceof Deno.errors.AddrNotAvailable) {
    return `the address to listen on is not one of this machine's (${reason.message}): serve with --host 127.0.0.1, 0.0.0.0 or an address this machine has.`;
  }
  if (
    reason instanceof Error && /failed to lookup address/i.test(reason.message)
  ) {
    return `the host to listen on does not resolve (${reason.message}): give --host an IP address, or a name this machine resolves.`;
  }
  return undefined;
}

/**
 * `args` as a line may show them: each flag named up to its `=`, any other
 * argument only counted ("2 other arguments (not shown)"), joined with
 * commas and "and". A flag is a word of lowercase letters, digits and
 * dashes after `--` (`--port`, `--kv-path`), or one letter after `-`
 * (`-A`, `-p`): anything else that starts with a dash may be a secret, a
 * short flag with its value attached (psql's and mysql's `-p<password>`)
 * or a token (1 in 64 base64url tokens starts with `-`), and is counted.
 *
 * @example Flags named, values counted
 * ```ts
 * import { argumentsNamed } from "./main.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(
 *   argumentsNamed(["--port", "8001", "-pHunter2", "--token=hunter2"]),
 *   "--port, --token and 2 other arguments (not shown)",
 * );
 * ```
 */
export function argumentsNamed(args: readonly string[]): string {
  const flags = args.flatMap((arg) => {
    const name = /^(--[a-z][a-z0-9]*(?:-[a-z0-9]+)*|-[A-Za-z])(?:=|$)/
      .exec(arg)?.[1];
    return name !== undefined && name.length <= 40 ? [name] : [];
  });
  const others = args.length - flags.length;
  const named = [
    ...flags,
    ...(others > 0
      ? [`${others} other argument${others === 1 ? "" : "s"} (not shown)`]
      : []),
  ];
  return named.length === 1
    ? named[0]!
    : `${named.slice(0, -1).join(", ")} and ${named.at(-1)}`;
}

/**
 * The line that names the arguments `main.ts` was given, which it never
 * reads, or `undefined` for none: `deno task start --port 8001` passes
 * `--port 8001` to `main.ts`, not to `deno serve`, and the service served on
 * 8000 with nothing said. A flag is named up to its `=`; any other
 * argument (a value, which may be a secret) only counted
 * ({@linkcode argumentsNamed}).
 *
 * @example A port given to the task
 * ```ts
 * import { ignoredArgumentsLine } from "./main.ts";
 * import assert from "node:assert/strict";
 *
 * assert.match(
 *   ignoredArgumentsLine(["--port", "8001"])!,
 *   /^relayer: main\.ts reads no arguments, so --port and 1 other argument \(not shown\) are ignored: /,
 * );
 * assert.equal(ignoredArgumentsLine([]), undefined);
 * ```
 */
export function ignoredArgumentsLine(
  args: readonly string[],
): string | undefined {
  if (args.length === 0) return undefined;
  return `relayer: main.ts reads no arguments, so ${argumentsNamed(args)} ${
    args.length === 1 ? "is" : "are"
  } ignored: deno task start passes what follows it to main.ts, not to deno serve, and always serves on 127.0.0.1:8000. The settings are environment variables (docs/routes.md#deploy-to-deno-deploy-with-qstash); another port or host is deno serve's: deno serve --host 127.0.0.1 --port 8001 --allow-net --allow-env --allow-read --allow-write=./data main.ts`;
}

/**
 * The line that says the environment's `PORT` is not where the service
 * listens, or `undefined` where it is, or is unset: `deno task signer` and
 * `qstash-local` take `PORT`, and `PORT=8001 deno task start` served on
 * 8000 with nothing said. Its value is shown only as a port number.
 *
 * @param port The environment's `PORT`.
 * @param listening The port the service listens on.
 * @returns The line, or `undefined`.
 *
 * @example A port main.ts never reads
 * ```ts
 * import { ignoredPortLine } from "./main.ts";
 * import assert from "node:assert/strict";
 *
 * assert.match(
 *   ignoredPortLine("8001", 8000)!,
 *   /^relayer: PORT is 8001, but main\.ts does not read it: it listens where deno serve's --port says, 8000 here /,
 * );
 * assert.equal(ignoredPortLine("8000", 8000), undefined);
 * assert.equal(ignoredPortLine(undefined, 8000), undefined);
 * ```
 */
export function ignoredPortLine(
  port: string | undefined,
  listening: number,
): string | undefined {
  if (port === undefined || port === "") return undefined;
  const shown = /^\d{1,5}$/.test(port) ? port : undefined;
  // As a port number: a PORT of 08000 names the 8000 it listens on.
  if (shown !== undefined && Number(shown) === listening) return undefined;
  return `relayer: PORT is ${
    shown ?? "set"
  }, but main.ts does not read it: it listens where deno serve's --port says, ${listening} here (deno task start always serves on 127.0.0.1:8000); another port is deno serve's: deno serve --host 127.0.0.1 --port ${
    shown ?? "8001"
  } --allow-net --allow-env --allow-read --allow-write=./data main.ts`;
}

/**
 * The line that says `PUBLIC_URL` names this machine at another port than
 * the one the service listens on, or as https at that port, or `undefined`:
 * QStash delivers to `PUBLIC_URL/v1/qstash`, and `deno task qstash-local`
 * prints `PUBLIC_URL=http://127.0.0.1:8000`, so a service served on another
 * port had every job it published go unanswered, with nothing said here;
 * and the service serves plain HTTP (`deno serve` takes no TLS key), so an
 * https `PUBLIC_URL` at its own port fails every delivery's TLS handshake.
 * A `PUBLIC_URL` off this machine (behind a proxy, a tunnel) is not judged.
 *
 * @param publicUrl The service's `PUBLIC_URL`, as checked.
 * @param listening The port the service listens on.
 * @returns The line, or `undefined`.
 *
 * @example A local QStash's PUBLIC_URL, the service on 8001
 * ```ts
 * import { publicUrlPortLine } from "./main.ts";
 * import assert from "node:assert/strict";
 *
 * assert.match(
 *   publicUrlPortLine("http://127.0.0.1:8000", 8001)!,
 *   /otherwise set PUBLIC_URL=http:\/\/127\.0\.0\.1:8001$/,
 * );
 * assert.equal(publicUrlPortLine("http://127.0.0.1:8001", 8001), undefined);
 * assert.match(
 *   publicUrlPortLine("https://127.0.0.1:8001", 8001)!,
 *   /serves plain HTTP there .*; set PUBLIC_URL=http:\/\/127\.0\.0\.1:8001$/,
 * );
 * assert.equal(publicUrlPortLine("https://relayer.example.com", 8001), undefined);
 * ```
 */
export function publicUrlPortLine(
  publicUrl: string | undefined,
  listening: number,
): string | undefined {
  if (publicUrl === undefined || !onLoopback(publicUrl)) return undefined;
  const url = new URL(publicUrl);
  // The scheme's own port where the URL names none.
  const port = url.port !== ""
    ? Number(url.port)
    : url.protocol === "https:"
    ? 443
    : 80;
  const path = url.pathname === "/" ? "" : url.pathname;
  // The service itself serves plain HTTP (deno serve): an https
  // PUBLIC_URL on this machine is a TLS proxy's, and the one that reaches
  // the service without it is http.
  const fixed = new URL(url);
  fixed.protocol = "http:";
  fixed.port = String(listening);
  if (port === listening) {
    // No proxy can hold the port the service holds: QStash's call meets
    // the service itself, which answers its TLS handshake with plain HTTP.
    return url.protocol === "https:"
      ? `relayer: PUBLIC_URL is ${url.origin}${path}, on this machine at the port the service listens on, but the service serves plain HTTP there (deno serve serves no TLS): QStash's deliveries to PUBLIC_URL/v1/qstash fail their TLS handshake; set PUBLIC_URL=${fixed.origin}${path}`
      : undefined;
  }
  return `relayer: PUBLIC_URL is ${url.origin}${path}, on this machine, but the service listens on port ${listening}: QStash delivers to PUBLIC_URL/v1/qstash, which reaches this service only through something on port ${port} that forwards to it; otherwise set PUBLIC_URL=${fixed.origin}${path}`;
}

/**
 * The line that says `KV_PATH=:memory:` keeps the state of a service
 * others reach in this process alone, or `undefined`: reached at a
 * `PUBLIC_URL` off this machine, or listening off loopback (Deno Deploy
 * refuses `KV_PATH` at start), a restart or a crash forgets every intent,
 * dead letter, write-ahead record and replay record, and nothing said so.
 * A store in memory on loopback (a local run, the Deploy rehearsal of
 * docs/routes.md) is not judged.
 *
 * @param kvPath The service's `KV_PATH`, as checked (`undefined` on
 * another store).
 * @param publicUrl The service's `PUBLIC_URL`, as checked.
 * @param listensOn Where the service listens (`http://0.0.0.0:8000/`).
 * @returns The line, or `undefined`.
 *
 * @example A store in memory behind a public URL
 * ```ts
 * import { memoryStoreLine } from "./main.ts";
 * import assert from "node:assert/strict";
 *
 * assert.match(
 *   memoryStoreLine(":memory:", "https://relayer.example.com", "http://127.0.0.1:8000/")!,
 *   /^relayer: KV_PATH is :memory:, and this service is reached at PUBLIC_URL https:\/\/relayer\.example\.com, off this machine: /,
 * );
 * assert.equal(memoryStoreLine(":memory:", undefined, "http://127.0.0.1:8000/"), undefined);
 * assert.equal(memoryStoreLine("./data/relayer.kv", "https://relayer.example.com", "http://0.0.0.0:8000/"), undefined);
 * ```
 */
export function memoryStoreLine(
  kvPath: string | undefined,
  publicUrl: string | undefined,
  listensOn: string,
): string | undefined {
  if (kvPath !== ":memory:") return undefined;
  const reached = !onLoopback(listensOn)
    ? `listens on ${listensOn}, off this machine`
    : publicUrl !== undefined && URL.canParse(publicUrl) &&
        !onLoopback(publicUrl)
    ? `reached at PUBLIC_URL ${new URL(publicUrl).origin}, off this machine`
    : undefined;
  if (reached === undefined) return undefined;
  return `relayer: KV_PATH is :memory:, and this service ${
    reached.startsWith("listens") ? reached : `is ${reached}`
  }: its intents, dead letters, write-ahead and replay records live in this process alone, and a restart or a crash forgets them all (a job redelivered then finds no intent, a payment already sent no record). Give a service others reach a store that outlives it: a file (KV_PATH=./data/relayer.kv, the default), KV_URL or DATABASE_URL`;
}

/** How often, at most, the log says that a write met the file size limit. */
const FILE_SIZE_LOG_INTERVAL_MS = 60_000;

if (import.meta.main) {
  // One writer for every stdout line, so they stay in order; what is
  // still batched is written on the way out.
  const stdout = batchedLog(Deno.stdout);
  flushLog = stdout.flush;
  globalThis.addEventListener("unload", () => stdout.flush());
  let config: Config;
  let drainMs = DRAIN_MS;
  let unknown: string[] = [];
  try {
    const env = Deno.env.toObject();
    // Named before the settings are checked: a misspelt one may be why
    // they are refused (WEBHOOK_SECRETS: "No delivery route is configured").
    unknown = [
      ...unknownSettingLines(Object.keys(env)),
      ...unreadSettingLines(env),
    ];
    const ignored = ignoredArgumentsLine(Deno.args);
    if (ignored !== undefined) unknown.push(ignored);
    // A Cloudflare Worker's settings, which this service never reads, are
    // named above (with a Worker's refusal) but do not refuse its start.
    config = loadConfig(serviceSettings(env));
    started = config;
    portSetting = env.PORT;
    publicUrlSetting = env.PUBLIC_URL || undefined;
    // Deno Deploy stops an instance 5 s after SIGINT, under any drain.
    if (config.onDeploy) drainMs = DEPLOY_DRAIN_MS;
  } catch (error) {
    if (
      error instanceof Deno.errors.NotCapable ||
      error instanceof Deno.errors.PermissionDenied
    ) {
      console.error(
        "relayer: cannot start: it may not read its environment, where every setting is: serve with --allow-env (deno task start does)",
      );
      Deno.exit(1);
    }
    if (!(error instanceof ConfigError)) throw error;
    console.error(`relayer: cannot start: ${error.message}`);
    for (const line of unknown) console.error(line);
    Deno.exit(1);
  }
  // postgres.js drops the promise of its type query on a new connection
  // (porsager/postgres#1192): a server that ends that connection (a
  // failover, pg_terminate_backend), or a statement_timeout that cancels
  // the query, would end this process. The connection opens again for the
  // query that asked for it, or, the query cancelled, goes on without it.
  globalThis.addEventListener("unhandledrejection", (event) => {
    if (!isTypeFetchLost(event.reason)) return;
    event.preventDefault();
    const { code } = event.reason as { code?: unknown };
    stdout.line(
      code === "57014"
        ? "relayer: PostgreSQL cancelled postgres.js's type query on a new connection (57014: a statement_timeout shorter than it, or pg_cancel_backend): the connection goes on without it"
        : code === "0A000"
        ? "relayer: PostgreSQL refused postgres.js's type query on a new connection (0A000: a hot standby, whose database or role defaults to SERIALIZABLE): the connection goes on without it, and the store's calls on it say the server is a standby"
        : `relayer: PostgreSQL ended a new connection while postgres.js read its types (${
          String(code)
        }): it connects again`,
    );
  });
  try {
    service = await openService(config, { log: stdout.line });
  } catch (error) {
    // One line, never a stack: a message here may name a setting's value.
    console.error(
      `relayer: cannot start: ${
        error instanceof ConfigError
          ? error.message
          : error instanceof Error
          ? `${error.name}: ${error.message}`
          : "unknown error"
      }`,
    );
    Deno.exit(1);
  }
  /** Set when the start is refused after this point, which says why. */
  let refused = false;
  // `deno serve` listens after this module ran; a port already taken
  // rejects there, out of reach of a try. One line, not a stack.
  globalThis.addEventListener("unhandledrejection", (event) => {
    const why = listenRefusal(event.reason);
    if (why === undefined) return;
    event.preventDefault();
    refused = true;
    stdout.flush();
    console.error(`relayer: cannot start: ${why}`);
    Deno.exit(1);
  });
  stdout.line(`relayer: ${service.description}`);
  for (const line of unknown) stdout.line(line);
  announce = stdout.line;
  const running = service;
  let stopping = false;
  let stoppedAt = 0;
  const stop = async (signal: Deno.Signal) => {
    if (stopping && performance.now() - stoppedAt < ECHO_MS) return;
    if (stopping) {
      // What the exit cuts short is said, as a drain that ran out says it.
      const left = running.inFlight;
      console.error(
        `relayer: ${signal} again: exiting now; ${
          left === 0 ? "no delivery was running" : cutShort(left)
        }`,
      );
      stdout.flush();
      Deno.exit(1);
    }
    stopping = true;
    stoppedAt = performance.now();
    stdout.line(
      `relayer: ${signal}: draining (at most ${formatDuration(drainMs)})`,
    );
    const left = await running.drain(drainMs);
    if (running.lockedKvPath !== null) {
      // Nothing ends Deno KV's wait for that lock: this exit does, at
      // once (the deliveries still running wait on the lock too).
      stdout.flush();
      console.error(`relayer: ${lockedAtStop(running.lockedKvPath, left)}`);
      Deno.exit(1);
    }
    const closed = running.kv ? "KV closed" : "PostgreSQL connections closed";
    stdout.line(
      left === 0
        ? `relayer: drained; ${closed}`
        : `relayer: ${cutShort(left)}; ${closed}`,
    );
    stdout.flush();
    // `deno serve` heard the signal too: it closed the listener and sends
    // the answers still in flight. Exiting here would cut them off, so the
    // process ends once nothing is left to do, or after EXIT_GRACE_MS.
    // Under `deno serve --parallel` every isolate heard the signal at once
    // and drains its own deliveries, and `Deno.exit` ends them all: one
    // that drained first, held by a client's open connection, exits no
    // sooner than the last drain may end (`drainMs`, then Deno KV's
    // answer) and that one's EXIT_GRACE_MS.
    for (const [name, listener] of listeners) {
      Deno.removeSignalListener(name, listener);
    }
    const lastDrainEnds = stoppedAt + drainMs + KV_ANSWER_MS;
    Deno.unrefTimer(
      setTimeout(
        () => Deno.exit(0),
        Math.max(lastDrainEnds - performance.now(), 0) + EXIT_GRACE_MS,
      ),
    );
  };
  // `deno run` does not serve the default export (`deno serve` does, and
  // `deno run` with DENO_AUTO_SERVE set): the process would end here with
  // exit code 0, its start line said and nothing served.
  globalThis.addEventListener("unload", () => {
    if (listened || stopping || refused) return;
    stdout.flush();
    console.error(
      "relayer: cannot serve: nothing served main.ts's default export (deno run does not): serve it with deno serve (deno task start does), or with DENO_AUTO_SERVE=1 deno run.",
    );
    Deno.exitCode = 1;
  });
  const listeners: [Deno.Signal, () => void][] = [];
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    const listener = () => void stop(signal);
    try {
      Deno.addSignalListener(signal, listener);
      listeners.push([signal, listener]);
    } catch {
      // not every platform has every signal
    }
  }
  // A write past the process's file size limit raises SIGXFSZ, whose
  // default action ends the process with no word, at every start again
  // once the KV file is at the limit. Heard, the write fails instead (the
  // store refuses it, the queue is answered 503), and the log says why.
  const fileSizeDue = oncePer(
    FILE_SIZE_LOG_INTERVAL_MS,
    () => performance.now(),
  );
  const fileSize = () => {
    if (!fileSizeDue()) return;
    stdout.line(
      "relayer: a write passed this process's file size limit (SIGXFSZ): the Deno KV file cannot grow past it, so writes that need more room fail (deliveries are answered 503, /readyz not ready). Raise or remove the limit (ulimit -f, systemd's LimitFSIZE), then restart the service.",
    );
  };
  try {
    Deno.addSignalListener("SIGXFSZ", fileSize);
    listeners.push(["SIGXFSZ", fileSize]);
  } catch {
    // not every platform has every signal
  }
}

/** The entry of `deno serve main.ts` and Deno Deploy. */
export default {
  /** Says where it listens, in place of `deno serve`'s own line. */
  onListen(address: Deno.Addr): void {
    listened = true;
    const where = address.transport === "tcp" || address.transport === "udp"
      ? `http://${
        address.hostname.includes(":")
          ? `[${address.hostname}]`
          : address.hostname
      }:${address.port}/`
      : address.transport === "unix" || address.transport === "unixpacket"
      ? address.path
      : address.transport;
    // Listening where others reach it (--host 0.0.0.0), with no PUBLIC_URL
    // to say so: whoever read the docs signs its deliveries, or, in insecure
    // dev mode, sends unsigned ones and, without OPS_TOKEN, calls the ops
    // routes.
    const refusal = address.transport === "tcp" && started !== undefined
      ? offLoopbackRefusal(started, where)
      : undefined;
    if (refusal !== undefined) {
      // The start line first, so the refusal is the last word in one log.
      flushLog?.();
      console.error(`relayer: cannot start: ${refusal}`);
      Deno.exit(1);
    }
    if (announce === undefined) return;
    announce(`relayer: listening on ${where}`);
    const port = address.transport === "tcp" && !started?.onDeploy
      ? ignoredPortLine(portSetting, address.port)
      : undefined;
    if (port !== undefined) announce(port);
    const publicUrl = address.transport === "tcp" && !started?.onDeploy
      ? publicUrlPortLine(
        started?.qstashPublish?.publicUrl ??
          started?.qstash?.url.replace(/\/v1\/qstash$/, ""),
        address.port,
      )
      : undefined;
    if (publicUrl !== undefined) announce(publicUrl);
    const memory = address.transport === "tcp" && started !== undefined &&
        "path" in started.kv
      ? memoryStoreLine(started.kv.path, publicUrlSetting, where)
      : undefined;
    if (memory !== undefined) announce(memory);
  },
  fetch(
    request: Request,
    info: Deno.ServeHandlerInfo,
  ): Response | Promise<Response> {
    return service
      ? service.fetch(request, info)
      : new Response(jsonLine({ title: "Not started", status: 503 }), {
        status: 503,
        headers: { "content-type": "application/problem+json" },
      });
  },
} satisfies Deno.ServeDefaultExport;
