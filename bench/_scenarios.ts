/**
 * The two delivery scenarios the webhook benches share: the intents each
 * needs, how they are created, and the scripted Sender that answers them.
 *
 * - `read`: settling intents `pi_r_<i>` whose receipt stays pending: a
 *   delivery looks and answers 503 "waiting for … to confirm";
 * - `write`: authorized intents `pi_w_<i>`: a delivery takes the lease,
 *   moves the intent to settling, broadcasts and records.
 *
 * @module
 */

import { ScriptedSender, type SenderScript, type Store } from "../mod.ts";

/** Which path a delivery takes: it only looks, or it writes. */
export type Scenario = "read" | "write";

/**
 * Text the body of a scenario's intended answer holds (a 503 retry with
 * that reason), and the app's own 503 "Delivery failed" does not.
 */
export const ANSWER_TEXT: Readonly<Record<Scenario, string>> = {
  read: '"reason":"waiting for ',
  write: '"reason":"sent ',
};

/** The intents of a scenario: `pi_r_<i>` settling with a pending receipt, or `pi_w_<i>` authorized. */
function seeds(scenario: Scenario, count: number, now: number) {
  return Array.from(
    { length: count },
    (_, i) =>
      scenario === "write"
        ? {
          id: `pi_w_${i}`,
          state: "authorized" as const,
          hold: "pending" as const,
        }
        : {
          // `_pending`: the signer stub keeps this receipt pending.
          id: `pi_r_${i}`,
          state: "settling" as const,
          hold: "pending" as const,
          settlingSince: now,
          lastBroadcast: {
            outcome: "sent" as const,
            txHash: `0xpi_r_${i}_pending`,
            at: now,
          },
        },
  );
}

/** Creates the intents of a scenario through the store's own `createIntent`, 500 at a time. */
export async function seedStore(
  store: Store,
  scenario: Scenario,
  count: number,
) {
  const all = seeds(scenario, count, Date.now());
  for (let i = 0; i < all.length; i += 500) {
    await Promise.all(
      all.slice(i, i + 500).map((intent) => store.createIntent(intent)),
    );
  }
}

/** The scripted Sender of a scenario: every send broadcasts, every receipt is pending. */
export function scriptedSender(
  scenario: Scenario,
  count: number,
): ScriptedSender {
  const scripts: Record<string, SenderScript> = {};
  for (let i = 0; i < count; i++) {
    const id = scenario === "write" ? `pi_w_${i}` : `pi_r_${i}`;
    scripts[id] = {
      sends: [{ txHash: scenario === "write" ? `0x${id}` : `0x${id}_pending` }],
      receipts: ["pending"],
    };
  }
  return new ScriptedSender(scripts);
}
