/**
 * The checks a Deno KV file passes before `Deno.openKv` opens it, shared
 * by the service's start (`main.ts`) and the move to PostgreSQL
 * (`tools/kv_to_postgres.ts`): `Deno.openKv` opens whatever is at a path,
 * makes a new store where there is none (at the end of a link to a
 * missing file too), adds its tables to another program's SQLite
 * database, reads a store a newer Deno KV laid out, and reads a file cut
 * to 0 bytes as a new store, dropping the `-wal` that holds its records.
 * Each refusal is a {@linkcode ConfigError} naming `KV_PATH`, in one line
 * that says what to do.
 *
 * @module
 */

import { ConfigError } from "./config.ts";

/**
 * Runs the checks of a store's file that its folder must exist for
 * (made first by the start; the move's file is there): a full disk
 * ({@linkcode refuseFullDisk}), another program's database or a store
 * of a newer Deno KV ({@linkcode refuseNotThisStore}), a file cut short
 * beside its `-wal` ({@linkcode refuseCutShort}).
 *
 * @param path The store's file (`KV_PATH`).
 * @param folder The folder that holds it, `.` for a bare file name.
 *
 * @example
 * ```ts ignore
 * await refuseNotAStore("./data/relayer.kv", "./data/");
 * const kv = await Deno.openKv("./data/relayer.kv");
 * ```
 */
export async function refuseNotAStore(
  path: string,
  folder: string,
): Promise<void> {
  await refuseFullDisk(path, folder);
  await refuseNotThisStore(path, folder);
  await refuseCutShort(path);
}

/**
 * Refuses a store file cut to 0 bytes, or missing, with a `-wal` file that
 * holds something beside it: Deno KV writes a new store's first page at
 * once, and SQLite removes a `-wal` once its last handle closes, so the
 * file was cut short (or moved or removed alone), and the records since
 * its last checkpoint (all of them, before the first) are in the `-wal`,
 * which SQLite would drop, reading the empty file as a new database. Another instance making a new
 * store at once is not one: read in that order, the file has its first
 * page by the time its -wal holds anything.
 *
 * @example
 * ```ts ignore
 * await refuseCutShort("./data/relayer.kv");
 * ```
 */
export async function refuseCutShort(path: string): Promise<void> {
  // The -wal first: an instance making a new store at this moment writes
  // the file's first page before it makes its -wal, so a -wal that holds
  // something beside a file still empty after it is no new store's.
  const wal = await sizeOf(`${path}-wal`);
  if (!wal) return;
  const size = await sizeOf(path);
  if (size === undefined && !await isMissing(path)) return;
  if (size === undefined) {
    // SQLite reads no file as an empty one, and drops its -wal the same.
    throw new ConfigError(
      "KV_PATH",
      `KV_PATH: ${path} is missing and its -wal file holds ${wal} bytes: the file was moved or removed without it, and its records may be in the -wal. Keep the -wal as it is (it may hold every payment's record), put the file back beside it or restore the store from a backup, then start again.`,
    );
  }
  if (size !== 0) return;
  throw new ConfigError(
    "KV_PATH",
    `KV_PATH: ${path} is empty (0 bytes) and its -wal file holds ${wal} bytes: the file was cut short, and its records may be in the -wal. Keep both files as they are (they may hold every payment's record), restore the store from a backup, then start again.`,
  );
}

/** Whether nothing is at `path` (not even a link). */
async function isMissing(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return false;
  } catch (error) {
    if (error instanceof Deno.errors.NotCapable) throw error;
    return error instanceof Deno.errors.NotFound;
  }
}

/**
 * The size of the file at `path`, or `undefined` where there is none (or
 * something else: a folder, a FIFO). Deno's refusal to read there is
 * thrown, for the start's permission refusal to name it.
 */
async function sizeOf(path: string): Promise<number | undefined> {
  try {
    const info = await Deno.stat(path);
    return info.isFile ? info.size : undefined;
  } catch (error) {
    if (error instanceof Deno.errors.NotCapable) throw error;
    return undefined;
  }
}

