/**
 * `KV_PATH=:memory:` on a service others reach (a `PUBLIC_URL` off this
 * machine, or listening off loopback) keeps its intents, dead letters and
 * replay records in the process alone: a restart forgets them. `main.ts`
 * says so in one line after it says where it listens; on loopback (a local
 * run, the Deploy rehearsal of docs/routes.md) it says nothing.
 *
 * @module
 */

import assert from "node:assert/strict";
import { memoryStoreLine } from "../main.ts";
import { startMain } from "./_main_process.ts";
import { timeout } from "./_timeout.ts";

const FIX =
  "its intents, dead letters, write-ahead and replay records live in this process alone, and a restart or a crash forgets them all (a job redelivered then finds no intent, a payment already sent no record). Give a service others reach a store that outlives it: a file (KV_PATH=./data/relayer.kv, the default), KV_URL or DATABASE_URL";

Deno.test("memoryStoreLine() names KV_PATH=:memory: reached at a PUBLIC_URL off this machine or listening off loopback; nothing on loopback or on another store", () => {
  assert.equal(
    memoryStoreLine(
      ":memory:",
      "https://relayer.example.com/base",
      "http://127.0.0.1:8000/",
    ),
    `relayer: KV_PATH is :memory:, and this service is reached at PUBLIC_URL https://relayer.example.com, off this machine: ${FIX}`,
  );
  assert.equal(
    memoryStoreLine(":memory:", undefined, "http://0.0.0.0:8000/"),
    `relayer: KV_PATH is :memory:, and this service listens on http://0.0.0.0:8000/, off this machine: ${FIX}`,
  );
  assert.equal(
    memoryStoreLine(":memory:", "http://127.0.0.1:8000", "http://[::]:8000/"),
    `relayer: KV_PATH is :memory:, and this service listens on http://[::]:8000/, off this machine: ${FIX}`,
  );
  assert.equal(
    memoryStoreLine(":memory:", "http://localhost:8000", "http://[::1]:8000/"),
    undefined,
  );
  assert.equal(
    memoryStoreLine(":memory:", undefined, "http://127.0.0.1:8000/"),
    undefined,
  );
  assert.equal(
    memoryStoreLine(
      "./data/relayer.kv",
      "https://relayer.example.com",
      "http://0.0.0.0:8000/",
    ),
    undefined,
  );
  assert.equal(
    memoryStoreLine(
      undefined,
      "https://relayer.example.com",
      "http://0.0.0.0:8000/",
    ),
    undefined,
  );
});

Deno.test(
  "main.ts on KV_PATH=:memory: reached at a PUBLIC_URL off this machine says after where it listens that a restart forgets its state, which one does; not at a loopback PUBLIC_URL",
  timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_memory_reached_" });
    const OPS = "memory-reached-ops-0123456789";
    const env = {
      SENDER_URL: "http://127.0.0.1:9/",
      OPS_TOKEN: OPS,
      QSTASH_CURRENT_SIGNING_KEY: "sig_memory_current_0123456789",
      QSTASH_NEXT_SIGNING_KEY: "sig_memory_next_0123456789ab",
      KV_PATH: ":memory:",
    };
    const ops = { authorization: `Bearer ${OPS}` };
    /** main.ts on `publicUrl`, `meanwhile` run once it serves, then stopped. */
    const run = async (
      publicUrl: string,
      meanwhile: (base: string) => Promise<void> = async () => {},
    ) => {
      const service = startMain({ ...env, PUBLIC_URL: publicUrl }, {
        writeDir: dir,
      });
      try {
        const base = await service.base();
        if (base === null) assert.fail(JSON.stringify(await service.ended()));
        await meanwhile(base);
        service.child.kill("SIGTERM");
        const { code, stdout, stderr } = await service.ended();
        assert.equal(code, 0, `${stdout}\n${stderr}`);
        return stdout.trim().split("\n");
      } finally {
        service.kill();
        await service.ended().catch(() => {});
      }
    };
    try {
      const lines = await run("https://relayer.example.test", async (base) => {
        const created = await fetch(`${base}/v1/intents`, {
          method: "POST",
          headers: ops,
          body: JSON.stringify({ id: "pi_0001", state: "authorized" }),
        });
        assert.equal(created.status, 201, await created.text());
      });
      assert.match(lines[1]!, /^relayer: listening on /);
      assert.equal(
        lines[2],
        `relayer: KV_PATH is :memory:, and this service is reached at PUBLIC_URL https://relayer.example.test, off this machine: ${FIX}`,
      );
      // What the line says: the restarted service knows no such intent.
      await run("https://relayer.example.test", async (base) => {
        const read = await fetch(`${base}/v1/intents/pi_0001`, {
          headers: ops,
        });
        assert.equal(read.status, 404, await read.text());
      });
      const local = await run("http://127.0.0.1:8000");
      assert.doesNotMatch(local.join("\n"), /KV_PATH is :memory:/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
