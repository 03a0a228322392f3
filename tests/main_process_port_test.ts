/**
 * The test helper that runs `main.ts` as a process: where it serves. A
 * port probed free and handed to the child can be another process's by
 * the time the child binds it (the machine is shared): the child then
 * fails to start, and a test that waits on that port talks to the other
 * process as if it were the service.
 *
 * @module
 */

import assert from "node:assert/strict";
import { healthy, listeningOn, startMain } from "./_main_process.ts";
import { timeout } from "./_timeout.ts";
import { withListen } from "./_listen_stub.ts";

Deno.test("listeningOn() reads main.ts's listening line, and no other", () => {
  assert.equal(
    listeningOn("relayer: listening on http://127.0.0.1:36479/"),
    "http://127.0.0.1:36479",
  );
  assert.equal(listeningOn("relayer: listening on http://0.0.0.0:8000/"), null);
  assert.equal(listeningOn("relayer: drained"), null);
});

Deno.test(
  "startMain() without a port serves where its child bound, not on a port a probe found free that another process took",
  timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_port_" });
    // Another process's server, on the port a probe would hand out: it
    // answers /healthz too.
    const other = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      () => new Response("another process"),
    );
    const service = await withListen(
      () => ({
        addr: {
          transport: "tcp",
          hostname: "127.0.0.1",
          port: other.addr.port,
        },
        close() {},
      }),
      () =>
        startMain({
          SENDER_URL: "http://127.0.0.1:9/",
          WEBHOOK_SECRET: "port-secret-0123456789abcdef",
          OPS_TOKEN: "port-ops-0123456789",
          KV_PATH: `${dir}/relayer.kv`,
        }, { writeDir: dir }),
    );
    try {
      const base = await service.base();
      assert.ok(base !== null, "the service said where it listens");
      assert.notEqual(base, `http://127.0.0.1:${other.addr.port}`);
      await healthy(base);
      const res = await fetch(`${base}/healthz`);
      assert.equal(res.status, 200);
      assert.notEqual(await res.text(), "another process");
    } finally {
      service.kill();
      await service.ended();
      await other.shutdown();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
