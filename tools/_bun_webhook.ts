/**
 * The webhook under real Bun: `createApp` served by `Bun.serve`, bundled by
 * `deno bundle` into one file (Bun ignores `deno.json`'s import map and
 * `npm:` specifiers) and run by `tools/bun_check.ts`. It sends itself two
 * signed deliveries over the socket (QStash's JWT, and the generic route's
 * `t=…,v1=…` HMAC), prints one JSON line per answer, and exits 0 when both
 * are the expected retry.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { MemoryStore, ScriptedSender } from "../mod.ts";
import { createApp } from "../webhook/app.ts";
import { signGeneric, signQStash } from "./_sign.ts";

/** The little of Bun this entry uses; Deno's types do not describe it. */
interface BunLike {
  readonly version: string;
  serve(options: {
    port: number;
    hostname: string;
    fetch: (request: Request) => Response | Promise<Response>;
  }): { readonly port: number; stop(force?: boolean): void };
}

const bun = (globalThis as unknown as { Bun?: BunLike }).Bun;
if (!bun) throw new Error("not running under Bun");

const SECRET = "bun-check-secret-0123456789";
const QSTASH_KEY = "sig_current_0123456789abcdef";
const QSTASH_URL = "https://relayer.example.test/v1/qstash";

const store = new MemoryStore();
await store.createIntent({ id: "pi_0001", state: "created" });
const app = createApp({
  store,
  sender: new ScriptedSender({}),
  webhookSecret: SECRET,
  qstash: {
    currentSigningKey: QSTASH_KEY,
    nextSigningKey: "sig_next_0123456789abcdef",
    url: QSTASH_URL,
  },
  random: () => 0,
});
const server = bun.serve({ port: 0, hostname: "127.0.0.1", fetch: app.fetch });
const base = `http://127.0.0.1:${server.port}`;

let ok = true;
async function expectRetry(route: string, init: RequestInit): Promise<void> {
  const res = await fetch(`${base}${route}`, { method: "POST", ...init });
  const body = await res.json() as { outcome?: string; reason?: string };
  const pass = res.status === 503 && res.headers.get("retry-after") === "3" &&
    body.outcome === "retry" && body.reason === "not authorized yet";
  ok &&= pass;
  console.log(
    JSON.stringify({
      bun: bun!.version,
      route,
      status: res.status,
      body,
      pass,
    }),
  );
}

try {
  const job = JSON.stringify({ intentId: "pi_0001", kind: "settle" });
  await expectRetry("/v1/qstash", {
    body: job,
    headers: {
      "upstash-signature": await signQStash(job, QSTASH_URL, QSTASH_KEY),
    },
  });
  const delivery = JSON.stringify({
    job: { intentId: "pi_0001", kind: "settle" },
    delivery: 1,
  });
  await expectRetry("/v1/deliveries", {
    body: delivery,
    headers: { "x-signature": await signGeneric(delivery, SECRET) },
  });
} finally {
  server.stop(true);
}
(globalThis as unknown as { process: { exit(code: number): never } }).process
  .exit(ok ? 0 : 1);
