/**
 * Several `main.ts` with `KV_QUEUE=1` starting at once on one Deno KV
 * file that holds messages Deno KV gave up delivering: each start puts
 * them back on the queue (`requeueUndelivered`), each in a checked commit,
 * so the instances race for the same keys. A checked commit that another
 * instance's write overtook between its check and its write is refused by
 * SQLite as "database is locked" (nothing written): waited out, as the
 * store's commits wait, so every message goes back once, at the start,
 * and no instance says it could not look.
 */
import assert from "node:assert/strict";
import { UNDELIVERED_PREFIX } from "../main.ts";
import { startMain } from "./_main_process.ts";
import { timeout } from "./_timeout.ts";

const SETTINGS = {
  SENDER_URL: "http://127.0.0.1:9/",
  WEBHOOK_SECRET: "start-secret-0123456789abcdef",
  KV_QUEUE: "1",
};

/** How many undelivered messages the store holds, and how many instances start. */
const MESSAGES = 150;
const INSTANCES = 3;

/** How many keys the store holds under `prefix`. */
async function count(kv: Deno.Kv, prefix: Deno.KvKey): Promise<number> {
  let n = 0;
  for await (const _ of kv.list({ prefix })) n++;
  return n;
}

Deno.test(
  "main.ts instances started at once with KV_QUEUE=1 on one store put every undelivered message back as they start, none saying it could not look",
  timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    const path = `${dir}/relayer.kv`;
    const kv = await Deno.openKv(path);
    const services: ReturnType<typeof startMain>[] = [];
    try {
      for (let i = 0; i < MESSAGES; i += 50) {
        const atomic = kv.atomic();
        for (let j = i; j < Math.min(i + 50, MESSAGES); j++) {
          // Not a job: each instance keeps it as a dead letter when it is
          // delivered, more writes beside the race.
          atomic.set([...UNDELIVERED_PREFIX, crypto.randomUUID()], {
            job: { kind: "unreadable" },
            id: `m-${j}`,
          });
        }
        assert.ok((await atomic.commit()).ok);
      }
      for (let i = 0; i < INSTANCES; i++) {
        services.push(
          startMain({ ...SETTINGS, KV_PATH: path }, { writeDir: dir }),
        );
      }
      for (const service of services) {
        if (await service.base() === null) {
          const { code, stderr } = await service.ended();
          assert.fail(
            `main.ts ended (code ${code}) before it served: ${stderr}`,
          );
        }
      }
      // Each start looks once; a look that fails leaves the rest for a
      // minute later.
      const until = Date.now() + 10_000;
      while (
        await count(kv, UNDELIVERED_PREFIX) > 0 && Date.now() < until
      ) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const left = await count(kv, UNDELIVERED_PREFIX);
      for (const service of services) service.child.kill("SIGTERM");
      const ended = await Promise.all(services.map((s) => s.ended()));
      const stdout = ended.map((e) => e.stdout).join("");
      assert.doesNotMatch(
        stdout,
        /could not look for undelivered messages/,
      );
      assert.equal(left, 0, `${left} of ${MESSAGES} messages left`);
      for (const { code, stderr } of ended) assert.equal(code, 0, stderr);
    } finally {
      for (const service of services) service.kill();
      await Promise.all(services.map((s) => s.ended()));
      kv.close();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
