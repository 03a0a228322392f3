/**
 * The script docs/upgrading.md gives for migrating as the schema's owner
 * before a rollout ("PostgreSQL: migrate first, as the schema's owner")
 * runs as written on a real server: it migrates the schema and its
 * process exits, as a step of a deploy pipeline must. And the lines it
 * quotes as new in the local queue's log are the lines it writes. And
 * the one docs/queues.md gives a Worker's project runs as the file it is
 * saved as, under each runner named, and migrates and exits too.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { freshDatabase, postgresAvailable } from "./_postgres.ts";
import {
  localQueueConsumer,
  type LocalQueueMessage,
} from "../webhook/_local_queue.ts";
import { DEFAULT_POLICY, type Outcome } from "../mod.ts";

const ROOT = new URL("../", import.meta.url);

/** The `ts` blocks of docs/upgrading.md's PostgreSQL section. */
async function migrateBlocks(): Promise<string[]> {
  const text = await Deno.readTextFile(new URL("docs/upgrading.md", ROOT));
  const start = text.indexOf("\n## PostgreSQL: migrate first");
  assert.ok(start >= 0, "no section 'PostgreSQL: migrate first' found");
  const end = text.slice(start + 1).search(/\n## /);
  const section = text.slice(start, end < 0 ? undefined : start + 1 + end);
  return [...section.matchAll(/^ *```ts\b[^\n]*\n([^]*?)^ *```/gm)].map((m) =>
    m[1]!.replace(/^ {2}/gm, "")
  );
}

/**
 * Runs the migration script `file` under Deno (this repo's config, with
 * `permissions`) against a fresh database, as a deploy step would: it
 * must exit 0 within 30 s (it is killed then), the store's schema made.
 */
async function migratesAndExits(
  file: string,
  permissions: string[],
): Promise<void> {
  const database = await freshDatabase();
  try {
    const started = performance.now();
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        ...permissions,
        "--config",
        new URL("deno.json", ROOT).pathname,
        file,
      ],
      env: { DATABASE_URL: database.url },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    const { code, stderr } = await child.output();
    clearTimeout(timer);
    const seconds = (performance.now() - started) / 1000;
    assert.equal(
      code,
      0,
      `exit ${code} after ${seconds.toFixed(1)}s (killed at 30 s): ${
        new TextDecoder().decode(stderr)
      }`,
    );
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      const [row] = await sql`
        SELECT to_regclass('relayer.intents') IS NOT NULL AS migrated`;
      assert.equal(row!.migrated, true, "no relayer.intents after it ran");
    } finally {
      await sql.end();
    }
  } finally {
    await database.drop();
  }
}

Deno.test({
  name:
    "docs/upgrading.md's migration as the schema's owner migrates and exits",
  ignore: !postgresAvailable,
  async fn() {
    const blocks = await migrateBlocks();
    assert.equal(blocks.length, 1, "no ts block in the section");
    const dir = await Deno.makeTempDir();
    try {
      const file = `${dir}/migrate.ts`;
      await Deno.writeTextFile(file, blocks[0]!);
      await migratesAndExits(file, ["-A"]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("the local queue's lines docs/upgrading.md quotes for a message delivered again are the lines it writes", async () => {
  const text = (await Deno.readTextFile(new URL("docs/upgrading.md", ROOT)))
    .replace(/\n\s*/g, " ");
  const quoted = [...text.matchAll(/`(queue {3}message <id> [^`]*)`/g)].map((
    m,
  ) => m[1]!);
  assert.ok(quoted.length > 0, "docs/upgrading.md quotes no such line");
  // A message delivered again while its first delivery runs, then after
  // that delivery ended: as Deno KV puts a running message back.
  const job = { intentId: "pi_0001", kind: "settle" } as const;
  let release = () => {};
  const released = new Promise<void>((resolve) => release = resolve);
  const lines: string[] = [];
  const consume = localQueueConsumer({
    relayer: {
      policy: DEFAULT_POLICY,
      deliver: async (): Promise<Outcome> => {
        await released;
        return {
          action: "retry",
          delivery: 1,
          delayMs: 5_000,
          reason: "sent 0x1, waiting for confirmation",
        };
      },
      keepUnreadable: () => Promise.reject(new Error("not a message of it")),
    } as unknown as Parameters<typeof localQueueConsumer>[0]["relayer"],
    enqueue: () => Promise.resolve(),
    log: (line) => void lines.push(line),
  });
  const message: LocalQueueMessage = { job, id: "<id>" };
  const first = consume(message);
  const copy = consume(message);
  release();
  await Promise.all([first, copy]);
  await consume(message);
  const again = lines.filter((line) => line.startsWith("queue   message "));
  assert.equal(again.length, 2, lines.join("\n"));
  for (const quote of quoted) {
    const parts = quote.split("…").map((part) => part.trim());
    assert.ok(
      again.some((line) =>
        parts.length === 1
          ? line === quote
          : parts.every((part, i) =>
            i === 0 ? line.startsWith(part) : line.includes(part)
          )
      ),
      `docs/upgrading.md quotes\n  ${quote}\nwhere the local queue writes\n  ${
        again.join("\n  ")
      }`,
    );
  }
});

Deno.test({
  name:
    "docs/queues.md's migration for a Worker is saved as an .mts, which each runner it names runs, and it migrates and exits",
  ignore: !postgresAvailable,
  async fn() {
    const text = await Deno.readTextFile(new URL("docs/queues.md", ROOT));
    const start = text.indexOf("### Deploying to Cloudflare the first time");
    assert.ok(start >= 0, "docs/queues.md lost its first-deploy heading");
    const section = text.slice(start).split(/\n#{2,3} /)[0]!;
    const block = [...section.matchAll(/^ *```ts\b[^\n]*\n([^]*?)^ *```/gm)]
      .map((m) => m[1]!.replace(/^ {3}/gm, ""))
      .find((code) => code.includes(".migrate()"));
    assert.ok(block, "no migration script in the first-deploy steps");
    const prose = section.replace(/\s+/g, " ");
    const saved = /save the script below as `([^`]+)`/.exec(prose)?.[1];
    assert.ok(saved, "the steps name no file to save the script as");
    // It awaits at its top level: tsx takes a .ts file of a project without
    // "type": "module" (as npm init makes it) as CommonJS and refuses that;
    // an .mts file is an ES module whatever the project says.
    assert.match(block, /^ *await /m);
    assert.match(saved, /\.mts$/, `saved as ${saved}`);
    const runs = [
      ...prose.matchAll(/`((?:bun|npx tsx|deno run)[^`]*?) ([\w.]+)`/g),
    ];
    assert.deepEqual(
      runs.map((m) => m[2]),
      ["migrate.mts", "migrate.mts", "migrate.mts"],
      "each runner runs the file saved",
    );
    const dir = await Deno.makeTempDir();
    try {
      const file = `${dir}/${saved}`;
      await Deno.writeTextFile(file, block);
      await migratesAndExits(file, [
        "--allow-net",
        "--allow-env",
        "--allow-read",
      ]);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
