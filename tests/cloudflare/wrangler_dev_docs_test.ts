import assert from "node:assert/strict";

const docs = await Deno.readTextFile(
  new URL("../../docs/queues.md", import.meta.url),
);
const worker = await Deno.readTextFile(
  new URL("../../examples/cloudflare/postgres_worker.ts", import.meta.url),
);

/** The `[[hyperdrive]]` table docs/queues.md tells the reader to add. */
const hyperdrive = /```toml\n *\[\[hyperdrive\]\]\n *binding = "(\w+)"\n/
  .exec(docs);
/** The paragraph on running the Worker with `wrangler dev`. */
const localRun = /^To try the Worker on your machine[\s\S]*?\n\n/m.exec(docs)
  ?.[0].replaceAll(/\s+/g, " ");

Deno.test("docs/queues.md binds Hyperdrive under the name postgres_worker.ts reads", () => {
  assert.ok(hyperdrive, "docs/queues.md lost its [[hyperdrive]] block");
  assert.match(worker, new RegExp(`\\b${hyperdrive[1]}\\?: \\{`));
});

Deno.test("docs/queues.md's wrangler dev run says how to give a bound Hyperdrive its local database", () => {
  // With [[hyperdrive]] bound, `wrangler dev` (4.116.0) stops before the
  // Worker runs: "When developing locally, you should use a local Postgres
  // connection string to emulate Hyperdrive functionality. … set the value
  // of the 'CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE'
  // variable or "HYPERDRIVE"'s "localConnectionString" …". It reads that
  // variable from the environment or `.env`, not from `.dev.vars`, and
  // Miniflare refuses a URL without a password ("You must provide a
  // password").
  assert.ok(localRun, "docs/queues.md lost its wrangler dev paragraph");
  const name = `CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_${
    hyperdrive![1]
  }`;
  assert.ok(
    localRun.includes(name),
    `the wrangler dev paragraph does not name ${name}, without which wrangler dev refuses to start with Hyperdrive bound`,
  );
  assert.match(localRun, /`\.env`/, "it must say the variable goes in .env");
  assert.match(localRun, /password/, "it must say the URL needs a password");
  assert.match(localRun, /localConnectionString/);
});