/** The tables Deno KV keeps its store in: a file with one is a store. */
const DENO_KV_TABLES = ["kv", "migration_state"];

/**
 * Looks at a store's file through SQLite itself, before Deno KV opens it,
 * with one handle of `node:sqlite` (the SQLite Deno KV runs on, which
 * keeps the locks of every handle of this process on the file when one
 * closes) that does not wait for a lock. Refuses:
 *
 * - a store whose `-wal` or `-shm` file this process can read but not
 *   write (files another user owns: a restore, or a `sqlite3` session, run
 *   as another user; a volume mounted read-only). Deno KV opened such a
 *   store read-write and then panicked, with no line of ours, at its first
 *   deletion of expired keys ("KV collect expired failed: attempt to write
 *   a readonly database"). Asked with a write transaction begun and rolled
 *   back, which writes nothing.
 * - another program's SQLite database (it has tables, none of Deno KV's):
 *   a path mistyped, a volume mounted in the wrong place. Deno KV would add
 *   its tables to it, and the service would start as on a new store, with
 *   none of its payments' records.
 * - a store made by a newer Deno KV ({@linkcode refuseNewerSchema}).
 *
 * The handle is read-write, so its close removes the `-wal` and `-shm`
 * files its read made (a read-only handle leaves them beside the file). A
 * lock another handle holds, a file it cannot read as SQLite, and any
 * other failure are left to Deno KV's open, which says why.
 *
 * @example
 * ```ts ignore
 * await refuseNotThisStore("./data/relayer.kv", "./data/");
 * ```
 */
export async function refuseNotThisStore(
  path: string,
  folder: string,
): Promise<void> {
  if (!await sizeOf(path)) return;
  let readOnly: string | undefined;
  let names: string[] | undefined;
  let version: number | undefined;
  try {
    const { DatabaseSync } = await import("node:sqlite");
    const db = new DatabaseSync(path);
    try {
      try {
        db.exec("BEGIN IMMEDIATE");
        db.exec("ROLLBACK");
      } catch (error) {
        readOnly = readOnlyMessage(error);
      }
      if (readOnly === undefined) {
        const tables = db.prepare(
          "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
        ).all().map((row) => String(row.name));
        version = tables.includes("migration_state")
          ? schemaVersion(db)
          : undefined;
        names = tables;
      }
    } finally {
      db.close();
    }
  } catch (error) {
    if (error instanceof Deno.errors.NotCapable) throw error;
    readOnly ??= readOnlyMessage(error);
  }
  if (readOnly !== undefined) {
    const unwritable = await unwritableFolder(folder);
    throw new ConfigError(
      "KV_PATH",
      unwritable === undefined
        ? readOnlyRefusal(
          path,
          `SQLite cannot write its -wal or -shm file: "${readOnly}"`,
          "the file, its -wal and -shm files and their folder",
        )
        : readOnlyRefusal(
          path,
          `its folder cannot be written: ${unwritable}`,
          `the folder ${folder}`,
        ),
    );
  }
  if (names === undefined || names.length === 0) return;
  if (version !== undefined) {
    await refuseNewerSchema(path, folder, version);
    return;
  }
  if (names.some((name) => DENO_KV_TABLES.includes(name))) return;
  const shown = names.length > 5
    ? `${names.slice(0, 5).join(", ")}, …`
    : names.join(", ");
  throw new ConfigError(
    "KV_PATH",
    `KV_PATH: ${path} is another program's SQLite database (its tables: ${shown}; none of Deno KV's): the service would add its tables to it and start with none of its payments' records. Check that KV_PATH names this service's store, then start again (leave that file as it is).`,
  );
}

/** SQLite's message if `error` is its refusal to write a read-only database. */
function readOnlyMessage(error: unknown): string | undefined {
  const message = error instanceof Error ? error.message : String(error);
  return /\breadonly database\b/.test(message) ? message : undefined;
}

/**
 * The version of the schema of a Deno KV store (denokv's `migration_state`
 * row `k = 0`: the number of its migrations run), read through `db`, or
 * `undefined` if it has none.
 */
