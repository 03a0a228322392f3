import assert from "node:assert/strict";
import { TestTimeout, timeout, withTimeout } from "./_timeout.ts";

Deno.test("withTimeout() fails a hung body in its time and aborts its signal", async () => {
  let aborted: unknown;
  const started = performance.now();
  await assert.rejects(
    withTimeout(
      (signal) =>
        new Promise<void>((resolve) => {
          signal.addEventListener("abort", () => {
            aborted = signal.reason;
            resolve(); // the body lets go of what it held
          });
        }),
      50,
    ),
    (error: Error) =>
      error instanceof TestTimeout && error.message === "timed out after 0.05s",
  );
  assert.ok(aborted instanceof TestTimeout);
  assert.ok(performance.now() - started < 5000);
});

Deno.test("withTimeout() returns what a quick body returns, and leaves no timer behind", async () => {
  assert.equal(await withTimeout(() => Promise.resolve(42), 10_000), 42);
});

Deno.test(
  "timeout() wraps a Deno.test body",
  timeout(10_000, async (t, signal) => {
    assert.equal(typeof t.name, "string");
    assert.equal(signal.aborted, false);
    await Promise.resolve();
  }),
);
