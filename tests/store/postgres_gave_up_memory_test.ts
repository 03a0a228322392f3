/**
 * What a `PostgresStore` keeps of a write that gave up waiting for a
 * connection (its `connectionWaitMs` passed, every connection of the pool
 * busy): nothing, once it answered. Measured apart, where the garbage
 * collector can be asked to run (`_postgres_gave_up_gc.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  openPostgresStore,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";

Deno.test({
  name:
    "PostgresStore keeps nothing of a write that gave up waiting for a connection",
  ignore: !postgresAvailable,
  async fn() {
    const { schema, close } = await openPostgresStore();
    try {
      const { code, stdout, stderr } = await new Deno.Command(
        Deno.execPath(),
        {
          args: [
            "run",
            "--allow-env",
            "--allow-net=127.0.0.1,localhost",
            "--v8-flags=--expose-gc",
            new URL("_postgres_gave_up_gc.ts", import.meta.url).pathname,
          ],
          env: { DATABASE_URL: await postgresUrl(), SCHEMA: schema },
          stdout: "piped",
          stderr: "piped",
        },
      ).output();
      const text = new TextDecoder();
      assert.equal(code, 0, text.decode(stderr));
      const { writes, refused, grewBytes } = JSON.parse(text.decode(stdout));
      assert.equal(writes, 5_000);
      assert.equal(refused, 5_000, "every write gave up");
      // Each kept its wait's watch of a close: kilobytes a write.
      assert.ok(
        grewBytes < 1_000_000,
        `the heap grew by ${grewBytes} bytes over 4,000 writes that gave up`,
      );
    } finally {
      await close();
    }
  },
});
