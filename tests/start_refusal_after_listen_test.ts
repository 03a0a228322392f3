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
import { baseEnv, listeningOn, readLines } from "./_main_process.ts";
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
      // Served as Deno Deploy serves it (deno run, DENO_AUTO_SERVE), the
      // one way to run a module before it (deno serve runs no --preload).
      // Port 0: the runtime binds a port the system picks, and main.ts says
      // which (a port probed free here could be another process's by then).
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
          DENO_SERVE_ADDRESS: "tcp:127.0.0.1:0",
          SENDER_URL: "http://127.0.0.1:9/",
          WEBHOOK_SECRET: "start-secret-0123456789abcdef",
          KV_PATH: `${dir}/relayer.kv`,
          RELAYER_TEST_REJECT: trigger,
        },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const stderr = new Response(child.stderr).text();
      let heard!: (base: string | null) => void;
      const listening = new Promise<string | null>((resolve) =>
        heard = resolve
      );
      const stdout = readLines(child.stdout, (line) => {
        const at = listeningOn(line);
        if (at !== null) heard(at);
      }).finally(() => heard(null));
      const stop = new AbortController();
      try {
        const ended = child.status.finally(() => stop.abort());
        const base = await listening;
        if (base !== null) await answering(base, stop.signal);
        if (base === null || stop.signal.aborted) {
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
        await stdout.catch(() => {});
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
