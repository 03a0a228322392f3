/**
 * `startPgBouncer` (support/postgres_server.ts): where the pooler serves.
 * PgBouncer must be told a real port (it says `listening on
 * 127.0.0.1:0` for port 0, never the one it got), so a port probed free is
 * handed to it; on a shared machine another process can take that port
 * first. `pgbouncer -d` still exits 0 then (its daemon logs `cannot listen
 * on …` and ends), and something accepts connections on the port: the
 * other process, which the suites must not take for the pooler.
 *
 * @module
 */

import assert from "node:assert/strict";
import { startPgBouncer } from "../../support/postgres_server.ts";
import { pgbouncerAvailable } from "../_postgres.ts";
import { withListen } from "../_listen_stub.ts";

Deno.test({
  name:
    "startPgBouncer() starts again on another port when another process took the probed one, rather than hand out that process's address",
  ignore: !(await pgbouncerAvailable()),
  fn: async () => {
    // Another process's listener, on the port the probe hands out first.
    const other = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const taken = other.addr.port;
    const accepting = (async () => {
      for await (const conn of other) conn.close();
    })();
    let probes = 0;
    const bouncer = await withListen(
      (options, listen) =>
        probes++ === 0
          ? {
            addr: { transport: "tcp", hostname: "127.0.0.1", port: taken },
            close() {},
          }
          : listen(options),
      // PgBouncer reaches the server only once a client logs in.
      () =>
        startPgBouncer({
          url: "postgres://postgres:unused@127.0.0.1:9/postgres",
          password: "unused",
          port: 9,
          dir: "/nonexistent",
        }, { mode: "transaction" }),
    );
    try {
      assert.ok(probes >= 2, "the taken port was given up");
      assert.notEqual(new URL(bouncer.url).port, String(taken));
    } finally {
      await bouncer.stop();
      other.close();
      await accepting;
    }
  },
});
