/**
 * `main.ts` started listening where others reach it (`--host 0.0.0.0`),
 * for the suites of the settings it refuses there (the docs' local-run
 * secrets, `RELAYER_INSECURE_DEV`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { startMain } from "./_main_process.ts";

/** How a start on 0.0.0.0 ended. */
export interface OffLoopback {
  /** Its exit code. */
  code: number;
  /** Its stdout (and its stderr too, when both went to one pipe). */
  stdout: string;
  /** Its stderr. */
  stderr: string;
  /** Whether it served there (then ended at once). */
  listening: boolean;
}

/**
 * `main.ts` on `env`, its files in `dir`, started on 0.0.0.0: ended at
 * once if it serves there, rather than at the timeout. With `onePipe`,
 * both streams go to one pipe, as a platform's log takes them: the order
 * of the lines is the order of the writes.
 */
export async function startOffLoopback(
  env: Record<string, string>,
  dir: string,
  onePipe = false,
): Promise<OffLoopback> {
  let listening = false;
  const started = startMain(env, {
    writeDir: dir,
    flags: ["--host", "0.0.0.0"],
    drop: ["--host", "127.0.0.1"],
    ...(onePipe ? { via: ["sh", "-c", 'exec "$0" "$@" 2>&1'] } : {}),
    onLine(line) {
      if (!line.startsWith("relayer: listening on ")) return;
      listening = true;
      started.kill();
    },
  });
  return { ...await started.ended(), listening };
}

/**
 * Asserts that `main.ts` on `env`, refused on 0.0.0.0, writes its start
 * line before its refusal (which starts `relayer: cannot start: ` and
 * `refusal`) in one log of both streams: last, the refusal is the line an
 * operator reads as the outcome.
 */
export async function assertStartLineFirst(
  env: Record<string, string>,
  dir: string,
  refusal: string,
): Promise<void> {
  const { code, stdout } = await startOffLoopback(env, dir, true);
  assert.equal(code, 1, stdout);
  const started = stdout.indexOf("relayer: at most ");
  const refused = stdout.indexOf(`relayer: cannot start: ${refusal}`);
  assert.ok(started >= 0 && refused >= 0, stdout);
  assert.ok(started < refused, stdout);
}
