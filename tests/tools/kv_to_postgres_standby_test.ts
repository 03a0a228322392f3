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
import { KvStore } from "../../store/kv.ts";
import { postgresAvailable } from "../_postgres.ts";
import { serializableStandby, startPair } from "../store/_postgres_pair.ts";
import { runMove } from "./_run_tool.ts";

Deno.test({
  name:
    "kv-to-postgres into a hot standby whose database defaults to serializable says it is a standby and to connect to the primary, nothing moved, where the type query's rejection ended it with a stack trace",
  ignore: !postgresAvailable,
  async fn() {
    const pair = await startPair();
    const dir = await Deno.makeTempDir({ prefix: "kv_to_postgres_standby_" });
    const path = `${dir}/relayer.kv`;
    try {
      const kv = await Deno.openKv(path);
      try {
        await new KvStore(kv).createIntent({ id: "pi_1", state: "created" });
      } finally {
        kv.close();
      }
      const url = await serializableStandby(pair);
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
      await pair.stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
