/**
 * The write by hand docs/postgres.md shows ("Writing by hand") does what
 * the text around it says, on a real server with the schema's guard: it
 * lands (the guard leaves unmarked statements alone), and it moves the
 * intent's version with its hold, so a write of the relayer that read
 * the intent before it finds the version moved and writes nothing.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ConflictError } from "../store/conflict_error.ts";
import { PostgresStore } from "../store/postgres.ts";
import {
  afterFirstRead,
  connect,
  onFreshSchema,
  postgresAvailable,
  serverUpFirst,
} from "./_postgres.ts";

/** The `sql` blocks of docs/postgres.md's section "Writing by hand". */
async function byHandBlocks(): Promise<string[]> {
  const text = await Deno.readTextFile(
    new URL("../docs/postgres.md", import.meta.url),
  );
  const start = text.indexOf("\n### Writing by hand\n");
  assert.ok(start >= 0, "no section 'Writing by hand' in docs/postgres.md");
  const end = text.slice(start + 1).search(/\n##+ /);
  const section = text.slice(start, end < 0 ? undefined : start + 1 + end);
  return [...section.matchAll(/^```sql\n([^]*?)^```/gm)].map((m) => m[1]!);
}

serverUpFirst();

Deno.test({
  name:
    "docs/postgres.md's write by hand lands, and a relayer write that read the intent before it writes nothing",
  ignore: !postgresAvailable,
  fn: onFreshSchema({}, async ({ schema, sql }) => {
    const blocks = await byHandBlocks();
    assert.equal(blocks.length, 1, `${blocks.length} sql blocks`);
    const byHand = blocks[0]!.replaceAll("relayer.", `"${schema}".`);
    assert.match(byHand, /'pi_1'/, "the block names no intent pi_1");
    const store = new PostgresStore(sql, { schema });
    const { version } = await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    // The relayer's move to settling reads the intent (hold pending); the
    // write by hand lands before its flight, as psql sends it: one simple
    // query on a session of its own.
    const psql = await connect(1);
    try {
      const racing = new PostgresStore(
        afterFirstRead(sql, async () => {
          await psql.unsafe(byHand);
        }),
        { schema },
      );
      await assert.rejects(
        racing.transition("pi_1", {
          from: "authorized",
          to: "settling",
          at: 1,
          version,
        }),
        ConflictError,
      );
    } finally {
      await psql.end();
    }
    const after = await store.getIntent("pi_1");
    assert.equal(after?.state, "authorized");
    assert.equal(after?.hold, "voided");
    assert.notEqual(after?.version, version);
  }),
});
