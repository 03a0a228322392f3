/**
 * `deno task kv-to-postgres` (`tools/kv_to_postgres.ts`) pointed at a hot
 * standby whose database defaults to SERIALIZABLE (`ALTER DATABASE … SET
 * default_transaction_isolation = 'serializable'` on the primary, which
 * the standby replays): postgres.js's type query on its new connection is
 * refused there (0A000), a rejection no caller can catch (see
 * `isTypeFetchLost`). The move must live on to say, in one line, that the
 * server is a standby and to connect to the primary, nothing moved.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { KvStore } from "../../store/kv.ts";
import { postgresAvailable } from "../_postgres.ts";
import { startPair } from "../store/_postgres_pair.ts";
import { runMove } from "./_run_tool.ts";

Deno.test({
  name:
    "kv-to-postgres into a hot standby whose database defaults to serializable says it is a standby and to connect to the primary, nothing moved, where the type query's rejection ended it with a stack trace",
  ignore: !postgresAvailable,
  async fn() {
    const pair = await startPair();
    const { password, port } = pair.primary;
    const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_standby_" });
    const path = `${dir}/relayer.kv`;
    const primary = postgres(
      `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
      { max: 1, onnotice: () => {} },
    );
    try {
      const kv = await Deno.openKv(path);
      try {
        await new KvStore(kv).createIntent({ id: "pi_1", state: "created" });
      } finally {
        kv.close();
      }
      await primary.unsafe(
        `ALTER DATABASE postgres SET default_transaction_isolation = 'serializable'`,
      );
      const url =
        `postgres://postgres:${password}@127.0.0.1:${pair.standbyPort}/postgres`;
      // Replayed once a session opened there meets the level (a session
      // takes the database's settings as it starts).
      for (let waited = 0;; waited += 50) {
        const probe = postgres(url, {
          max: 1,
          fetch_types: false,
          onnotice: () => {},
        });
        const met = await probe`SELECT 1`.then(
          () => false,
          (error: Error) =>
            /cannot use serializable mode in a hot standby/.test(error.message),
        );
        await probe.end({ timeout: 0 });
        if (met) break;
        assert.ok(waited < 10_000, "the standby never replayed the setting");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const { code, out, err } = await runMove(
        { KV_PATH: path, DATABASE_URL: url },
        dir,
      );
      // Before: "error: Uncaught (in promise) PostgresError: cannot use
      // serializable mode in a hot standby", and its stack, exit 1.
      assert.doesNotMatch(err, /Uncaught/);
      assert.match(
        err,
        /^DATABASE_URL: cannot open PostgreSQL 127\.0\.0\.1:\d+\/postgres, no TLS: Cannot use this PostgreSQL database as the server is a hot standby \(pg_is_in_recovery\(\)\), which takes no writes: connect to the primary\n$/,
      );
      assert.equal(out, "");
      assert.equal(code, 2);
    } finally {
      await primary.end({ timeout: 0 });
      await pair.stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
