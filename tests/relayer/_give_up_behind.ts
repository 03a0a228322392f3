/**
 * A queue's give-up that lands while a delivery of its job is at work.
 *
 * @module
 */

import {
  createRelayer,
  type Job,
  type Policy,
  type Sender,
  type Store,
} from "../../mod.ts";
import { gateTransitions } from "../_stores.ts";

/** Delivers `job` on `store`, its write-ahead held until another relayer's Pub/Sub give-up of it (message `m-1`, 3 deliveries) lands: both answers. */
export async function giveUpBehindDelivery(
  store: Store,
  { job, sender, policy }: {
    job: Job;
    sender: Sender;
    policy: Partial<Policy>;
  },
) {
  const gated = gateTransitions(store);
  const delivering = createRelayer({ store: gated.store, sender, policy });
  const givingUp = createRelayer({ store, sender, policy });
  const delivery = delivering.deliver(job, 1);
  await gated.reached;
  const gaveUp = await givingUp.giveUp(job, {
    deliveries: 3,
    queue: { queue: "pubsub", messageId: "m-1" },
  });
  gated.release();
  return { gaveUp, outcome: await delivery };
}
