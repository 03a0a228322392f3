/**
 * `main.ts` as a real process started on a hot standby whose database
 * defaults to SERIALIZABLE (`ALTER DATABASE … SET
 * default_transaction_isolation = 'serializable'` on the primary, which the
 * standby replays): postgres.js's type query on each new connection is
 * refused there (0A000, "cannot use serializable mode in a hot standby"), a
 * rejection no caller can catch (see `isTypeFetchLost`). The process says
 * so in its own line, then refuses to start as the server is a standby.
 *
 * @module
 */

import assert from "node:assert/strict";
import { startMain } from "../_main_process.ts";
import { postgresAvailable } from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { serializableStandby, startPair } from "../store/_postgres_pair.ts";

Deno.test({
  name:
    "main.ts on a hot standby whose database defaults to SERIALIZABLE says PostgreSQL refused postgres.js's type query there (0A000), then that the server is a standby, one line each, no stack",
  ignore: !postgresAvailable,
  fn: timeout(90_000, async () => {
    const pair = await startPair();
    const dir = await Deno.makeTempDir({ prefix: "relayer_standby_" });
    let service: ReturnType<typeof startMain> | undefined;
    try {
      const url = await serializableStandby(pair);
      service = startMain({
        SENDER_URL: "http://127.0.0.1:9/",
        WEBHOOK_SECRET: "standby-secret-0123456789abcdef",
        DATABASE_URL: url,
      }, { writeDir: dir });
      const { code, stdout, stderr } = await service.ended();
      assert.equal(code, 1, stderr);
      assert.doesNotMatch(`${stdout}${stderr}`, /Uncaught| {4}at /);
      assert.match(
        stdout,
        /^relayer: PostgreSQL refused postgres\.js's type query on a new connection \(0A000: a hot standby, whose database or role defaults to SERIALIZABLE\): the connection goes on without it, and the store's calls on it say the server is a standby$/m,
      );
      assert.match(stderr, /^relayer: cannot start: .*hot standby/m);
    } finally {
      // A process that did not end (an assertion failed first) is ended.
      service?.kill();
      await service?.ended().catch(() => {});
      await pair.stop();
      await Deno.remove(dir, { recursive: true });
    }
  }),
});