function schemaVersion(
  db: { prepare(sql: string): { get(): unknown } },
): number | undefined {
  const row = db.prepare("SELECT version FROM migration_state WHERE k = 0")
    .get() as { version?: unknown } | undefined;
  return typeof row?.version === "number" ? row.version : undefined;
}

/**
 * A Deno KV schema version every Deno that can run this file knows, so a
 * store at or below it needs no scratch store to compare: `node:sqlite`,
 * which the start's checks import, came in Deno 2.2, and Deno KV has run
 * these 3 migrations since it moved to denokv (Deno 1.38). Only a skip of
 * the scratch store, never a refusal: a store above it is compared with
 * the version this Deno's Deno KV makes.
 */
const SCHEMA_EVERY_DENO_KNOWS = 3;

/**
 * Refuses a store whose schema `version` is above the one this Deno's
 * Deno KV knows: made, or moved on, by a newer Deno. Deno KV runs only the
 * migrations past a file's version, so it would open such a store with no
 * word, and serve on tables laid out for another Deno (its writes could
 * fail, its reads miss what the newer one wrote). The version this Deno
 * knows is asked of Deno KV itself, not written here (an upgrade of Deno
 * moves it): the one of a new store it makes beside the file, removed at
 * once, made only for a store above {@linkcode SCHEMA_EVERY_DENO_KNOWS}
 * (none today's Deno makes). If it cannot make one, the start goes on
 * unchecked.
 */
async function refuseNewerSchema(
  path: string,
  folder: string,
  version: number,
): Promise<void> {
  if (version <= SCHEMA_EVERY_DENO_KNOWS) return;
  const known = await denoSchemaVersion(folder);
  if (known === undefined || version <= known) return;
  throw new ConfigError(
    "KV_PATH",
    `KV_PATH: ${path} was made by a newer Deno KV (its schema version ${version}; Deno ${Deno.version.deno} knows up to ${known}): this Deno could misread its records or fail to write them. Keep the file as it is (it may hold every payment's record), and run the service with the Deno that made it, or a newer one, then start again.`,
  );
}

/**
 * The schema version of a new store this Deno's Deno KV makes in
 * `folder` (a scratch file, removed with its -wal and -shm), or
 * `undefined` if it cannot make one there.
 */
async function denoSchemaVersion(folder: string): Promise<number | undefined> {
  let scratch: string | undefined;
  try {
    scratch = await Deno.makeTempFile({
      dir: folder,
      prefix: ".relayer-schema-",
    });
    // Closed before it is read: the close joins Deno KV's SQLite thread.
    (await Deno.openKv(scratch)).close();
    const { DatabaseSync } = await import("node:sqlite");
    const db = new DatabaseSync(scratch, { readOnly: true });
    try {
      return schemaVersion(db);
    } finally {
      db.close();
    }
  } catch {
    return undefined;
  } finally {
    if (scratch !== undefined) {
      for (const file of [scratch, `${scratch}-wal`, `${scratch}-shm`]) {
        await Deno.remove(file).catch(() => {});
      }
    }
  }
}

/**
 * The refusal of a `KV_PATH` this process can only read: `why`, and what to make writable.
 *
 * @example
 * ```ts ignore
 * throw new ConfigError("KV_PATH", readOnlyRefusal(path, why, "the folder ./data"));
 * ```
 */
export function readOnlyRefusal(
  path: string,
  why: string,
  what: string,
): string {
  return `KV_PATH: ${path} can only be read by this process (${why}): a volume mounted read-only, or files another user owns. Make ${what} writable by this process, then start again.`;
}

/**
 * Why this process cannot write `bytes` to a new file in `dir` (its OS
 * error), or `undefined` if it can, or if Deno's permissions refuse it
 * (said apart). The file is removed.
 *
 * @example
 * ```ts ignore
 * const why = await unwritableFolder("./data"); // undefined: writable
 * ```
 */
