/**
 * PostgresStore when the server ends a write's connection after a
 * statement of the flight failed on its own (its intent moved on, a
 * replayed claim, a lock timeout) and before the statements behind it
 * answered: the failed write must not hand that connection back to the
 * pool, where postgres.js 3.4.9 has no socket for it and crashes the
 * process from a timer at its next query (`Cannot read properties of null
 * (reading 'write')`, porsager/postgres#1154, #1208). In a child process,
 * which that crash would end.
 *
 * @module
 */

import assert from "node:assert/strict";
import { PostgresStore } from "../../store/postgres.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

const CHILD = new URL("./_flight_cut.ts", import.meta.url).pathname;
const ROOT = new URL("../../", import.meta.url).pathname;

Deno.test({
  name:
    "PostgresStore does not hand back a connection the server ended under a flight that had already failed on a statement of its own, and the store goes on",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const admin = await connect(1);
    const schema = freshSchema();
    try {
      await new PostgresStore(admin, { schema }).migrate();
      const { code, stdout, stderr } = await new Deno.Command(
        Deno.execPath(),
        {
          args: [
            "run",
            "--allow-net=127.0.0.1,localhost",
            "--allow-env",
            "--allow-read",
            CHILD,
            await postgresUrl(),
            schema,
            // Its sessions, found by this name (the server is shared).
            `relayer_flight_cut_${Deno.pid}`,
          ],
          cwd: ROOT,
          stdin: "null",
        },
      ).output();
      const out = new TextDecoder().decode(stdout).trim();
      assert.equal(
        code,
        0,
        `the process ended: ${new TextDecoder().decode(stderr)}`,
      );
      assert.equal(
        out,
        "alive, the write ConflictError, 8 of 8 written and read",
      );
    } finally {
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
  }),
});
