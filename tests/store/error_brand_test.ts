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

Deno.test("a read-only or schema-behind mark made by another copy of the package is known, on the error or three causes deep, and not four", async () => {
  const copy = {
    readOnly: (await import("../../store/_read_only.ts?another-copy"))
      .readOnly,
    schemaBehind: (await import("../../store/_schema_behind.ts?another-copy"))
      .schemaBehind,
  };
  const { isReadOnly } = await import("../../store/_read_only.ts");
  const { isSchemaBehind } = await import("../../store/_schema_behind.ts");
  const wrapped = (error: Error, depth: number): Error =>
    depth === 0
      ? error
      : wrapped(new Error("wraps", { cause: error }), depth - 1);
  for (
    const [mark, is] of [
      [copy.readOnly, isReadOnly],
      [copy.schemaBehind, isSchemaBehind],
    ] as const
  ) {
    for (const depth of [0, 1, 3]) {
      assert.equal(is(wrapped(mark(new Error("refused")), depth)), true);
    }
    assert.equal(is(wrapped(mark(new Error("refused")), 4)), false);
  }
  // Each mark is its own.
  assert.equal(isReadOnly(copy.schemaBehind(new Error("behind"))), false);
  assert.equal(isSchemaBehind(copy.readOnly(new Error("read-only"))), false);
});
