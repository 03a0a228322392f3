/**
 * The resolve route's fail (`"nonceChecked":true`, every receipt
 * `dropped`), posted to any of three instances over one store, raced
 * against deliveries, give-ups through two queues, sends that each end
 * within the Sender's timeout (half the lease) on the monotonic clock, and
 * a wall clock that steps on its own, and the store answering some
 * write-aheads and records with an error after they landed, or "may have
 * landed" before they land. A hold is voided only while no send
 * of the payment runs anywhere, and no send begins behind a voided hold.
 *
 * @module
 */
import type { Relayer, Store } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { sharedBackends } from "../_stores.ts";
import { voidingHistories, voidRace } from "../relayer/_void_race.ts";
import { failByHand, readIntent } from "./_give_up_mid_send.ts";

const OPS = "ops-token-for-the-fail-route-fuzz-tests";
const headers = { authorization: `Bearer ${OPS}` };

const cases = sharedBackends({ memory: 75, kv: 75, sqlite: 30, postgres: 40 });

for (const { name, seeds, open } of cases) {
  Deno.test(`${name}: no fail through the resolve route voids a hold while a send runs, over ${seeds} raced histories`, async () => {
    await voidingHistories(seeds, 1 / 15, async (seed) => {
      const { stores, close } = await open();
      try {
        const clock = { now: 1_000_000, mono: 0 };
        const race = await voidRace(stores[0]!, seed, {
          receipt: "dropped",
          monotonicNow: () => clock.mono,
        });
        const { random, pick, sends, running } = race;
        const watched = (store: Store) =>
          race.watched(store, {
            async recordBroadcast(id, version, broadcast, options) {
              const r = random();
              if (r < 0.15) {
                await store.recordBroadcast(id, version, broadcast, options);
                throw new Error("answer lost");
              }
              if (r < 0.3) {
                running.push(
                  new Promise((res) => setTimeout(res, 3)).then(() =>
                    store.recordBroadcast(id, version, broadcast, options)
                  ).catch(() => {}),
                );
                throw new Error("may have landed");
              }
              return await store.recordBroadcast(
                id,
                version,
                broadcast,
                options,
              );
            },
            async beginBroadcast(id, version, at, options) {
              const r = random();
              if (r < 0.15) {
                await store.beginBroadcast(id, version, at, options);
                throw new Error("answer lost");
              }
              return await store.beginBroadcast(id, version, at, options);
            },
          });
        const apps = stores.map((store) =>
          createApp({
            store: watched(store),
            sender: race.sender,
            opsToken: OPS,
            policy: { maxDeliveries: 3, jitter: "none", stuckAfterMs: 300 },
            now: () => clock.now,
            monotonicNow: () => clock.mono,
            random: () => 0,
            leaseMs: 200,
            clockSkewMs: 0,
          })
        );
        const relayers: Relayer[] = apps.map((app) => app.relayer);
        // The monotonic clock moves: a send ends within the Sender's
        // timeout, half the lease.
        const tick = (ms: number) => {
          clock.mono += ms;
          for (const s of sends) {
            if (s.ended === undefined && clock.mono - s.startedMono! >= 100) {
              s.release(race.outcomeOf());
            }
          }
        };
        for (let step = 0; step < 24; step++) {
          const r = random();
          const relayer = pick(relayers);
          if (r < 0.25) {
            const app = pick(apps);
            running.push((async () => {
              const intent = await readIntent(app, headers);
              if (intent?.state !== "needs_review") return;
              await failByHand(app, headers, intent.version, true);
            })());
          } else if (r < 0.35) {
            race.deliver(relayer);
          } else if (r < 0.5) {
            race.giveUp(relayer);
          } else if (r < 0.6) {
            race.releaseOne();
          } else if (r < 0.85) {
            tick(Math.floor(random() * 150));
          } else {
            clock.now += Math.floor(random() * 500);
          }
          await race.yieldTurns();
        }
        return await race.settleAndCheck({ notSentOnly: false });
      } finally {
        await close();
      }
    });
  });
}
