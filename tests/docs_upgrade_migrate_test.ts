/**
 * The script docs/upgrading.md gives for migrating as the schema's owner
 * before a rollout ("PostgreSQL: migrate first, as the schema's owner")
 * runs as written on a real server: it migrates the schema and its
 * process exits, as a step of a deploy pipeline must.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { freshDatabase, postgresAvailable } from "./_postgres.ts";

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

Deno.test({
  name:
    "docs/upgrading.md's migration as the schema's owner migrates and exits",
  ignore: !postgresAvailable,
  async fn() {
    const blocks = await migrateBlocks();
    assert.equal(blocks.length, 1, "no ts block in the section");
    const dir = await Deno.makeTempDir();
    const database = await freshDatabase();
    try {
      const file = `${dir}/migrate.ts`;
      await Deno.writeTextFile(file, blocks[0]!);
      const started = performance.now();
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
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
      await Deno.remove(dir, { recursive: true });
    }
  },
});
