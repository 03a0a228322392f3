/**
 * `deno task kv-to-postgres` (`tools/kv_to_postgres.ts`) given a
 * `target_session_attrs` its PostgreSQL client does not take (libpq's
 * default, `any`), in `DATABASE_URL` or the environment's
 * `PGTARGETSESSIONATTRS`: the URL's is refused as the service's settings
 * refuse it, the environment's as postgres.js refuses it when the client is
 * made; either in one line naming `DATABASE_URL` and what to do, nothing
 * moved (exit 2), as the service's start says it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { KvStore } from "../../store/kv.ts";
import { runMove } from "./_run_tool.ts";

const HINT =
  "(the PostgreSQL client takes target_session_attrs read-write, read-only, primary, standby or prefer-standby only; any, libpq's default, is what it does without one: remove it from DATABASE_URL, or unset PGTARGETSESSIONATTRS, which the client reads where DATABASE_URL sets none)";

/** A Deno KV store of one intent in a temporary folder, for `body`. */
async function withStore(
  body: (dir: string, path: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_attrs_" });
  const path = `${dir}/relayer.kv`;
  try {
    const kv = await Deno.openKv(path);
    try {
      await new KvStore(kv).createIntent({
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
    } finally {
      kv.close();
    }
    await body(dir, path);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("kv-to-postgres refuses a target_session_attrs its client does not take, in DATABASE_URL or PGTARGETSESSIONATTRS, in one line that says what to do", async () => {
  await withStore(async (dir, path) => {
    const url = "postgres://relayer:s3cret-pw@127.0.0.1:1/payments";
    for (
      const [env, line] of [
        [
          { DATABASE_URL: `${url}?target_session_attrs=any` },
          "DATABASE_URL must be a PostgreSQL URL such as postgres://user:password@host:5432/dbname: its target_session_attrs is any, libpq's default, which the PostgreSQL client does not take: remove it (without one the client does what any asks)",
        ],
        [
          { DATABASE_URL: url, PGTARGETSESSIONATTRS: "any" },
          `DATABASE_URL: cannot open PostgreSQL 127.0.0.1:1/payments, no TLS: target_session_attrs any is not supported ${HINT}`,
        ],
      ] as const
    ) {
      const { code, out, err } = await runMove({ KV_PATH: path, ...env }, dir);
      assert.equal(err, `${line}\n`, JSON.stringify(env));
      assert.equal(code, 2);
      assert.equal(out, "");
    }
  });
});
