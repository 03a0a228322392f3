/**
 * A Deno project serves `createApp` (with `Deno.serve`, or `deno serve`)
 * under Deno's default, legacy abort behaviour, its `deno.json` setting no
 * `"unstable"` flag but Deno KV's: a delivery whose body has a
 * Content-Length (every queue's) is answered, sent and written with
 * nothing from Deno on stderr. Deno prints a warning at the answer of a
 * request whose `request.signal` was read; the webhook reads it only for a
 * chunked body, where `@hono/node-server` on Node 20 and 22 gives no other
 * sign of a client that left mid-body. Read before the answer, the signal
 * says the same under either behaviour, and nothing the delivery does
 * hangs on it: a chunked delivery is sent and written as well, Deno's
 * warning the one line on stderr (`--unstable-no-legacy-abort` silences
 * it). The project of docs/api.md's "On Deno" (whose `"unstable"` list is
 * the one README.md's Install section gives) serves such a delivery as
 * cleanly.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The `"unstable"` list README.md's Install section tells Deno users to set. */
async function readmeUnstable(): Promise<string[]> {
  const readme = await Deno.readTextFile(`${ROOT}README.md`);
  const install = readme.slice(0, readme.indexOf("\n## Try it"));
  const found = /`"unstable": (\[[^\]`]*\])`/.exec(install);
  assert.ok(found, 'README.md\'s Install section gives no "unstable" list');
  return JSON.parse(found[1]!) as string[];
}

/** The `deno.json` of docs/api.md's "On Deno" section. */
async function apiDenoJson(): Promise<
  { imports: Record<string, string>; links: string[]; unstable: string[] }
> {
  const api = await Deno.readTextFile(`${ROOT}docs/api.md`);
  const start = api.indexOf("\n## On Deno\n");
  assert.ok(start >= 0, "no section 'On Deno' in docs/api.md");
  const section = api.slice(start, api.indexOf("\n## ", start + 1));
  const blocks = [...section.matchAll(/^```json\n([^]*?)^```/gm)];
  assert.equal(blocks.length, 1, "'On Deno' has one json block");
  return JSON.parse(blocks[0]![1]!);
}

/** The webhook, and a signed delivery of a payment to it. */
const APP = `
import { MemoryStore, ScriptedSender } from "@relayer/poison";
import { createApp } from "@relayer/poison/webhook";

const secret = "local-secret-0123456789";
const store = new MemoryStore();
await store.createIntent({ id: "pi_1", state: "authorized", hold: "pending" });
const sender = new ScriptedSender({
  pi_1: { sends: [{ txHash: "0xabc" }], receipts: ["pending"] },
});
export const app = createApp({ store, sender, webhookSecret: secret });

/** Delivers pi_1's settle to port, its body chunked or of a Content-Length. */
export async function deliver(port: number, chunked: boolean): Promise<number> {
  const body = JSON.stringify({ job: { intentId: "pi_1", kind: "settle" } });
  const t = Math.floor(Date.now() / 1000);
  const key = await crypto.subtle.importKey(
    "raw",
    new TextEncoder().encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const mac = new Uint8Array(
    await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(t + "." + body)),
  );
  const v1 = Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
  const res = await fetch("http://127.0.0.1:" + port + "/v1/deliveries", {
    method: "POST",
    body: chunked ? new Blob([body]).stream() : body,
    headers: { "x-signature": "t=" + t + ",v1=" + v1 },
  });
  await res.text();
  return res.status;
}

/** The answer's status, and what the delivery sent and wrote. */
export async function outcome(status: number): Promise<string> {
  const intent = await store.getIntent("pi_1");
  return JSON.stringify({
    status,
    state: intent?.state,
    txHashes: intent?.txHashes,
  });
}
`;

/** Served with Deno.serve, then shut down: prints the outcome. */
const RUN = `
import { app, deliver, outcome } from "./app.ts";

const server = Deno.serve(
  { hostname: "127.0.0.1", port: 0, onListen() {} },
  app.fetch,
);
const status = await deliver(server.addr.port, Deno.args[0] === "chunked");
await server.shutdown();
console.log(await outcome(status));
`;

/** Served by \`deno serve\`: prints the outcome once it listens and answered. */
const SERVED = `
import { app, deliver, outcome } from "./app.ts";

