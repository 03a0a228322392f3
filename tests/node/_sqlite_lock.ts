/**
 * A write transaction held open on a SQLite file by another program, as a
 * backup tool or `sqlite3` would hold it: this Node's `node:sqlite` (Node 22
 * and later), else the `sqlite3` command. The store contract on Node
 * (`kv_contract_node.ts`) writes through `@deno/kv` on a file so held.
 *
 * @module
 */

import { spawn, spawnSync } from "node:child_process";
import process from "node:process";

/** A program that holds a SQLite file locked until its stdin ends. */
export interface Locker {
  /** The program. */
  readonly command: string;
  /** Its arguments; none: the `sqlite3` command, given the file and SQL on its stdin. */
  readonly args: readonly string[];
}

/**
 * What holds a write transaction open on a SQLite file from another
 * program: this Node's `node:sqlite` (Node 22 and later), else the
 * `sqlite3` command; `undefined` where there is neither (Node 20 without
 * `sqlite3`).
 */
export function sqliteLocker(): Locker | undefined {
  const script = `const { DatabaseSync } = require("node:sqlite");
const db = new DatabaseSync(process.env.LOCKED_FILE);
db.exec("BEGIN IMMEDIATE; UPDATE kv SET v = v");
console.log("locked");
process.stdin.on("data", () => {});
process.stdin.on("end", () => { db.exec("ROLLBACK"); db.close(); });`;
  const ran = (command: string, args: string[]) =>
    spawnSync(command, args, { stdio: "ignore" }).status === 0;
  if (ran(process.execPath, ["-e", 'require("node:sqlite")'])) {
    return { command: process.execPath, args: ["-e", script] };
  }
  return ran("sqlite3", ["-version"])
    ? { command: "sqlite3", args: [] }
    : undefined;
}

/** How long {@linkcode lockedBy} waits on its holder. */
export interface LockBounds {
  /** For the holder to say it holds the lock. @default 10_000 */
  readonly readyMs?: number;
  /** For it to end once its stdin ended, before it is killed. @default 5_000 */
  readonly releaseMs?: number;
}

/**
 * Holds the file at `path` locked with `locker` until `release()` rolls
 * back. Every wait is bounded, so the holder cannot hold a test: one that
 * does not say it holds the lock within `readyMs` is killed and refused,
 * and `release()` kills one still running `releaseMs` after its stdin
 * ended (it returns at once for one that already ended).
 *
 * @throws {Error} If the holder ended, failed to start or stayed silent
 * before it said it held the lock.
 */
export async function lockedBy(
  path: string,
  locker: Locker,
  { readyMs = 10_000, releaseMs = 5_000 }: LockBounds = {},
): Promise<{ release(): Promise<void> }> {
  const { command, args } = locker;
  const child = spawn(command, [...args, ...(args.length ? [] : [path])], {
    env: { ...process.env, LOCKED_FILE: path },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const ended = new Promise<void>((resolve) => {
    child.once("close", () => resolve());
    // A program that did not start closes too; its error is said below.
    child.once("error", () => resolve());
  });
  const done = () => child.exitCode !== null || child.signalCode !== null;
  /** Kills the holder unless it ended, and waits until it has. */
  const end = async (graceMs: number) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
    });
    await Promise.race([ended, late]);
    clearTimeout(timer);
    if (!done()) child.kill("SIGKILL");
    await ended;
  };
  // Its stdin may be closed under a write once it ended: that is said by its exit.
  child.stdin.on("error", () => {});
  if (args.length === 0) {
    child.stdin.write(
      "BEGIN IMMEDIATE; UPDATE kv SET v = v; SELECT 'locked';\n",
    );
  }
  let said = "";
  let failed: Error | undefined;
  child.once("error", (error) => failed = error);
  child.stdout.on("data", (chunk) => said += chunk);
  const ready = await new Promise<"locked" | "ended" | "silent">((resolve) => {
    const timer = setTimeout(() => resolve("silent"), readyMs);
    child.stdout.on("data", () => {
      if (said.includes("locked")) {
        clearTimeout(timer);
        resolve("locked");
      }
    });
    void ended.then(() => {
      clearTimeout(timer);
      resolve(said.includes("locked") ? "locked" : "ended");
    });
  });
  if (ready !== "locked") {
    await end(0);
    throw new Error(
      ready === "silent"
        ? `the locking program (${
          command.split("/").pop()
        }) did not say it held the lock within ${readyMs}ms: it was ended`
        : `the locking program (${command.split("/").pop()}) ended first: ${
          failed?.message ?? said
        }`,
    );
  }
  return {
    release: async () => {
      if (!done()) {
        child.stdin.end(args.length === 0 ? "ROLLBACK;\n" : undefined);
      }
      await end(releaseMs);
    },
  };
}
