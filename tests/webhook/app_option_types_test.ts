/**
 * createApp's options of the wrong type, as a JSON config or a JavaScript
 * caller hands them: a secret that is a number or an array was told it
 * "is empty"; a `log` that is no function failed on "sink is not a
 * function"; a body limit given as text was shown as a number. Each is
 * refused naming the option, by its type, and never the secret itself.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import { createApp, qstashPublisher } from "../../webhook/app.ts";

const base = { store: new MemoryStore(), sender: new ScriptedSender({}) };

Deno.test("createApp() names a secret, a log or a body limit of the wrong type, and never the secret", () => {
  const refusals: [Record<string, unknown>, string][] = [
    [
      { webhookSecret: 1234567890123456789012 },
      "Cannot verify generic deliveries as 'webhookSecret' must be a string: current value is a number. Set it to the shared secret the sender signs with, or leave it out to keep the route closed",
    ],
    [
      { webhookSecret: ["a-webhook-secret-16"] },
      "Cannot verify generic deliveries as 'webhookSecret' must be a string: current value is an object. Set it to the shared secret the sender signs with, or leave it out to keep the route closed",
    ],
    [
      { opsToken: 12345678901234567890 },
      "Cannot create app as 'opsToken' must be a string: current value is a number. Set it to a long random secret, or leave it out to keep the ops routes closed",
    ],
    [
      { opsToken: ["an-ops-token-of-16+"] },
      "Cannot create app as 'opsToken' must be a string: current value is an object. Set it to a long random secret, or leave it out to keep the ops routes closed",
    ],
    [
      { opsToken: null },
      "Cannot create app as 'opsToken' must be a string: current value is null. Set it to a long random secret, or leave it out to keep the ops routes closed",
    ],
    [
      { webhookSecret: null },
      "Cannot verify generic deliveries as 'webhookSecret' must be a string: current value is null. Set it to the shared secret the sender signs with, or leave it out to keep the route closed",
    ],
    [
      { log: "console" },
      "Cannot create app as 'log' must be a function that takes a line, such as (line) => console.log(line): current value is \"console\"",
    ],
    [
      { maxBodyBytes: "65536" },
      "Cannot create app as 'maxBodyBytes' must be an integer >= 1: current value is \"65536\"",
    ],
  ];
  for (const [options, message] of refusals) {
    assert.throws(
      () => createApp({ ...base, ...options } as never),
      (error: Error) => {
        assert.ok(
          error instanceof TypeError || error instanceof RangeError,
          String(error),
        );
        assert.equal(error.message, message);
        assert.ok(!error.message.includes("a-webhook-secret-16"));
        assert.ok(!error.message.includes("1234567890"));
        assert.ok(!error.message.includes("an-ops-token-of-16+"));
        return true;
      },
    );
  }
  // An empty one is still said to be empty.
  assert.throws(
    () => createApp({ ...base, webhookSecret: "" }),
    /'webhookSecret' is empty/,
  );
});

// The same slips in qstashPublisher()'s options: a token that is no
// string was told it "is empty", and counts given as text showed as
// numbers. Named by type, and the token never shown.
Deno.test("qstashPublisher() names a token, retries or timeoutMs of the wrong type, and never the token", () => {
  const good = { token: "t", publicUrl: "https://relayer.example", retries: 3 };
  const refusals: [Record<string, unknown>, string][] = [
    [
      { token: 123456789 },
      "Cannot build a QStash publisher as 'token' must be a string: current value is a number. Set QSTASH_TOKEN",
    ],
    [
      { token: { value: "QSTOK-0123456789" } },
      "Cannot build a QStash publisher as 'token' must be a string: current value is an object. Set QSTASH_TOKEN",
    ],
    [
      { token: null },
      "Cannot build a QStash publisher as 'token' must be a string: current value is null. Set QSTASH_TOKEN",
    ],
    [
      { retries: "3" },
      "Cannot build a QStash publisher as 'retries' must be an integer in 0..100: current value is \"3\"",
    ],
    [
      { timeoutMs: "5000" },
      "Cannot build a QStash publisher as 'timeoutMs' must be an integer from 1 to 2147483647 (milliseconds): current value is \"5000\"",
    ],
  ];
  for (const [options, message] of refusals) {
    assert.throws(
      () => qstashPublisher({ ...good, ...options } as never),
      (error: Error) => {
        assert.equal(error.message, message);
        assert.ok(!error.message.includes("123456789"));
        assert.ok(!error.message.includes("QSTOK"));
        return true;
      },
    );
  }
  for (const token of ["", undefined]) {
    assert.throws(
      () => qstashPublisher({ ...good, token } as never),
      /'token' is empty: set QSTASH_TOKEN/,
    );
  }
});
