/**
 * The lease a library caller gives `createRelayer` (or `createApp`) against
 * the timeout its Sender declares: the lease is renewed right before a send
 * and must outlast it, so one under twice `HttpSender`'s `timeoutMs` is
 * refused when the relayer is made, as the service's `LEASE` is refused
 * under twice `SENDER_TIMEOUT`. A Sender that declares no timeout is taken
 * as before.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  createRelayer,
  HttpSender,
  MemoryStore,
  ScriptedSender,
  type Sender,
} from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";

/** A `fetch` that fails the test if making a relayer calls it. */
const noFetch: typeof fetch = () => {
  throw new Error("a relayer was made with a request to the signer");
};

const httpSender = (timeoutMs?: number): HttpSender =>
  new HttpSender({
    url: "https://signer.example",
    fetch: noFetch,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
  });

Deno.test("HttpSender's timeoutMs reads the timeout it was given, 10000 unless given, and cannot be set", () => {
  assert.equal(httpSender().timeoutMs, 10_000);
  const sender = httpSender(2_500);
  assert.equal(sender.timeoutMs, 2_500);
  assert.throws(() => {
    (sender as { timeoutMs: number }).timeoutMs = 60_000;
  }, TypeError);
  assert.equal(sender.timeoutMs, 2_500);
});

Deno.test("createRelayer() refuses a lease under twice HttpSender's timeoutMs, naming both, the least lease and the setting to lower", () => {
  const store = new MemoryStore();
  assert.throws(
    () => createRelayer({ store, sender: httpSender(), leaseMs: 19_999 }),
    (error: Error) => {
      assert.equal(error.name, "RangeError");
      assert.equal(
        error.message,
        "Cannot create relayer as 'leaseMs' must be at least twice the Sender's 'timeoutMs' (10000): current value is 19999. The lease is renewed right before a send and must outlast it, with room for the writes around it, or two deliveries could send at once: set leaseMs to at least 20000, or lower the Sender's timeoutMs",
      );
      return true;
    },
  );
  // The default lease (30 s) against a timeout of 20 s: said to be the default.
  assert.throws(
    () => createRelayer({ store, sender: httpSender(20_000) }),
    (error: Error) => {
      assert.equal(error.name, "RangeError");
      assert.match(
        error.message,
        /'timeoutMs' \(20000\): current value is 30000 \(the default\)\. .*set leaseMs to at least 40000, or lower the Sender's timeoutMs$/,
      );
      return true;
    },
  );
  // Exactly twice is enough; so is the default lease with the default timeout.
  assert.equal(
    createRelayer({ store, sender: httpSender(), leaseMs: 20_000 }).leaseMs,
    20_000,
  );
  assert.equal(createRelayer({ store, sender: httpSender() }).leaseMs, 30_000);
  assert.equal(
    createRelayer({ store, sender: httpSender(15_000) }).leaseMs,
    30_000,
  );
});

Deno.test("createApp() refuses a lease under twice HttpSender's timeoutMs, as createRelayer() does", () => {
  assert.throws(
    () =>
      createApp({
        store: new MemoryStore(),
        sender: httpSender(60_000),
        leaseMs: 9_000,
      }),
    (error: Error) => {
      assert.equal(error.name, "RangeError");
      assert.match(
        error.message,
        /^Cannot create relayer as 'leaseMs' must be at least twice the Sender's 'timeoutMs' \(60000\): current value is 9000\. .*set leaseMs to at least 120000/,
      );
      return true;
    },
  );
});

Deno.test("createRelayer() reads the timeoutMs any Sender declares, and takes a Sender that declares none as before", () => {
  const store = new MemoryStore();
  const plain: Sender = {
    send: () => Promise.resolve({ txHash: "0xabc" }),
    receipt: () => Promise.resolve("pending"),
  };
  // No timeout declared: any lease, as before.
  assert.equal(createRelayer({ store, sender: plain, leaseMs: 1 }).leaseMs, 1);
  assert.equal(
    createRelayer({ store, sender: new ScriptedSender({}), leaseMs: 1 })
      .leaseMs,
    1,
  );
  assert.equal(
    createRelayer({
      store,
      sender: { ...plain, timeoutMs: undefined } as unknown as Sender,
      leaseMs: 1,
    }).leaseMs,
    1,
  );
  // A Sender of the user's own that declares one is held to it.
  assert.throws(
    () =>
      createRelayer({
        store,
        sender: { ...plain, timeoutMs: 5_000 },
        leaseMs: 9_999,
      }),
    /^RangeError: Cannot create relayer as 'leaseMs' must be at least twice the Sender's 'timeoutMs' \(5000\): current value is 9999\./,
  );
  assert.equal(
    createRelayer({
      store,
      sender: { ...plain, timeoutMs: 5_000 },
      leaseMs: 10_000,
    }).leaseMs,
    10_000,
  );
  // A timeout of 0 ms, as the TypeError's ">= 0" says, takes any lease.
  assert.equal(
    createRelayer({ store, sender: { ...plain, timeoutMs: 0 }, leaseMs: 1 })
      .leaseMs,
    1,
  );
  // A declared timeout that is no duration would make the check say nothing.
  for (const timeoutMs of [Number.NaN, -1, Infinity, "10000", null]) {
    assert.throws(
      () =>
        createRelayer({
          store,
          sender: { ...plain, timeoutMs } as unknown as Sender,
        }),
      (error: Error) => {
        assert.equal(error.name, "TypeError");
        assert.match(
          error.message,
          /^Cannot create relayer as 'sender\.timeoutMs' must be a number of milliseconds >= 0, or absent for a Sender with no timeout of its own: current value is /,
        );
        return true;
      },
    );
  }
});