export async function unwritableFolder(
  dir: string,
  bytes = 0,
): Promise<string | undefined> {
  let probe: string | undefined;
  try {
    probe = await Deno.makeTempFile({ dir, prefix: ".relayer-probe-" });
    if (bytes > 0) await Deno.writeFile(probe, new Uint8Array(bytes));
    return undefined;
  } catch (error) {
    if (
      error instanceof Deno.errors.NotCapable ||
      error instanceof Deno.errors.NotFound || !(error instanceof Error)
    ) return undefined;
    return error.message;
  } finally {
    if (probe !== undefined) await Deno.remove(probe).catch(() => {});
  }
}

/**
 * Room that a store's folder must have at start: a few dozen of SQLite's
 * pages, for the WAL and the wal-index Deno KV writes at its open and for
 * its first deletion of expired keys.
 */
const START_ROOM_BYTES = 256 * 1024;

/**
 * Refuses to open a store on a full disk. Deno KV could not open a file
 * closed cleanly there ("disk I/O error": no room for its WAL), and, a WAL
 * left beside the file, it opened it and then panicked at its first
 * deletion of expired keys ("KV collect expired failed: database or disk
 * is full", "Deno has panicked. This is a bug in Deno"), out of reach of
 * any catch. Said here, in one line, before either.
 *
 * @example
 * ```ts ignore
 * await refuseFullDisk("./data/relayer.kv", "./data/");
 * ```
 */
export async function refuseFullDisk(path: string, dir: string): Promise<void> {
  const unwritable = await unwritableFolder(dir, START_ROOM_BYTES);
  if (unwritable === undefined || !/\(os error 28\)/.test(unwritable)) return;
  throw new ConfigError(
    "KV_PATH",
    `KV_PATH: the disk that holds ${path} is full (${
      unwritable.replace(/:[^:]*$/, "")
    }): Deno KV cannot write its files there. Free space on that disk, then start again (keep KV_PATH: the store holds every payment's record).`,
  );
}

/**
 * Refuses a `KV_PATH` that cannot be a store's file: a link to a file that
 * is not there (Deno KV would follow it and make a new, empty store at its
 * end: a volume not mounted at a mount point left as an empty folder, a
 * store moved, and the service would start with none of its payments'
 * records), a link that loops, a FIFO, a socket or a device. A path with
 * nothing at it is a new store's; a folder is said apart.
 *
 * @example
 * ```ts ignore
 * await refuseNoFile("./data/relayer.kv");
 * ```
 */
export async function refuseNoFile(path: string): Promise<void> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotCapable) throw error;
    return;
  }
  if (info.isSymlink) {
    try {
      info = await Deno.stat(path);
    } catch (error) {
      if (error instanceof Deno.errors.NotCapable) throw error;
      const target = await Deno.readLink(path).catch(() => "?");
      if (error instanceof Deno.errors.NotFound) {
        throw new ConfigError(
          "KV_PATH",
          `KV_PATH: ${path} is a link to ${target}, which does not exist: the store it points to is missing (a volume not mounted, a file moved). Mount or restore the store there, then start again; only on the first start of a new service, point KV_PATH at ${target} itself.`,
        );
      }
      if (error instanceof Deno.errors.FilesystemLoop) {
        throw new ConfigError(
          "KV_PATH",
          `KV_PATH: ${path} is a link that leads back to itself (${
            error.message.replace(/:[^:]*$/, "")
          }): point it, or KV_PATH, at this service's store, then start again.`,
        );
      }
      return;
    }
  }
  const kind = info.isFifo
    ? "a FIFO"
    : info.isSocket
    ? "a socket"
    : info.isBlockDevice || info.isCharDevice
    ? "a device"
    : undefined;
  if (kind === undefined) return;
  throw new ConfigError(
    "KV_PATH",
    `KV_PATH: ${path} is ${kind}, not a file: Deno KV keeps its store in a file. Check that KV_PATH names this service's store, then start again.`,
  );
}

/**
 * Whether `path` is a folder (not when it is missing or a file).
 *
 * @example
 * ```ts ignore
 * if (await isFolder("./data")) console.log("a folder");
 * ```
 */
export async function isFolder(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isDirectory;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}
