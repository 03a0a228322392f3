import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  freshSchema,
  openPostgresStore,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";

Deno.test("PostgresStore: stores made for ever new databases keep no schedule each: the process's memory stays bounded", async () => {
  // A store per request (a Worker's) whose database is named anew each
  // time would add a sweep schedule per request, kept till the process
  // ends. Measured after a garbage collection, in a process of its own
  // (the flag that allows one is V8's); no server is needed.
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-env",
      "--v8-flags=--expose-gc",
      new URL("_postgres_schedules_gc.ts", import.meta.url).pathname,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  assert.equal(code, 0, text.decode(stderr));
  const { stores, grewBytes } = JSON.parse(text.decode(stdout));
  assert.equal(stores, 25_000);
  // A schedule kept per store is over 100 bytes each: 2 MB and more.
  assert.ok(
    grewBytes < 500_000,
    `the heap grew by ${grewBytes} bytes over 20,000 stores`,
  );
});

Deno.test({
  name:
    "PostgresStore: a database's sweep schedule is kept while stores are made for it, however many other databases' stores are made after its first: the least recently made goes first",
  ignore: !postgresAvailable,
  async fn() {
    const { schema, close } = await openPostgresStore();
    let sweeps = 0;
    const client = postgres(await postgresUrl(), {
      max: 1,
      onnotice: () => {},
      debug: (_connection, query) => {
        if (query.includes("SKIP LOCKED")) sweeps++;
      },
    });
    const count = (jobId: string) =>
      new PostgresStore(client, { schema }).admit({ count: jobId, now: 1 });
    try {
      // The schedule's first counted write sweeps; the next 63 do not.
      await count("job_1");
      assert.equal(sweeps, 1);
      // As many other databases' stores as are kept, less one; a store for
      // this one again; then one more other: the oldest other goes.
      for (let i = 0; i < 63; i++) {
        new PostgresStore(client, { schema: `${freshSchema()}_other` });
      }
      new PostgresStore(client, { schema });
      new PostgresStore(client, { schema: `${freshSchema()}_other` });
      await count("job_2");
      assert.equal(sweeps, 1, "the schedule was dropped, and began again");
    } finally {
      await client.end();
      await close();
    }
  },
});
