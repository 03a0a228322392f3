/**
 * docs/api.md's table of exports names every option each call reads, as
 * the call's own refusal of a misspelt one lists them: the table is where
 * an adopter looks them up, and it gave `deliver(job, delivery?)`,
 * `giveUp(job, { deliveries, queue })`, `redrive(jobId, options?)`,
 * `googleJwks()` and `routeOptions(config)`, leaving out `deliver`'s
 * `message` (what keeps a late copy of a message the queue gave up on from
 * sending), `claim` and `countAs`, `giveUp`'s `claim`, `redrive`'s two,
 * `googleJwks`'s three, `routeOptions`' `jwks` and `migrate()`'s `waitMs`;
 * and it gave `createApp(deps)`, whose `maxBodyBytes`, `bodyTimeoutMs` and
 * `insecureDev` only its JSDoc named. And where the prose of the README or
 * `docs/` writes out a call that reads `localRun`, it passes it: a Node or
 * Bun service's refusal names its own command only when given it, and
 * `docs/webhook.md` wrote `offLoopbackRefusal(config, hostname)` for them.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import {
  createRelayer,
  decide,
  HttpSender,
  MemoryStore,
  ScriptedSender,
} from "../mod.ts";
import { createQueueHandler } from "../cloudflare/queue_handler.ts";
import { KvStore } from "../store/kv.ts";
import { moveKvToPostgres } from "../store/kv_to_postgres.ts";
import { PostgresStore } from "../store/postgres.ts";
import { storeContract } from "../testing/store_contract.ts";
import {
  createApp,
  googleJwks,
  loadConfig,
  offLoopbackRefusal,
  qstashPublisher,
  routeOptions,
  workerConfig,
} from "../webhook/app.ts";

const ROOT = new URL("../", import.meta.url);
const BOGUS = { notAnOption: 1 };
const ENV = {
  SENDER_URL: "http://127.0.0.1:9",
  WEBHOOK_SECRET: "a-webhook-secret-16",
  CLOUDFLARE_MAX_RETRIES: "9",
};

/** The options a call's refusal of an unknown one says it reads. */
async function optionsOf(call: () => unknown): Promise<string[]> {
  try {
    await call();
  } catch (error) {
    const listed = /is not one of its options \(([^)]*)\)/.exec(
      (error as Error).message,
    );
    assert.ok(listed, String(error));
    return listed[1]!.split(", ").sort();
  }
  assert.fail("it took an option it does not read");
}

/** The options api.md's table gives `call` in its last `{ … }`, if it shows it. */
function documented(table: string, call: string): string[] | undefined {
  const start = table.search(new RegExp(`[\`.]${call}\\(`));
  if (start < 0) return undefined;
  const open = table.indexOf("(", start);
  let depth = 0;
  let end = open;
  for (; end < table.length; end++) {
    if (table[end] === "(") depth++;
    if (table[end] === ")" && --depth === 0) break;
  }
  const args = table.slice(open + 1, end);
  const braces = args.lastIndexOf("{");
  if (braces < 0) return [];
  return [...args.slice(braces).matchAll(/(\w+)\??/g)].map((m) => m[1]!)
    .sort();
}

