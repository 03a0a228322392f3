/**
 * Every npm package the checks and benches install is locked whole: each
 * pin has a committed lock naming it, with an integrity hash for every
 * package of its tree, and nothing else is locked; an install goes through
 * `npm ci` on that lock, again only when the lock changed.
 */
import assert from "node:assert/strict";
import { BUN_VERSION } from "../../tools/bun_check.ts";
import { DEPLOY_DENO_VERSION } from "../../tools/deploy_check.ts";
import { MINIFLARE_VERSION } from "../../tools/worker_check.ts";
import { WRANGLER_VERSION } from "../../tools/wrangler_check.ts";
import {
  BUN_INIT_TYPESCRIPT_VERSION,
  BUN_TYPES_VERSION,
  NODE_TYPES_VERSION,
  TYPESCRIPT_VERSION,
  WORKERS_TYPES_VERSION,
} from "../../tools/_worker_tsc.ts";
import { PINNED_NODES } from "../../support/node_version.ts";
import {
  lockedInstall,
  lockPath,
  LOCKS_DIR,
  manifestOf,
} from "../../support/npm_lock.ts";

const ROOT = new URL("../../", import.meta.url);

async function pins(): Promise<string[]> {
  const config = JSON.parse(
    await Deno.readTextFile(new URL("deno.json", ROOT)),
  );
  const kv = /^npm:(@deno\/kv@.+)$/.exec(config.imports["@deno/kv"])?.[1];
  const bench = await Deno.readTextFile(new URL("bench/_serve.ts", ROOT));
  const autocannon = /const AUTOCANNON = "(autocannon@[^"]+)"/.exec(bench)
    ?.[1];
  assert.ok(kv && autocannon, "the @deno/kv and autocannon pins are found");
  return [
    `bun@${BUN_VERSION}`,
    `miniflare@${MINIFLARE_VERSION}`,
    `wrangler@${WRANGLER_VERSION}`,
    // tsc under Cloudflare's types (tests/cloudflare/worker_types_test.ts).
    `typescript@${TYPESCRIPT_VERSION}`,
    `@cloudflare/workers-types@${WORKERS_TYPES_VERSION}`,
    `@types/node@${NODE_TYPES_VERSION}`,
    // tsc under Bun's types (tests/bun_types_test.ts), and bun init's.
    `@types/bun@${BUN_TYPES_VERSION}`,
    `typescript@${BUN_INIT_TYPESCRIPT_VERSION}`,
    kv,
    autocannon,
    // deploy-check's Deno, npm's binary for the one platform it runs on.
    `@deno/linux-x64-glibc@${DEPLOY_DENO_VERSION}`,
    // node-check's Nodes: each pin's binary, on each platform npm has it for.
    ...PINNED_NODES.flatMap((pin) =>
      pin.platforms.map((platform) => `node-${platform}@${pin.version}`)
    ),
  ];
}

function split(spec: string): [string, string] {
  const at = spec.lastIndexOf("@");
  return [spec.slice(0, at), spec.slice(at + 1)];
}

Deno.test("every pinned npm package has a committed lock of its whole tree, and no lock is left without a pin", async () => {
  const expected = await pins();
  for (const spec of expected) {
    const [name, version] = split(spec);
    const lock = JSON.parse(await Deno.readTextFile(lockPath(name, version)));
    assert.equal(lock.lockfileVersion, 3, spec);
    assert.deepEqual(lock.packages[""].dependencies, { [name]: version }, spec);
    assert.equal(lock.packages[`node_modules/${name}`].version, version, spec);
    for (const [path, entry] of Object.entries(lock.packages)) {
      if (path === "") continue;
      assert.match(
        (entry as { integrity?: string }).integrity ?? "",
        /^sha512-/,
        `${spec}: ${path} has no integrity hash`,
      );
    }
  }
  const files: string[] = [];
  for await (const entry of Deno.readDir(LOCKS_DIR)) files.push(entry.name);
  assert.deepEqual(
    files.sort(),
    expected.map((spec) => lockPath(...split(spec)).slice(LOCKS_DIR.length))
      .sort(),
  );
});

Deno.test("lockedInstall() readies a folder for npm ci, skips a tree installed from the same lock, and refuses a pin with no lock", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_npm_lock_" });
  try {
    const [name, version] = split(`bun@${BUN_VERSION}`);
    const args = await lockedInstall(name, version, `${dir}/bun`);
    assert.deepEqual(args?.slice(0, 3), ["ci", "--prefix", `${dir}/bun`]);
    assert.equal(
      await Deno.readTextFile(`${dir}/bun/package-lock.json`),
      await Deno.readTextFile(lockPath(name, version)),
    );
    assert.equal(
      await Deno.readTextFile(`${dir}/bun/package.json`),
      manifestOf(name, version),
    );
    // What npm ci leaves once it completed.
    await Deno.mkdir(`${dir}/bun/node_modules`);
    await Deno.writeTextFile(
      `${dir}/bun/node_modules/.package-lock.json`,
      "{}",
    );
    assert.equal(await lockedInstall(name, version, `${dir}/bun`), null);
    // A tree from another lock (an older pin's) is installed afresh.
    await Deno.writeTextFile(`${dir}/bun/package-lock.json`, "{}");
    assert.notEqual(await lockedInstall(name, version, `${dir}/bun`), null);

    await assert.rejects(
      lockedInstall("bun", "0.0.1", `${dir}/old`),
      /no committed npm lock for bun@0\.0\.1 .*: run deno task npm-locks bun@0\.0\.1, review the lock and commit it/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
