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
import { createRelayer, type Relayer } from "../../mod.ts";
import { sharedBackends } from "../_stores.ts";
import { voidingHistories, voidRace } from "./_void_race.ts";

const cases = sharedBackends({
  memory: 150,
  kv: 150,
  sqlite: 60,
  postgres: 40,
});

for (const { name, seeds, open } of cases) {
  Deno.test(`${name}: no automatic void of a hold while a send may run or may have left, over ${seeds} raced histories`, async () => {
    await voidingHistories(seeds, 1 / 10, async (seed) => {
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
        return await race.settleAndCheck({ notSentOnly: true });
      } finally {
        await close();
      }
    });
  });
}
