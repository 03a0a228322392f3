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

/** Holds the file at `path` locked with `locker` until `release()` rolls back. */
export async function lockedBy(
  path: string,
  locker: Locker,
): Promise<{ release(): Promise<void> }> {
  const { command, args } = locker;
  const child = spawn(command, [...args, ...(args.length ? [] : [path])], {
    env: { ...process.env, LOCKED_FILE: path },
    stdio: ["pipe", "pipe", "inherit"],
  });
  if (args.length === 0) {
    child.stdin.write(
      "BEGIN IMMEDIATE; UPDATE kv SET v = v; SELECT 'locked';\n",
    );
  }
  await new Promise<void>((resolve, reject) => {
    let said = "";
    child.stdout.on("data", (chunk) => {
      said += chunk;
      if (said.includes("locked")) resolve();
    });
    child.on(
      "exit",
      () => reject(new Error(`the locking process ended first: ${said}`)),
    );
  });
  return {
    release: () =>
      new Promise<void>((resolve) => {
        child.removeAllListeners("exit");
        child.on("exit", () => resolve());
        child.stdin.end(args.length === 0 ? "ROLLBACK;\n" : undefined);
      }),
  };
}
