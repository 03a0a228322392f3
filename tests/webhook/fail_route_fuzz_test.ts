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
import assert from "node:assert/strict";
import {
  type Intent,
  notSent,
  type Relayer,
  type Sender,
  type Store,
} from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { overriding, sharedBackends } from "../_stores.ts";
import { mulberry32 } from "../../support/prng.ts";

const OPS = "ops-token-for-the-fail-route-fuzz-tests";
const headers = { authorization: `Bearer ${OPS}` };

const JOB = { intentId: "pi_1", kind: "settle" } as const;

interface Send {
  started: number;
  startedMono: number;
  ended?: number;
  outcome?: "sent" | "not_sent" | "unknown";
  holdAtStart: string | null;
  release(outcome: "sent" | "not_sent" | "unknown"): void;
}

const cases = sharedBackends({ memory: 75, kv: 75, sqlite: 30, postgres: 40 });

for (const { name, seeds, open } of cases) {
  Deno.test(`${name}: no fail through the resolve route voids a hold while a send runs, over ${seeds} raced histories`, async () => {
    // Histories that voided the hold after a send: the property is not met vacuously.
    let voidedAfterSends = 0;
    for (let seed = 1; seed <= seeds; seed++) {
      const random = mulberry32(seed);
      const { stores, close } = await open();
      try {
        await stores[0]!.createIntent({
          id: JOB.intentId,
          state: "authorized",
          hold: "pending",
        });
        let seq = 0;
        const sends: Send[] = [];
        const voids: number[] = [];
        const clock = { now: 1_000_000, mono: 0 };
        const sender: Sender = {
          async send(intent: Intent) {
            const hold = (await stores[0]!.getIntent(intent.id))?.hold ??
              null;
            let release!: Send["release"];
            const done = new Promise<NonNullable<Send["outcome"]>>((resolve) =>
              release = resolve
            );
            const send: Send = {
              started: ++seq,
              startedMono: clock.mono,
              holdAtStart: hold,
              release,
            };
            sends.push(send);
            const outcome = await done;
            send.ended = ++seq;
            send.outcome = outcome;
            if (outcome === "not_sent") {
              throw notSent(new Error("rpc refused it"));
            }
            if (outcome === "unknown") throw new Error("timed out");
            return { txHash: `0x${send.started}` };
          },
          receipt: () => Promise.resolve("dropped"),
        };
        const running: Promise<unknown>[] = [];
        const watched = (store: Store): Store =>
          overriding(store, {
            async transition(id, change, options) {
              const after = await store.transition(id, change, options);
              if (change.ledger === "void") voids.push(++seq);
              return after;
            },
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
            async voidHold(id) {
              const after = await store.voidHold(id);
              voids.push(++seq);
              return after;
            },
          });
        const apps = stores.map((store) =>
          createApp({
            store: watched(store),
            sender,
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
        const outcomeOf = (): "sent" | "not_sent" | "unknown" => {
          const o = random();
          return o < 0.6 ? "not_sent" : o < 0.8 ? "unknown" : "sent";
        };
        // The monotonic clock moves: a send ends within the Sender's
        // timeout, half the lease.
        const tick = (ms: number) => {
          clock.mono += ms;
          for (const s of sends) {
            if (s.ended === undefined && clock.mono - s.startedMono >= 100) {
              s.release(outcomeOf());
            }
          }
        };
        const pick = <T>(items: readonly T[]): T =>
          items[Math.floor(random() * items.length)]!;
        for (let step = 0; step < 24; step++) {
          const r = random();
          const relayer = pick(relayers);
          if (r < 0.25) {
            const app = pick(apps);
            running.push((async () => {
              const { intent } = await (await app.request("/v1/intents/pi_1", {
                headers,
              })).json();
              if (intent?.state !== "needs_review") return;
              await app.request("/v1/intents/pi_1/resolve", {
                method: "POST",
                headers,
                body: JSON.stringify({
                  to: "failed",
                  version: intent.version,
                  nonceChecked: true,
                }),
              });
            })());
          } else if (r < 0.35) {
            running.push(
              relayer.deliver(JOB, 1 + Math.floor(random() * 3)).catch((e) =>
                e
              ),
            );
          } else if (r < 0.5) {
            running.push(
              relayer.giveUp(JOB, {
                deliveries: 3,
                queue: random() < 0.5
                  ? { queue: "qstash", messageId: "msg_1" }
                  : { queue: "cloudflare", dlqId: "cf_1" },
              }).catch((e) => e),
            );
          } else if (r < 0.6) {
            const open = sends.filter((s) => s.ended === undefined);
            if (open.length > 0) pick(open).release(outcomeOf());
          } else if (r < 0.85) {
            tick(Math.floor(random() * 150));
          } else {
            clock.now += Math.floor(random() * 500);
          }
          const ticks = Math.floor(random() * 4);
          for (let t = 0; t < ticks; t++) {
            await new Promise((resolve) => setTimeout(resolve, 0));
          }
        }
        // Every send is released, those begun meanwhile too, until all settle.
        const labels = running.map((_, i) => i);
        const pending = new Set(labels);
        running.forEach((p, i) => p.finally(() => pending.delete(i)));
        for (let round = 0; round < 2000 && pending.size > 0; round++) {
          for (const s of sends) {
            if (s.ended === undefined) s.release("not_sent");
          }
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
        assert.equal(
          pending.size,
          0,
          `seed ${seed}: operations hung: ${[...pending]}`,
        );
        const after = await stores[0]!.getIntent(JOB.intentId);
        const history = JSON.stringify({
          seed,
          sends: sends.map(({ release: _, ...s }) => s),
          voids,
          after: [after?.state, after?.hold],
        });
        if (voids.length > 0 && sends.length > 0) voidedAfterSends++;
        for (const at of voids) {
          for (const s of sends) {
            assert.ok(
              s.started > at ? false : true,
              `a send began after the void: ${history}`,
            );
            assert.ok(
              s.ended !== undefined && s.ended < at,
              `a hold voided while a send ran: ${history}`,
            );
          }
        }
        for (const s of sends) {
          assert.equal(s.holdAtStart, "pending", history);
        }
      } finally {
        await close();
      }
    }
    assert.ok(
      voidedAfterSends >= seeds / 15,
      `only ${voidedAfterSends} voided`,
    );
  });
}
