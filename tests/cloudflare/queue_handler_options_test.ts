import assert from "node:assert/strict";
import { createQueueHandler } from "../../cloudflare/queue_handler.ts";

// An adopter who builds the handler from a settings object (JavaScript, or
// options spread from elsewhere) and leaves out `relayer`, or passes the
// app instead of `app.relayer`, met the engine's words: "Cannot read
// properties of undefined (reading 'policy')", "Cannot destructure
// property 'maxDeliveries' of 'relayer.policy' as it is undefined.".

const what =
  "Cannot create queue handler as 'relayer' is not a relayer: pass the one createRelayer() returns, or createApp(…).relayer";

for (
  const [label, relayer] of [
    ["missing", undefined],
    ["an object without a policy", {}],
    ["an app, not its relayer", { fetch: () => {}, relayer: {} }],
    ["a relayer without deliver", { policy: { maxDeliveries: 3 } }],
  ] as const
) {
  Deno.test(`createQueueHandler() names 'relayer' when it is ${label}`, () => {
    assert.throws(
      () =>
        createQueueHandler({ relayer, deadLetterQueue: "jobs-dlq" } as never),
      (error) => error instanceof TypeError && error.message.startsWith(what),
    );
  });
}
