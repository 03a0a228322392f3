/**
 * PostgresStore's start-up check for a pooler in transaction mode holds
 * two connections of the client's, one idle while the other runs: when
 * the server ends the idle one then (a restart, a failover,
 * `pg_terminate_backend` at the service's start), the check must not hand
 * it back to the pool, where postgres.js 3.4.9 crashes the process at its
 * next write; nor one the server ended under the ROLLBACK of its
 * transaction. In a child process, which that crash would end.
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

const CHILD = new URL("./_pooler_check_cut.ts", import.meta.url).pathname;
const ROOT = new URL("../../", import.meta.url).pathname;

Deno.test({
  name:
    "PostgresStore.migrate() does not hand back a connection of its pooler check that the server ended while it sat idle, and the store goes on",
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
            `relayer_pooler_cut_${Deno.pid}`,
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
      assert.equal(out, "alive, 8 of 8 written and read");
    } finally {
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
  }),
});

Deno.test({
  name:
    "PostgresStore.migrate() does not hand back a connection of its pooler check that the server ended under its ROLLBACK, and the store goes on",
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
            `relayer_pooler_rollback_${Deno.pid}`,
            "rollback",
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
      assert.equal(out, "alive, 8 of 8 written and read");
    } finally {
      await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
    }
  }),
});
