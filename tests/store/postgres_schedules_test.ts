import assert from "node:assert/strict";

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
