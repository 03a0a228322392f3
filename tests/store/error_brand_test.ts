/**
 * The stores' errors are known across copies of the package: a store of
 * one's own built against another version throws its own `BusyError`, and
 * the relayer must still take it as a busy intent, not a failure of the
 * job (which on the last delivery would poison it while another delivery
 * holds the intent).
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  BusyError,
  ConflictError,
  createRelayer,
  MemoryStore,
  ReplayError,
  ScriptedSender,
} from "../../mod.ts";
import { overriding } from "../_stores.ts";
import { anotherCopy as other } from "./_another_copy.ts";

Deno.test("BusyError, ConflictError and ReplayError know each other's copies, and nothing else", () => {
  assert.notEqual(other.BusyError, BusyError, "a second copy indeed");
  assert.ok(new other.BusyError("x") instanceof BusyError);
  assert.ok(new BusyError("x") instanceof other.BusyError);
  assert.ok(new other.ConflictError("x") instanceof ConflictError);
  assert.ok(new other.ReplayError("x") instanceof ReplayError);
  assert.ok(!(new other.BusyError("x") instanceof ConflictError));
  assert.ok(!(new Error("x") instanceof BusyError));
  for (const value of [null, "BusyError", { name: "BusyError" }] as unknown[]) {
    assert.ok(!(value instanceof BusyError));
  }
  assert.ok(new BusyError("x") instanceof Error);
  // A subclass keeps the usual test: a plain BusyError is not one.
  class Narrower extends BusyError {}
  assert.ok(new Narrower("x") instanceof BusyError);
  assert.ok(!(new BusyError("x") instanceof Narrower));
  // The brand is out of sight.
  const error = new BusyError("x");
  assert.ok(
    Object.getOwnPropertySymbols(error).every((key) =>
      !Object.prototype.propertyIsEnumerable.call(error, key)
    ),
  );
  assert.equal(JSON.stringify(error), '{"name":"BusyError"}');
});

Deno.test("createRelayer() answers busy, never poison, when a store of one's own throws another copy's BusyError on the last delivery", async () => {
  const memory = new MemoryStore();
  // Settling, its last broadcast declared not sent: the last delivery
  // sends again, so it writes ahead (an authorized intent's first send
  // waits for a delivery that can read its receipt).
  await memory.createIntent({
    id: "pi_0001",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    lastBroadcast: { outcome: "not_sent", at: 0 },
    mayHaveSent: false,
  });
  const store = overriding(memory, {
    transition: () =>
      Promise.reject(new other.BusyError("another delivery holds it")),
  });
  const relayer = createRelayer({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 1 },
  });
  const outcome = await relayer.deliver(
    { intentId: "pi_0001", kind: "settle" },
    1,
  );
  assert.equal(outcome.action, "retry");
  assert.match(outcome.reason, /busy with another delivery/);
  assert.equal(await memory.getDeadLetter("pi_0001/settle"), null);
});
