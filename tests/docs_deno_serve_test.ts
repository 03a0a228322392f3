/**
 * A Deno project set up as docs/api.md's "On Deno" says (its `deno.json`,
 * whose `links` then name this repository, and whose `"unstable"` list is
 * the one README.md's Install section gives) serves `createApp` with
 * `Deno.serve` and takes a signed delivery without a warning from Deno on
 * its stderr: the app reads `request.signal` as it reads a body, which
 * Deno's legacy abort behaviour answers with a line telling the user to
 * move a cleanup they never wrote.
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

const SERVICE = `
import { MemoryStore, ScriptedSender } from "@relayer/poison";
import { createApp } from "@relayer/poison/webhook";

const secret = "local-secret-0123456789";
const store = new MemoryStore();
await store.createIntent({ id: "pi_1", state: "authorized", hold: "pending" });
const sender = new ScriptedSender({
  pi_1: { sends: [{ txHash: "0xabc" }], receipts: ["pending"] },
});
const app = createApp({ store, sender, webhookSecret: secret });
const server = Deno.serve(
  { hostname: "127.0.0.1", port: 0, onListen() {} },
  app.fetch,
);
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
const res = await fetch("http://127.0.0.1:" + server.addr.port + "/v1/deliveries", {
  method: "POST",
  body,
  headers: { "x-signature": "t=" + t + ",v1=" + v1 },
});
await res.text();
await server.shutdown();
console.log(res.status);
`;

Deno.test("a Deno project set up as docs/api.md and README.md say serves a signed delivery with no warning from Deno", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_deno_serve_" });
  try {
    const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)) as {
      version: string;
    };
    const project = await apiDenoJson();
    assert.deepEqual(project.unstable, await readmeUnstable(), "README's list");
    assert.equal(
      project.imports["@relayer/poison"],
      `jsr:@relayer/poison@^${config.version}`,
    );
    assert.equal(project.links.length, 1, "one clone linked");
    await Deno.writeTextFile(
      `${dir}/deno.json`,
      JSON.stringify({ ...project, links: [ROOT] }),
    );
    await Deno.writeTextFile(`${dir}/service.ts`, SERVICE);
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--quiet", "--allow-net=127.0.0.1", "service.ts"],
      cwd: dir,
      env: { ...Deno.env.toObject(), NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(stdout);
    const err = new TextDecoder().decode(stderr);
    assert.equal(code, 0, err);
    assert.equal(out.trim(), "503", "the delivery's status");
    assert.equal(err, "", "the service's stderr");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