Deno.test("docs/api.md's table names every option each call reads, and no other", async () => {
  const api = await Deno.readTextFile(new URL("docs/api.md", ROOT));
  const table = api.slice(
    api.indexOf("| export"),
    api.indexOf("\n## ", api.indexOf("| export")),
  );
  const store = new MemoryStore();
  const sender = new ScriptedSender({});
  const relayer = createRelayer({ store, sender });
  const job = { intentId: "pi_1", kind: "settle" } as const;
  // Never connects: postgres.js opens a connection on the first query.
  const sql = postgres("postgres://user@127.0.0.1:9/db", { max: 1 });
  const kv = await Deno.openKv(":memory:");
  const config = loadConfig(ENV);
  const calls: Record<string, () => unknown> = {
    decide: () => decide(new Error("x"), 1, undefined, BOGUS as never),
    createRelayer: () => createRelayer({ store, sender, ...BOGUS } as never),
    deliver: () => relayer.deliver(job, 1, BOGUS as never),
    giveUp: () =>
      relayer.giveUp(job, {
        deliveries: 1,
        queue: { queue: "qstash", messageId: "m" },
        ...BOGUS,
      } as never),
    redrive: () => relayer.redrive("pi_1/settle", BOGUS as never),
    discard: () => relayer.discard("pi_1/settle", BOGUS as never),
    HttpSender: () => new HttpSender({ url: "http://x", ...BOGUS } as never),
    PostgresStore: () => new PostgresStore(sql, BOGUS as never),
    migrate: () => new PostgresStore(sql).migrate(BOGUS as never),
    KvStore: () => new KvStore(kv, BOGUS as never),
    moveKvToPostgres: () => moveKvToPostgres(kv, sql, BOGUS as never),
    createApp: () => createApp({ store, sender, ...BOGUS } as never),
    routeOptions: () => routeOptions(config, BOGUS as never),
    loadConfig: () => loadConfig(ENV, BOGUS as never),
    offLoopbackRefusal: () =>
      offLoopbackRefusal(config, "0.0.0.0", BOGUS as never),
    workerConfig: () => workerConfig(ENV, BOGUS as never),
    qstashPublisher: () =>
      qstashPublisher({
        token: "t",
        publicUrl: "https://x.example",
        retries: 3,
        ...BOGUS,
      } as never),
    googleJwks: () => googleJwks(BOGUS as never),
    createQueueHandler: () =>
      createQueueHandler({ relayer, deadLetterQueue: "d", ...BOGUS } as never),
    storeContract: () =>
      storeContract("x", () => Promise.resolve({ store }) as never, {
        test: () => {},
        ...BOGUS,
      } as never),
  };
  const wrong: string[] = [];
  try {
    for (const [call, run] of Object.entries(calls)) {
      const read = await optionsOf(run);
      const shown = documented(table, call);
      if (shown === undefined) wrong.push(`${call}: not shown`);
      else if (read.join() !== shown.join()) {
        wrong.push(
          `${call}: reads ${read.join(", ")}; shown ${shown.join(", ")}`,
        );
      }
    }
  } finally {
    kv.close();
    await sql.end();
  }
  assert.deepEqual(wrong, []);
});

Deno.test("the README's and docs' prose writes each call that reads localRun with it", async () => {
  const api = await Deno.readTextFile(new URL("docs/api.md", ROOT));
  const table = api.slice(
    api.indexOf("| export"),
    api.indexOf("\n## ", api.indexOf("| export")),
  );
  // The calls whose refusals name the service's own command (the test above
  // holds the table to what each reads): without `localRun` they name
  // `deno task start`, which only main.ts runs, and main.ts passes none.
  const named = [...table.matchAll(/[`.](\w+)\([^`|]*\blocalRun\?/g)]
    .map((m) => m[1]!);
  assert.deepEqual(named.sort(), ["loadConfig", "offLoopbackRefusal"]);
  const files = ["README.md"];
  for await (const entry of Deno.readDir(new URL("docs/", ROOT))) {
    if (entry.name.endsWith(".md")) files.push(`docs/${entry.name}`);
  }
  const wrong: string[] = [];
  for (const file of files.sort()) {
    const text = await Deno.readTextFile(new URL(file, ROOT));
    // Prose only: a fenced block's calls are run by `deno task snippets`.
    const prose = text.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, "");
    for (const [span, name, args] of prose.matchAll(/`(\w+)\(([^`]*)\)`/g)) {
      // `loadConfig()` names the call, not a form of it.
      if (!named.includes(name!) || args!.trim() === "") continue;
      if (!/\blocalRun\b/.test(args!)) wrong.push(`${file}: ${span}`);
    }
  }
  assert.deepEqual(wrong, []);
});
