import assert from "node:assert/strict";
import { batchedLog } from "../main.ts";

function recorder(chunk = Infinity) {
  const writes: string[] = [];
  return {
    writes,
    writeSync(bytes: Uint8Array): number {
      const n = Math.min(bytes.length, chunk);
      writes.push(new TextDecoder().decode(bytes.subarray(0, n)));
      return n;
    },
  };
}

Deno.test("batchedLog() writes the lines of one delay in one write, in order", async () => {
  const out = recorder();
  const log = batchedLog(out, { delayMs: 5 });
  log.line("a");
  log.line("b");
  assert.deepEqual(out.writes, []);
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(out.writes, ["a\nb\n"]);
  log.line("c");
  log.flush();
  assert.deepEqual(out.writes, ["a\nb\n", "c\n"]);
});

Deno.test("batchedLog() writes a full batch at once", () => {
  const out = recorder();
  const log = batchedLog(out, { maxBatch: 8 });
  log.line("1234");
  log.line("5678");
  assert.deepEqual(out.writes, ["1234\n5678\n"]);
  log.flush();
  assert.deepEqual(out.writes, ["1234\n5678\n"]);
});

Deno.test("batchedLog() finishes a partial write", () => {
  const out = recorder(3);
  const log = batchedLog(out);
  log.line("hello");
  log.line("world");
  log.flush();
  assert.equal(out.writes.join(""), "hello\nworld\n");
});

Deno.test("batchedLog() goes on when stdout is closed", () => {
  const log = batchedLog({
    writeSync: () => {
      throw new Error("closed");
    },
  });
  log.line("lost");
  log.flush();
  log.line("lost too");
  log.flush();
});
