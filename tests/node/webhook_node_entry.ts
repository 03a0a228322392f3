// deno-lint-ignore-file no-console
/**
 * The webhook under real Node.js: `createApp` served by `@hono/node-server`,
 * bundled by `deno bundle --platform node` and run by
 * `webhook_node_test.ts`. Not a test itself (no `_test.ts` suffix), and never
 * run by Deno.
 *
 * Its one line on stdout is `{"port":…,"node":"v…"}` once it listens on
 * 127.0.0.1; it stops on SIGTERM, and by itself after 20 s so a test that
 * dies before killing it leaves nothing running.
 *
 * @module
 */

import { serve } from "@hono/node-server";
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";

/** The little of Node's `process` this entry uses; Deno's types do not describe it. */
interface NodeProcess {
  readonly env: Record<string, string | undefined>;
  readonly version: string;
  on(signal: "SIGTERM", listener: () => void): void;
  exit(code: number): void;
}

const process = (globalThis as unknown as { process: NodeProcess }).process;

// The test's deadline is far shorter; this only stops an orphan.
const HARD_TIMEOUT_MS = 20_000;

const store = new MemoryStore();
await store.createIntent({ id: "pi_0001", state: "created" });
const webhookSecret = process.env.WEBHOOK_SECRET;
const app = createApp({
  store,
  sender: new ScriptedSender({}),
  ...(webhookSecret === undefined ? {} : { webhookSecret }),
  random: () => 0,
});

const server = serve(
  { fetch: app.fetch, port: 0, hostname: "127.0.0.1" },
  (info) =>
    console.log(JSON.stringify({ port: info.port, node: process.version })),
);

let stopping = false;
function stop(code: number): void {
  if (stopping) return;
  stopping = true;
  clearTimeout(timer);
  // A keep-alive socket would hold close() open; the process is done anyway.
  server.close(() => process.exit(code));
  setTimeout(() => process.exit(code), 1_000);
}

const timer = setTimeout(() => stop(1), HARD_TIMEOUT_MS);
process.on("SIGTERM", () => stop(0));
