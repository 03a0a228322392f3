/**
 * The webhook under real Node.js: `deno bundle --platform node` turns
 * `webhook_node_entry.ts` into one `.mjs`, `node` serves it through
 * `@hono/node-server` on a loopback port, and a signed delivery gets the same
 * answer `app.request` gives under Deno. This is the end-to-end test that may
 * open a socket; it is skipped only where there is no real `node` on PATH.
 * It runs on whatever Node that is, so that `deno task test` works on a
 * developer's Node 22 too; `deno task node-check` is the check that runs
 * Node 20 from PATH (refusing any other there) and pinned Node 22, 24 and 26.
 *
 * @module
 */

import assert from "node:assert/strict";
import { nodeVersion } from "../../support/node_version.ts";
import { fileURLToPath } from "node:url";
import { signHmac } from "../webhook/_signing.ts";
import { timeout } from "../_timeout.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const CONFIG = fileURLToPath(new URL("../../deno.json", import.meta.url));
const ENTRY = fileURLToPath(
  new URL("./webhook_node_entry.ts", import.meta.url),
);
const SECRET = "webhook-secret-for-node";

// Bundling, starting node and two requests take about a second; the entry
// stops itself after 20 s, so this must be shorter.
const DEADLINE_MS = 15_000;

const NODE_VERSION = await nodeVersion();

/** What the entry prints once it listens. */
interface Ready {
  readonly port: number;
  readonly node: string;
}

/** Reads up to the first newline; `null` if the stream ended (or was cancelled) first. */
async function firstLine(
  reader: ReadableStreamDefaultReader<string>,
): Promise<string | null> {
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) return null;
    text += value;
  }
  return text.slice(0, text.indexOf("\n"));
}

Deno.test({
  name:
    "createApp() serves a signed delivery under Node through @hono/node-server",
  ignore: NODE_VERSION === null,
  fn: timeout(DEADLINE_MS + 15_000, async () => {
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), DEADLINE_MS);
    const dir = await Deno.makeTempDir({ prefix: "relayer_node_" });
    let child: Deno.ChildProcess | undefined;
    let stdout: ReadableStreamDefaultReader<string> | undefined;
    let stderr: Promise<string> | undefined;
    try {
      const bundle = `${dir}/webhook.mjs`;
      const built = await new Deno.Command(Deno.execPath(), {
        args: [
          "bundle",
          "--quiet",
          "--config",
          CONFIG,
          "--platform",
          "node",
          "-o",
          bundle,
          ENTRY,
        ],
        cwd: ROOT,
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
        signal: deadline.signal,
      }).output();
      assert.equal(
        built.code,
        0,
        `deno bundle failed:\n${new TextDecoder().decode(built.stderr)}`,
      );

      child = new Deno.Command("node", {
        args: [bundle],
        cwd: dir,
        env: { WEBHOOK_SECRET: SECRET },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      stderr = new Response(child.stderr).text();
      const reader = stdout = child.stdout
        .pipeThrough(new TextDecoderStream())
        .getReader();
      // A node that never prints its port must not hang the test: the
      // deadline cancels the read, which then ends like a closed stream.
      const onAbort = () => void reader.cancel().catch(() => {});
      deadline.signal.addEventListener("abort", onAbort, { once: true });
      const line = await firstLine(reader);
      deadline.signal.removeEventListener("abort", onAbort);
      if (line === null) {
        assert.fail(
          deadline.signal.aborted
            ? `node printed no port within ${DEADLINE_MS} ms`
            : `node exited before printing its port:\n${await stderr}`,
        );
      }
      const ready = JSON.parse(line) as Ready;
      assert.ok(
        Number.isInteger(ready.port) && ready.port > 0,
        `no port in ${line}`,
      );
      assert.equal(typeof ready.node, "string");
      assert.ok(
        ready.node.startsWith("v"),
        `not a Node version: ${ready.node}`,
      );
      // The binary the probe found, not Deno's stand-in.
      assert.equal(ready.node, NODE_VERSION);

      const url = `http://127.0.0.1:${ready.port}/v1/deliveries`;
      const body = JSON.stringify({
        job: { intentId: "pi_0001", kind: "settle" },
        delivery: 1,
      });
      const signed = await fetch(url, {
        method: "POST",
        body,
        headers: {
          "content-type": "application/json",
          "x-signature": await signHmac(SECRET, body),
        },
        signal: deadline.signal,
      });
      assert.equal(signed.status, 503);
      assert.equal(signed.headers.get("retry-after"), "3");
      assert.deepEqual(await signed.json(), {
        outcome: "retry",
        job: "pi_0001/settle",
        delivery: 1,
        reason: "not authorized yet",
        delayMs: 2500,
      });

      const unsigned = await fetch(url, {
        method: "POST",
        body,
        headers: { "content-type": "application/json" },
        signal: deadline.signal,
      });
      assert.equal(unsigned.status, 401);
      assert.equal(
        unsigned.headers.get("content-type"),
        "application/problem+json",
      );
      const refusal = await unsigned.json();
      assert.equal(refusal.status, 401);
      assert.equal(refusal.title, "Unauthorized");
    } finally {
      clearTimeout(timer);
      await stdout?.cancel().catch(() => {});
      if (child) {
        try {
          child.kill("SIGTERM");
        } catch {
          // It has already exited.
        }
        await child.status;
      }
      await stderr;
      await Deno.remove(dir, { recursive: true });
    }
  }),
});
