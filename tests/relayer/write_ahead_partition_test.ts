/**
 * A network partition that falls just after a send's write-ahead went out
 * (its `COMMIT` reaches PostgreSQL and lands; the answer is lost, and the
 * connection then stays silent): the delivery must fail within the
 * store's bound as "it may have landed or not", nothing may be sent on it,
 * and once the network heals the next delivery settles the payment with
 * one send in all.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { createRelayer, ScriptedSender } from "../../mod.ts";
import { PostgresStore, reconnectBackoffS } from "../../store/postgres.ts";
import { answeredSocket } from "../../store/_postgres_socket.ts";
import {
  betweenReadAndFlight,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { partitionProxy } from "../../support/partition_proxy.ts";
import { timeout } from "../_timeout.ts";

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

Deno.test({
  name:
    "createRelayer() on PostgresStore: a write-ahead whose answer a partition lost fails as may have landed, sends nothing, and the next delivery after the heal settles with one send",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const url = await postgresUrl();
    const target = new URL(url);
    const proxy = await partitionProxy({
      hostname: target.hostname,
      port: Number(target.port),
    });
    const waitMs = 1_000;
    const sql = postgres(proxy.via(url), {
      max: 1,
      onnotice: () => {},
      backoff: reconnectBackoffS,
      socket: answeredSocket(waitMs),
    } as postgres.Options<Record<string, never>>);
    // Straight to the server: what landed, read past the partition.
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const schema = freshSchema();
      await new PostgresStore(sql, { schema }).migrate();
      for (const id of ["pi_0000", "pi_0001"]) {
        await new PostgresStore(sql, { schema }).createIntent({
          id,
          state: "authorized",
          hold: "pending",
        });
      }
      // The partition falls between the send's read and its flight: the
      // flight reaches the server, its answers do not come back. On one
      // connection whose statements a first payment's send prepared, so
      // that the flight goes out whole (postgres.js waits for the server
      // to describe a statement new to a connection before it runs it).
      let armed = false;
      const store = new PostgresStore(
        betweenReadAndFlight(sql, () => {
          if (armed) proxy.loseAnswers();
          armed = false;
          return Promise.resolve();
        }),
        { schema, connectionWaitMs: waitMs },
      );
      const sender = new ScriptedSender({
        pi_0000: { sends: [{ txHash: "0x000" }] },
        pi_0001: { sends: [{ txHash: "0xabc" }], receipts: ["confirmed"] },
      });
      let clock = 1_000_000;
      const relayer = createRelayer({
        store,
        sender,
        now: () => clock,
        policy: { maxDeliveries: 10 },
      });
      await relayer.deliver({ intentId: "pi_0000", kind: "settle" }, 1);
      const job = { intentId: "pi_0001", kind: "settle" } as const;
      armed = true;
      const start = performance.now();
      const first = await relayer.deliver(job, 1).then(
        (outcome) => `answered ${outcome.action}: ${outcome.reason}`,
        (error: Error) => error.message,
      );
      const took = performance.now() - start;
      await sleep(100);
      proxy.partition();
      assert.match(first, /it may have landed or not/);
      assert.ok(
        took < waitMs + 500,
        `the delivery took ${Math.round(took)} ms`,
      );
      const calledInPartition = JSON.stringify(
        sender.calls.filter((call) =>
          call.method === "send" && call.intentId === "pi_0001"
        ),
      );
      assert.equal(
        calledInPartition,
        "[]",
        `the Sender was called on a lost write-ahead: ${calledInPartition}`,
      );
      proxy.heal();
      // It landed: the case where a send may be in flight.
      const landed = await new PostgresStore(admin, { schema }).getIntent(
        "pi_0001",
      );
      assert.equal(landed?.state, "settling");
      assert.notEqual(landed?.broadcasting, null);
      // Past the lease of the send that may be in flight.
      clock += 10 * 60_000;
      const outcomes: string[] = [];
      for (let n = 2; n <= 8; n++) {
        const outcome = await relayer.deliver(job, n).then(
          (o) => `${o.action}: ${o.reason}`,
          (error: Error) => `failed: ${error.message}`,
        );
        outcomes.push(outcome);
        if (/settled/.test(outcome)) break;
        clock += 60_000;
        await sleep(200);
      }
      const intent = await new PostgresStore(admin, { schema }).getIntent(
        "pi_0001",
      );
      assert.equal(
        intent?.state,
        "settled",
        `not settled after the heal: ${outcomes.join(" | ")}`,
      );
      assert.equal(
        sender.calls.filter((call) =>
          call.method === "send" && call.intentId === "pi_0001"
        ).length,
        1,
        `sends: ${JSON.stringify(sender.calls)}`,
      );
    } finally {
      await sql.end({ timeout: 0 });
      await admin.end();
      await proxy.close();
    }
  }),
});
