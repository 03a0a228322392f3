import assert from "node:assert/strict";
import { runDemo } from "../../examples/poison_job.ts";
import { KvStore } from "../../store/kv.ts";

const golden = await Deno.readTextFile(
  new URL("../../testdata/poison_job.golden.txt", import.meta.url),
);

Deno.test("examples/poison_job.ts prints the golden output byte for byte", async () => {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--config",
      new URL("../../deno.json", import.meta.url).pathname,
      "examples/poison_job.ts",
    ],
    cwd: new URL("../..", import.meta.url).pathname,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(new TextDecoder().decode(stderr), "");
  assert.equal(code, 0);
  assert.equal(new TextDecoder().decode(stdout), golden);
});

Deno.test("runDemo() replays the same history every time (injected clock and random)", async () => {
  assert.equal((await runDemo()).join("\n") + "\n", golden);
  assert.equal((await runDemo()).join("\n") + "\n", golden);
});

Deno.test("runDemo() on KvStore prints the same golden output", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    assert.equal((await runDemo(new KvStore(kv))).join("\n") + "\n", golden);
  } finally {
    kv.close();
  }
});
