/**
 * `main.ts` under `deno serve --parallel`: the runtime serves its default
 * export in several workers and calls `onListen` in the first alone, so a
 * worker that never hears it is served all the same.
 */
import assert from "node:assert/strict";
import { baseEnv, healthy, listeningOn } from "./_main_process.ts";
import { timeout } from "./_timeout.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const ROOT = new URL("../", import.meta.url).pathname;

Deno.test(
  "main.ts under deno serve --parallel keeps serving past its first seconds in every worker, and a SIGTERM ends it with exit code 0, no worker saying nothing served it",
  timeout(60_000, async () => {
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "serve",
        "--parallel",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--allow-net",
        "--allow-env",
        "--unstable-kv",
        MAIN,
      ],
      cwd: ROOT,
      clearEnv: true,
      env: {
        ...baseEnv(),
        DENO_JOBS: "2",
        WEBHOOK_SECRET: "parallel-secret-0123456789abcdef",
        SENDER_URL: "http://127.0.0.1:9/",
        KV_PATH: ":memory:",
      },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const stderr = new Response(child.stderr).text();
    const found: { base: string | null } = { base: null };
    const stdout = (async () => {
      let text = "";
      for await (
        const chunk of child.stdout.pipeThrough(new TextDecoderStream())
      ) {
        text += chunk;
        for (const line of text.split("\n")) {
          found.base ??= listeningOn(line);
        }
      }
      return text;
    })();
    try {
      const started = performance.now();
      while (found.base === null && performance.now() - started < 30_000) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const base = found.base;
      assert.ok(base !== null, "no listening line");
      await healthy(base, AbortSignal.timeout(30_000));
      // Past the first seconds, every worker still up: each answers.
      await new Promise((resolve) => setTimeout(resolve, 7_000));
      for (let i = 0; i < 8; i++) {
        const res: Response = await fetch(`${base}/healthz`);
        await res.body?.cancel();
        assert.equal(res.status, 200);
      }
    } finally {
      try {
        child.kill("SIGTERM");
      } catch {
        // ended already: its output says why
      }
    }
    const [status, out, err] = await Promise.all([
      child.status,
      stdout,
      stderr,
    ]);
    assert.doesNotMatch(`${out}\n${err}`, /cannot serve/);
    assert.equal(status.code, 0, `${out}\n${err}`);
  }),
);
