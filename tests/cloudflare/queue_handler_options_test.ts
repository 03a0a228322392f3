import assert from "node:assert/strict";
import { createQueueHandler } from "../../cloudflare/queue_handler.ts";
import { definePolicy } from "../../mod.ts";

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
    // A wrapper that forwards some calls only: met at the first give-up or
    // at the handler's first read of the policy, not at start.
    ["a relayer without giveUp", {
      deliver: () => {},
      keepUnreadable: () => {},
      policy: definePolicy({ maxDeliveries: 3 }),
    }],
    ["a relayer without a policy", {
      deliver: () => {},
      giveUp: () => {},
      keepUnreadable: () => {},
    }],
  ] as const
) {
  Deno.test(`createQueueHandler() names 'relayer' when it is ${label}`, () => {
    assert.throws(
      () =>
        createQueueHandler({
          relayer,
          deadLetterQueue: "jobs-dlq",
          deadLetterMaxRetries: 100,
          maxRetries: 9,
        } as never),
      (error) => error instanceof TypeError && error.message.startsWith(what),
    );
  });
}
