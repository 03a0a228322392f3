/**
 * `main.ts` reads a permission refusal as its listen's only while nothing
 * listens yet: one that comes later (a promise of the running service that
 * rejected unawaited) is no refusal to start, and is not reported as one
 * ("cannot start: this process may not listen on …" would name the wrong
 * fault, and send an operator to change the listen's flags).
 *
 * @module
 */

import assert from "node:assert/strict";
import { baseEnv, freePort } from "./_main_process.ts";
import { timeout } from "./_timeout.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const PRELOAD = new URL("./_rejects_after_listen.ts", import.meta.url)
  .pathname;

for (
  const [kind, message] of [
    [
      "NotCapable",
      'Requires net access to "10.9.9.9:5432", run again with the --allow-net flag',
    ],
    ["PermissionDenied", "Permission denied (os error 13)"],
  ] as const
) {
  Deno.test(
    `main.ts, once it listens, reports no unawaited ${kind} as a refusal to listen`,
    timeout(30_000, async () => {
      const dir = await Deno.makeTempDir({ prefix: "relayer_listened_" });
      const trigger = `${dir}/reject`;
      const { port } = freePort();
      // Served as Deno Deploy serves it (deno run, DENO_AUTO_SERVE), the
      // one way to run a module before it (deno serve runs no --preload).
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--allow-net",
          "--allow-env",
          "--allow-read",
          `--allow-write=${dir}`,
          `--preload=${PRELOAD}`,
          "main.ts",
        ],
        cwd: ROOT,
        clearEnv: true,
        env: {
          ...baseEnv(),
          DENO_AUTO_SERVE: "1",
          DENO_SERVE_ADDRESS: `tcp:127.0.0.1:${port}`,
          SENDER_URL: "http://127.0.0.1:9/",
          WEBHOOK_SECRET: "start-secret-0123456789abcdef",
          KV_PATH: `${dir}/relayer.kv`,
          RELAYER_TEST_REJECT: trigger,
        },
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).spawn();
      const stderr = new Response(child.stderr).text();
      const stop = new AbortController();
      try {
        const ended = child.status.finally(() => stop.abort());
        await answering(`http://127.0.0.1:${port}`, stop.signal);
        if (stop.signal.aborted) {
          assert.fail(`main.ts did not start: ${await stderr}`);
        }
        await Deno.writeTextFile(trigger, `${kind}\n${message}`);
        const { code } = await ended;
        const said = await stderr;
        assert.equal(code, 1, said);
        assert.match(said, new RegExp(`Uncaught \\(in promise\\) ${kind}`));
        assert.doesNotMatch(said, /cannot start/);
      } finally {
        try {
          child.kill("SIGKILL");
        } catch {
          // already gone
        }
        await child.status;
        await stderr;
        await Deno.remove(dir, { recursive: true });
      }
    }),
  );
}

/** Waits until `base` answers `GET /healthz` at all (its status aside), or `stop` is aborted. */
async function answering(base: string, stop: AbortSignal): Promise<void> {
  while (!stop.aborted) {
    try {
      const res = await fetch(`${base}/healthz`);
      await res.body?.cancel();
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}