export default {
  fetch: app.fetch,
  onListen({ port }: Deno.NetAddr) {
    deliver(port, false).then(outcome).then(console.log);
  },
};
`;

/** The outcome every delivery here has: answered, sent once, written. */
const SETTLING = { status: 503, state: "settling", txHashes: ["0xabc"] };

/** Deno's line for a request whose signal was read, under legacy abort. */
const LEGACY_WARNING =
  /^Deno\.serve: request\.signal aborts on successful responses \(legacy behavior\)\. .*--unstable-no-legacy-abort.*\n$/;

/**
 * Runs a project of `deno.json` in a new folder, as `how` says: a
 * delivery served with `Deno.serve` (`run`, its body chunked or of a
 * Content-Length) or by `deno serve` (stopped by SIGTERM once answered);
 * the delivery's outcome and the process's stderr.
 */
async function serveOnce(
  denoJson: Record<string, unknown>,
  how: "run" | "run chunked" | "deno serve",
  flags: string[] = [],
): Promise<{ outcome: unknown; stderr: string }> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_deno_serve_" });
  try {
    await Deno.writeTextFile(`${dir}/deno.json`, JSON.stringify(denoJson));
    await Deno.writeTextFile(`${dir}/app.ts`, APP);
    await Deno.writeTextFile(`${dir}/run.ts`, RUN);
    await Deno.writeTextFile(`${dir}/served.ts`, SERVED);
    const args = how === "deno serve"
      ? ["serve", "--quiet", ...flags, "--host", "127.0.0.1", "--port", "0"]
      : ["run", "--quiet", ...flags];
    args.push("--allow-net=127.0.0.1");
    if (how === "deno serve") args.push("served.ts");
    else args.push("run.ts", how === "run chunked" ? "chunked" : "length");
    const child = new Deno.Command(Deno.execPath(), {
      args,
      cwd: dir,
      env: { ...Deno.env.toObject(), NO_COLOR: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const stderr = new Response(child.stderr).text();
    let out = "";
    const decoder = new TextDecoder();
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    try {
      for await (const chunk of child.stdout) {
        out += decoder.decode(chunk, { stream: true });
        // deno serve runs until stopped: stopped once it printed the outcome.
        if (how === "deno serve" && out.includes("\n")) {
          child.kill("SIGTERM");
        }
      }
      const { code } = await child.status;
      const err = await stderr;
      assert.equal(code, 0, `${how}: ${err}`);
      return { outcome: JSON.parse(out), stderr: err };
    } finally {
      clearTimeout(timer);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A project importing this package from its clone (Deno's `links`). */
async function project(unstable: string[]): Promise<Record<string, unknown>> {
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)) as {
    version: string;
  };
  return {
    imports: { "@relayer/poison": `jsr:@relayer/poison@^${config.version}` },
    links: [ROOT],
    unstable,
  };
}

Deno.test('a project whose deno.json sets only "unstable": ["kv"] serves a delivery of a Content-Length with Deno.serve and deno serve: sent and written, nothing on stderr', async () => {
  const denoJson = await project(["kv"]);
  for (const how of ["run", "deno serve"] as const) {
    const { outcome, stderr } = await serveOnce(denoJson, how);
    assert.deepEqual(outcome, SETTLING, how);
    assert.equal(stderr, "", `${how}: the service's stderr`);
  }
});

Deno.test("a chunked delivery, whose signal the webhook reads, is sent and written under Deno's legacy abort as under the new: Deno's warning is all it adds, and --unstable-no-legacy-abort silences it", async () => {
  const denoJson = await project(["kv"]);
  const legacy = await serveOnce(denoJson, "run chunked");
  assert.deepEqual(legacy.outcome, SETTLING);
  assert.match(legacy.stderr, LEGACY_WARNING);
  const opted = await serveOnce(denoJson, "run chunked", [
    "--unstable-no-legacy-abort",
  ]);
  assert.deepEqual(opted.outcome, SETTLING);
  assert.equal(opted.stderr, "", "stderr with --unstable-no-legacy-abort");
});

Deno.test("a Deno project set up as docs/api.md and README.md say serves a signed delivery with Deno.serve and deno serve with no warning from Deno", async () => {
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)) as {
    version: string;
  };
  const documented = await apiDenoJson();
  assert.deepEqual(
    documented.unstable,
    await readmeUnstable(),
    "README's list",
  );
  assert.equal(
    documented.imports["@relayer/poison"],
    `jsr:@relayer/poison@^${config.version}`,
  );
  assert.equal(documented.links.length, 1, "one clone linked");
  for (const how of ["run", "deno serve"] as const) {
    const { outcome, stderr } = await serveOnce(
      { ...documented, links: [ROOT] },
      how,
    );
    assert.deepEqual(outcome, SETTLING, how);
    assert.equal(stderr, "", `${how}: the service's stderr`);
  }
});
