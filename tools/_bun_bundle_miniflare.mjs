// docs/queues.md's Worker bundled by `bun build` (no Wrangler), given to
// Miniflare as the docs say, for `deno task bun-check`: the options come
// in as JSON (MINIFLARE_OPTIONS: bindings, queueProducers and
// queueConsumers, what `tools/bun_check.ts` read from wrangler.toml), the
// bundle is SCRIPT. It prints `ready <url>` once Miniflare serves, and
// stops it when its stdin ends. Runs under Node beside the cached
// miniflare's node_modules (worker-check's pin).

// deno-lint-ignore-file no-console
// By name, from the cache's node_modules beside it (not deno.json's
// imports, which `deno task check` resolves a literal against).
const MINIFLARE = "miniflare";
const { Miniflare } = await import(MINIFLARE);

const options = JSON.parse(process.env.MINIFLARE_OPTIONS ?? "{}");
let mf;
try {
  mf = new Miniflare({
    modules: true,
    scriptPath: process.env.SCRIPT,
    compatibilityDate: process.env.COMPAT_DATE,
    compatibilityFlags: ["nodejs_compat"],
    host: "127.0.0.1",
    port: 0,
    ...options,
  });
  const url = await mf.ready;
  console.log(`ready ${url.href.replace(/\/$/, "")}`);
} catch (error) {
  console.error(
    `bun-check: Miniflare did not start the bundle: ${
      String(error instanceof Error ? error.message : error).split("\n")[0]
    }`,
  );
  await mf?.dispose().catch(() => {});
  process.exit(1);
}
process.stdin.resume();
process.stdin.on("end", () => {
  mf.dispose().then(() => process.exit(0), () => process.exit(1));
});
