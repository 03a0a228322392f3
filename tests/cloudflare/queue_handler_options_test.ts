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

// A Worker in JavaScript that passes its [vars] on as they are gives text
// (a quoted `MAX_RETRIES = "9"`, a dashboard variable, `.dev.vars`):
// "current value is 9" beside "must be an integer in 0..100" read as a
// contradiction, and so did `"9"` alone; a value with no text (an object
// without a prototype) met the engine's "Cannot convert object to
// primitive value". A text is refused, as definePolicy refuses one, and
// told what reads the Worker's setting into a number (workerConfig): the
// options are numbers, and the retentions' settings are durations ("4d"),
// whose digits alone would not be milliseconds.
Deno.test("createQueueHandler() shows a number given as text quoted, says it is a text and what gives the number, and names a value with no text of its own, in each option's refusal", async () => {
  const { createRelayer, MemoryStore, ScriptedSender } = await import(
    "../../mod.ts"
  );
  const relayer = createRelayer({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
  });
  const base = {
    relayer,
    maxRetries: 9,
    deadLetterQueue: "jobs-dlq",
    deadLetterMaxRetries: 100,
  };
  const cases: [string, unknown, RegExp][] = [
    [
      "maxRetries",
      "9",
      /'maxRetries' must be an integer in 0\.\.100: current value is "9", a text: give a number \(workerConfig\(env\)\.config\.queues\.cloudflare\.maxRetries reads CLOUDFLARE_MAX_RETRIES into one\)$/,
    ],
    [
      "maxRetries",
      9n,
      /'maxRetries' must be an integer in 0\.\.100: current value is 9n$/,
    ],
    [
      "deadLetterMaxRetries",
      "100",
      /'deadLetterMaxRetries' must be an integer in 0\.\.100: current value is "100", a text: give a number \(workerConfig\(env\)\.config\.cloudflareDeadLetterMaxRetries reads CLOUDFLARE_DLQ_MAX_RETRIES into one\)$/,
    ],
    [
      "concurrency",
      "4",
      /'concurrency' must be an integer in 1\.\.6 \(.*\): current value is "4", a text: give a number$/,
    ],
    [
      "messageRetentionMs",
      "86400000",
      /'messageRetentionMs' must be whole seconds .*: current value is "86400000", a text: give a number of milliseconds \(parseDuration reads a duration's text into one; workerConfig\(env\)\.config\.cloudflareRetentions reads CLOUDFLARE_MESSAGE_RETENTION into one\)$/,
    ],
    [
      "deadLetterMessageRetentionMs",
      "86400000",
      /'deadLetterMessageRetentionMs' must be whole seconds .*: current value is "86400000", a text: give a number of milliseconds \(parseDuration reads a duration's text into one; workerConfig\(env\)\.config\.cloudflareRetentions reads CLOUDFLARE_DLQ_MESSAGE_RETENTION into one\)$/,
    ],
    [
      "deliveryDelayMs",
      "0",
      /'deliveryDelayMs' must be whole seconds .*: current value is "0", a text: give a number of milliseconds \(parseDuration reads a duration's text into one; workerConfig\(env\)\.config\.cloudflareRetentions reads CLOUDFLARE_DELIVERY_DELAY into one\)$/,
    ],
    [
      "maxRetries",
      Object.create(null),
      /'maxRetries' must be an integer in 0\.\.100: current value is \{\}$/,
    ],
    [
      "deadLetterQueue",
      Object.create(null),
      /'deadLetterQueue' is not a queue's name: current value is \{\}: without a dead-letter queue/,
    ],
  ];
  for (const [name, value, message] of cases) {
    assert.throws(
      () => createQueueHandler({ ...base, [name]: value } as never),
      (error) =>
        (error instanceof RangeError || error instanceof TypeError) &&
        error.message.startsWith("Cannot create queue handler as ") &&
        message.test(error.message),
      `${name}: ${typeof value}`,
    );
  }
});
