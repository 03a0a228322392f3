/**
 * `main.ts` served under a file size limit (`ulimit -f`, systemd's
 * `LimitFSIZE`, here `prlimit --fsize` on the running process) that its
 * Deno KV file reaches: a write past the limit raises SIGXFSZ, whose
 * default action ends the process with no word. The service keeps
 * running instead, its writes refused (503 for the queue to retry), and
 * its log says what limit was met and what to do.
 */
import assert from "node:assert/strict";
import { healthy, startMain } from "./_main_process.ts";
import { timeout } from "./_timeout.ts";

const OPS = "fsize-ops-0123456789";
const prlimit = (() => {
  try {
    return new Deno.Command("prlimit", { args: ["--version"], stdout: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
})();

Deno.test({
  name:
    "main.ts whose KV file meets the process's file size limit keeps serving: writes answer 503, and the log names the limit and what to do",
  ignore: !prlimit,
  fn: timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_fsize_" });
    const service = startMain({
      SENDER_URL: "http://127.0.0.1:9/",
      WEBHOOK_SECRET: "fsize-secret-0123456789abcdef",
      OPS_TOKEN: OPS,
      KV_PATH: `${dir}/relayer.kv`,
    }, { writeDir: dir });
    const base = await service.base() ?? "http://127.0.0.1:0";
    try {
      await healthy(base);
      const create = (id: string) =>
        fetch(`${base}/v1/intents`, {
          method: "POST",
          headers: { authorization: `Bearer ${OPS}` },
          body: JSON.stringify({ id, state: "authorized" }),
        });
      const first = await create("pi_first");
      assert.equal(first.status, 201);
      await first.body?.cancel();
      let largest = 0;
      for (const name of ["relayer.kv", "relayer.kv-wal", "relayer.kv-shm"]) {
        largest = Math.max(largest, (await Deno.stat(`${dir}/${name}`)).size);
      }
      const limited = new Deno.Command("prlimit", {
        args: [
          "--pid",
          String(service.child.pid),
          `--fsize=${largest + 16 * 1024}`,
        ],
        stderr: "piped",
      }).outputSync();
      assert.ok(limited.success, new TextDecoder().decode(limited.stderr));
      const statuses: number[] = [];
      for (let i = 0; i < 40 && !statuses.includes(503); i++) {
        const res = await create(`pi_${i}`);
        statuses.push(res.status);
        await res.body?.cancel();
      }
      assert.ok(statuses.includes(503), `answers: ${statuses.join(" ")}`);
      // More writes past the limit, each its own SIGXFSZ: the log says it
      // once a minute, not once a write.
      for (let i = 0; i < 3; i++) {
        const res = await create(`pi_more_${i}`);
        assert.equal(res.status, 503);
        await res.body?.cancel();
      }
      // Still serving.
      const alive = await fetch(`${base}/healthz`);
      assert.equal(alive.status, 200);
      await alive.body?.cancel();
      // A drain flushes the log.
      service.child.kill("SIGTERM");
      await service.child.status;
    } finally {
      service.kill();
    }
    const { stdout, stderr } = await service.ended();
    await Deno.remove(dir, { recursive: true });
    assert.match(
      stdout,
      /relayer: a write passed this process's file size limit \(SIGXFSZ\): the Deno KV file cannot grow past it, so writes that need more room fail \(deliveries are answered 503, \/readyz not ready\)\. Raise or remove the limit \(ulimit -f, systemd's LimitFSIZE\), then restart the service\./,
      `${stdout}\n${stderr}`,
    );
    assert.equal(
      stdout.match(/a write passed this process's file size limit/g)?.length,
      1,
      stdout,
    );
    assert.doesNotMatch(stderr, /\n\s+at /, "no stack");
  }),
});
