/**
 * The ops routes on a store closed under them (the service's stop closes
 * the Deno KV handle, or the PostgresStore; a request its drain cut short
 * may still reach a route): a route whose read failed on it read nothing
 * and wrote nothing, and says so, never that its write "may have landed"
 * or that a redrive "did not complete … if it did complete after all".
 *
 * @module
 */

import assert from "node:assert/strict";
import { KvStore } from "../../store/kv.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { freshSchema, postgresAvailable, sharedClient } from "../_postgres.ts";
import { assertReadNothing } from "./_closed_store_routes.ts";

Deno.test("the ops routes on a Deno KV handle closed under the store say their read read nothing and wrote nothing: nothing changed, try again", async () => {
  const kv = await Deno.openKv(":memory:");
  const log = await assertReadNothing(new KvStore(kv), () => kv.close());
  // The log says why: the handle is closed.
  assert.match(log, /handle is closed/);
});

Deno.test({
  name:
    "the ops routes on a PostgresStore closed under them say their read read nothing and wrote nothing: nothing changed, try again",
  ignore: !postgresAvailable,
  async fn() {
    const schema = freshSchema();
    const sql = await sharedClient();
    const store = new PostgresStore(sql, { schema });
    await store.migrate();
    const log = await assertReadNothing(store, () => store.close());
    assert.match(log, /as the store is closed/);
    await sql.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
  },
});
