/**
 * Services with `KV_QUEUE=1` on one Deno KV file (two processes, or
 * `deno serve --parallel`'s workers), each on its own handle, ending jobs
 * at once: each job's line is marked ended in a checked commit, which
 * SQLite refuses as "database is locked" when another handle wrote
 * between its check and its write (nothing written). Waited out, as the
 * store's commits are, every line is marked ended.
 */
import assert from "node:assert/strict";
import { openService, type Service } from "../main.ts";
import { loadConfig } from "../webhook/config.ts";
import { timeout } from "./_timeout.ts";
import { OPS } from "./_queue_line.ts";

const JOBS = 200;

Deno.test(
  "openService() three times with KV_QUEUE=1 on one file marks every ended job's line ended, none refused as a locked database",
  timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_queue_shared_" });
    const lines: string[] = [];
    const config = loadConfig({
      SENDER_URL: "http://127.0.0.1:9/",
      OPS_TOKEN: OPS,
      WEBHOOK_SECRET: "queue-secret-0123456789",
      KV_PATH: `${dir}/relayer.kv`,
      KV_QUEUE: "1",
    });
    const services: Service[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        services.push(
          await openService(config, { log: (line) => lines.push(line) }),
        );
      }
      const [first, second, third] = services as [Service, Service, Service];
      // Settled: each job's delivery ends it at once, sending nothing.
      for (let i = 0; i < JOBS; i++) {
        await first.store.createIntent({
          id: `pi_${i}`,
          state: "settled",
          hold: "captured",
        });
      }
      await Promise.all(
        Array.from({ length: JOBS }, async (_, i) => {
          const res = await [first, second, third][i % 3]!.app.request(
            "/v1/jobs",
            {
              method: "POST",
              headers: { authorization: `Bearer ${OPS}` },
              body: JSON.stringify({ intentId: `pi_${i}`, kind: "settle" }),
            },
          );
          await res.body?.cancel();
          assert.equal(res.status, 202);
        }),
      );
      // Every line ends as its job's delivery ends it; one refused stays
      // open.
      const until = Date.now() + 10_000;
      const open = async () => {
        let n = 0;
        for await (
          const { value } of first.kv!.list({ prefix: ["relayer_line"] })
        ) {
          if (typeof value === "string") n++;
        }
        return n;
      };
      while (await open() > 0 && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.deepEqual(
        lines.filter((line) => /could not be marked ended/.test(line)),
        [],
      );
      assert.equal(await open(), 0, "lines left open");
    } finally {
      for (const service of services) await service.drain(1_000);
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
