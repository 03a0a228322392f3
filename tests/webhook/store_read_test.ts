/**
 * The ops routes over a store of one's own that answers an intent with
 * `undefined` (a `Map`'s get) rather than the intent or `null`: the
 * intent's page answered 200 with no body, and a resolution 500 with
 * "Cannot read properties of undefined (reading 'state')" in the log.
 * Each now answers as a failed store does (503, nothing changed), and the
 * log names what the store returned and what to fix, as a delivery does.
 *
 * @module
 */

import assert from "node:assert/strict";
import { MemoryStore } from "../../mod.ts";
import { deadLetter } from "../../testing/_fixtures.ts";
import { overriding } from "../_stores.ts";
import { AUTHORIZED, makeApp, OPS } from "./_app.ts";

const NAMED =
  "the store returned undefined, not an intent or null: fix the Store's getIntent";

Deno.test("the ops routes answer 503 for an intent the store read as undefined, and log what it returned", async () => {
  const memory = new MemoryStore();
  await memory.createIntent(AUTHORIZED);
  await memory.putDeadLetter(deadLetter("pi_0001/settle", 0));
  const store = overriding(memory, {
    getIntent: () => Promise.resolve(undefined as never),
  });
  const logs: string[] = [];
  const { app } = await makeApp({
    deps: { store, log: (line: string) => void logs.push(line) },
  });
  const headers = {
    authorization: `Bearer ${OPS}`,
    "content-type": "application/json",
  };
  for (
    const [method, path, body] of [
      ["GET", "/v1/intents/pi_0001", undefined],
      [
        "POST",
        "/v1/intents/pi_0001/resolve",
        JSON.stringify({ to: "failed", version: "1" }),
      ],
      ["POST", "/v1/dead-letters/pi_0001%2Fsettle/redrive", undefined],
    ] as const
  ) {
    logs.length = 0;
    const res = await app.request(path, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
    });
    assert.equal(res.status, 503, `${method} ${path}: ${await res.text()}`);
    assert.ok(
      logs.some((line) => line.includes(NAMED)),
      `${method} ${path}: ${logs.join("\n")}`,
    );
  }
  const intent = await memory.getIntent("pi_0001");
  assert.equal(intent?.state, "authorized");
  assert.ok(await memory.getDeadLetter("pi_0001/settle"));
});
