/**
 * A send that outlived its settling, seen from another instance: its tx
 * is kept on the intent by the store, so a fail posted to an instance
 * that did not send (another process, another isolate of a Worker) meets
 * it as every instance does, where a memory of the sending process alone
 * let the fail void the hold of a payment that tx made. On PostgreSQL, a
 * give-up landing between the record's read and its flight too.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { WebhookApp } from "../../webhook/app.ts";
import { MemoryStore, type Sender, type Store } from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import {
  betweenReadAndFlight,
  connect,
  openPostgresStore,
  postgresAvailable,
} from "../_postgres.ts";
import {
  authorizedIntent,
  failByHand,
  giveUpMidSend,
  heldSends,
  leasedApp,
  readIntent,
} from "./_give_up_mid_send.ts";

const OPS = "ops-token-for-late-record-tests";
const headers = { authorization: `Bearer ${OPS}` };
const job = { intentId: "pi_1", kind: "settle" } as const;

/** An instance of the webhook on `store` and `sender`, its clock `clock.now`. */
function instance(
  store: Store,
  sender: Sender,
  clock: { now: number },
): WebhookApp {
  return leasedApp(store, { clock, opsToken: OPS, sender });
}

Deno.test("a fail posted to another instance after a send that outlived its settling returned its tx meets that tx: 409, and the hold stays pending", async () => {
  const store = new MemoryStore();
  await authorizedIntent(store);
  const clock = { now: 1_000_000 };
  const { sender, sending, finish } = heldSends("0xT");
  // Two instances over one store, each its own relayer and memory.
  const sendingApp = instance(store, sender(true), clock);
  const otherApp = instance(store, sender(false), clock);
  // The other instance's give-up finds the lease lapsed: review.
  const { delivery } = await giveUpMidSend(sendingApp, {
    job,
    clock,
    sending,
    giving: otherApp,
  });
  const seen = await readIntent(otherApp, headers);
  assert.equal(seen.state, "needs_review");
  // The operator looked the nonce up while the send ran; then it ends.
  finish({ txHash: "0xT" });
  // Its answer says where the tx is: on the intent in review, which
  // waits for an operator, not for its receipt.
  const ended = await delivery;
  assert.equal(ended.action, "retry");
  assert.match(
    ended.reason,
    /^sent 0xT after intent pi_1 went to review: its tx is on record there, for an operator to resolve$/,
  );
  const first = await failByHand(otherApp, headers, seen.version, true);
  const firstBody = await first.json();
  assert.equal(first.status, 409, JSON.stringify(firstBody));
  assert.equal((await store.getIntent("pi_1"))?.hold, "pending");
  // Read again, the tx is on record, and its receipt answers.
  const now = await readIntent(otherApp, headers);
  assert.deepEqual(now.txHashes, ["0xT"]);
  const second = await failByHand(otherApp, headers, now.version, true);
  const secondBody = await second.json();
  assert.equal(second.status, 409, JSON.stringify(secondBody));
  assert.match(secondBody.type, /tx-confirmed$/);
  const after = await store.getIntent("pi_1");
  assert.equal(`${after?.state}/${after?.hold}`, "needs_review/pending");
});

Deno.test({
  name:
    "a fail posted to another instance meets the tx of a send whose give-up landed between its record's read and its flight (PostgreSQL): 409, and the hold stays pending",
  ignore: !postgresAvailable,
  async fn() {
    const { schema, close } = await openPostgresStore();
    const sql = await connect(4);
    try {
      const store = new PostgresStore(sql, { schema });
      await authorizedIntent(store);
      const clock = { now: 1_000_000 };
      // Run once, between the next write's read and its flight.
      let inGap: (() => Promise<void>) | undefined;
      const gapped = new PostgresStore(
        betweenReadAndFlight(sql, async () => {
          const run = inGap;
          inGap = undefined;
          await run?.();
        }),
        { schema },
      );
      const { sender, sending, finish } = heldSends("0xT");
      const sendingApp = instance(gapped, sender(true), clock);
      const otherApp = instance(store, sender(false), clock);
      const delivery = sendingApp.relayer.deliver(job, 1);
      await sending;
      clock.now += 60_000; // the wall clock steps forward while the send runs
      // The send ends; the other instance's give-up lands after its
      // record read the intent settling, before that record's flight.
      let gaveUp: { action: string } | undefined;
      inGap = async () => {
        gaveUp = await otherApp.relayer.giveUp(job, {
          deliveries: 3,
          queue: { queue: "qstash", messageId: "msg_1" },
        });
      };
      finish({ txHash: "0xT" });
      await delivery;
      assert.equal(
        (gaveUp as { action: string } | undefined)?.action,
        "poison",
      );
      const now = await readIntent(otherApp, headers);
      assert.equal(now.state, "needs_review");
      const fail = await failByHand(otherApp, headers, now.version, true);
      const body = await fail.json();
      const after = await store.getIntent("pi_1");
      assert.equal(
        `${after?.state}/${after?.hold}`,
        "needs_review/pending",
        `${fail.status} ${JSON.stringify(body)}`,
      );
      assert.equal(fail.status, 409, JSON.stringify(body));
      assert.match(body.type, /tx-confirmed$/);
      assert.deepEqual(after?.txHashes, ["0xT"]);
    } finally {
      await sql.end();
      await close();
    }
  },
});
