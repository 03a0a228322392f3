/**
 * The automatic ways a hold is voided (a delivery poisoned on its last
 * try, a queue's give-up through QStash's failure callback and through
 * Cloudflare's dead-letter queue, all on other instances over one store),
 * raced against held sends, rescues after a lapsed lease and a stepped
 * clock. A hold is voided only once every send begun so far has ended,
 * each declared not sent, and no send begins behind a voided hold.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createRelayer, type Relayer } from "../../mod.ts";
import { sharedBackends } from "../_stores.ts";
import { voidRace } from "./_void_race.ts";

const cases = sharedBackends({
  memory: 150,
  kv: 150,
  sqlite: 60,
  postgres: 40,
});

for (const { name, seeds, open } of cases) {
  Deno.test(`${name}: no automatic void of a hold while a send may run or may have left, over ${seeds} raced histories`, async () => {
    // Histories that voided the hold after a send: the property is not met vacuously.
    let voidedAfterSends = 0;
    for (let seed = 1; seed <= seeds; seed++) {
      const { stores, close } = await open();
      try {
        const race = await voidRace(stores[0]!, seed, { receipt: "pending" });
        const { random, pick } = race;
        const clock = { now: 1_000_000 };
        const relayers: Relayer[] = stores.map((store) =>
          createRelayer({
            store: race.watched(store),
            sender: race.sender,
            policy: { maxDeliveries: 3, jitter: "none", stuckAfterMs: 300 },
            now: () => clock.now,
            random: () => 0,
            leaseMs: 200,
            clockSkewMs: 0,
          })
        );
        for (let step = 0; step < 14; step++) {
          const r = random();
          const relayer = pick(relayers);
          if (r < 0.35) {
            race.deliver(relayer);
          } else if (r < 0.5) {
            race.giveUp(relayer);
          } else if (r < 0.75) {
            race.releaseOne();
          } else {
            clock.now += Math.floor(random() * 500);
          }
          await race.yieldTurns();
        }
        if (await race.settleAndCheck({ notSentOnly: true })) {
          voidedAfterSends++;
        }
      } finally {
        await close();
      }
    }
    assert.ok(
      voidedAfterSends >= seeds / 10,
      `only ${voidedAfterSends} voided`,
    );
  });
}
