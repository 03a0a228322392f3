/**
 * A fault-injecting world for money checks: two instances (two apps, two
 * clocks apart by up to their `clockSkewMs`) share one store behind a
 * wrapper that fails writes before or after they land and answers late; a
 * chain of account nonces (one tx of an intent lands at most); a Sender
 * that times out after landing, answers `notSent` late, is slow past the
 * lease; queue give-ups and an operator who resolves reviews through the
 * resolve route by the chain (settles what landed, cancels the nonce and
 * fails the rest). Every end state is checked against the money
 * invariants, and every answer against what the store holds.
 *
 * @module
 */

import { createApp, type WebhookApp } from "../../webhook/app.ts";
import {
  notSent,
  type Outcome,
  poison,
  type ReceiptStatus,
  type Sender,
  type Store,
} from "../../mod.ts";
import { mulberry32 } from "../../support/prng.ts";

const READS = new Set([
  "getIntent",
  "deliveries",
  "getDeadLetter",
  "listDeadLetters",
]);
const OPS = "ops-token-for-money-harness";
const LEASE_MS = 200;
const SKEW_MS = 50;
const WIDTH = Number(Deno.env.get("MONEY_WIDTH") ?? "3");

/** Thrown by the wrapper: a write that failed (before or after it landed). */
export class InjectedFault extends Error {
  constructor(readonly landed: boolean) {
    super(landed ? "store answer lost" : "store unreachable");
  }
}

/** A run's world. */
export interface World {
  readonly violations: string[];
  readonly log: string[];
}

/**
 * The chain: account nonces. A send with `replace: false` takes a fresh
 * nonce (the worst a Sender may do), one with `replace: true` reuses the
 * intent's last. A nonce is mined once; two nonces of one intent mined is
 * a payment made twice.
 */
class Chain {
  landed = new Map<string, string>(); // intent → first tx hash that landed
  paid = new Map<string, number>(); // intent → nonces mined with its txs
  nonce = new Map<string, number>(); // intent → its last nonce
  used = new Set<string>(); // "intent#nonce" mined (by a tx of it or a cancel)
  txs = new Map<
    string,
    { intent: string; lands: boolean; asked: number; reverted?: boolean }
  >();
  #n = 0;
  /** Signs: the nonce a send uses, taken when it begins. */
  sign(intent: string, replace: boolean): number {
    let nonce = this.nonce.get(intent);
    if (nonce === undefined || !replace) {
      nonce = (nonce ?? 0) + 1;
      this.nonce.set(intent, nonce);
    }
    return nonce;
  }
  send(intent: string, lands: boolean, nonce: number): string {
    const hash = `0x${(++this.#n).toString(16).padStart(4, "0")}`;
    const slot = `${intent}#${nonce}`;
    const ok = lands && !this.used.has(slot);
    if (ok) {
      this.used.add(slot);
      if (!this.landed.has(intent)) this.landed.set(intent, hash);
      this.paid.set(intent, (this.paid.get(intent) ?? 0) + 1);
    }
    this.txs.set(hash, { intent, lands: ok, asked: 0 });
    return hash;
  }
  /** A tx mined and reverted: its nonce spent, nothing paid. */
  revert(intent: string, nonce: number): string {
    const hash = `0x${(++this.#n).toString(16).padStart(4, "0")}`;
    const slot = `${intent}#${nonce}`;
    const mined = !this.used.has(slot);
    this.used.add(slot);
    this.txs.set(hash, { intent, lands: false, asked: 0, reverted: mined });
    return hash;
  }
  /** An operator's cancel on the intent's nonce: no tx of it lands after. */
  cancel(intent: string): void {
    const nonce = this.nonce.get(intent) ?? 1;
    this.used.add(`${intent}#${nonce}`);
  }
  receipt(hash: string): ReceiptStatus {
    const tx = this.txs.get(hash);
    if (tx === undefined) return "dropped";
    if (tx.reverted) throw poison(new Error(`${hash} reverted`));
    if (!tx.lands) return "dropped";
    return tx.asked++ === 0 ? "pending" : "confirmed";
  }
}

const tick = () => new Promise((r) => setTimeout(r, 0));

/**
 * Runs one seeded history on `store` (fresh, empty) and returns what it
 * found. `faults` turns the store's fault injection on.
 */
export async function runHistory(
  inners: Store | readonly [Store, Store],
  seed: number,
  opts: {
    faults: boolean;
    operator: boolean;
    steps?: number;
    late?: boolean;
    /** A Sender that breaks its contract: a rescue on a fresh nonce. */
    freshRescues?: boolean;
  },
): Promise<World> {
  const random = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T =>
    xs[Math.floor(random() * xs.length)]!;
  const violations: string[] = [];
  const log: string[] = [];
  const chain = new Chain();
  let t = 1_000_000;
  const skew = Math.floor(random() * (2 * SKEW_MS + 1)) - SKEW_MS;
  let faultsOn = opts.faults;
  let late = opts.late ?? false;
  const queueCounts = random() < 0.5;

  const pair = Array.isArray(inners)
    ? inners as readonly [Store, Store]
    : [inners as Store, inners as Store] as const;
  const inner = pair[0];
  // The store as the instances see it: faults and late answers.
  const wrap = (inner: Store) =>
    new Proxy(inner, {
      get(target, key) {
        const value = Reflect.get(target, key, target);
        if (typeof value !== "function") return value;
        if (READS.has(String(key))) {
          return async (...args: unknown[]) => {
            if (random() < 0.2) await tick();
            if (faultsOn && random() < 0.03) {
              log.push(`fault read ${String(key)}`);
              throw new InjectedFault(false);
            }
            return await value.apply(target, args);
          };
        }
        return async (...args: unknown[]) => {
          if (random() < 0.3) await tick();
          const r = random();
          if (faultsOn && r < 0.06) {
            log.push(`fault before ${String(key)}`);
            throw new InjectedFault(false);
          }
          const result = await value.apply(target, args);
          if (random() < 0.3) await tick();
          if (late && random() < 0.08) {
            // Landed, answered late: past the lease and the skew.
            log.push(`late answer ${String(key)} at ${t}`);
            t += LEASE_MS + 2 * SKEW_MS + 1;
            for (let i = 0; i < 10; i++) await tick();
          }
          if (faultsOn && r > 0.94) {
            log.push(`fault after ${String(key)}`);
            throw new InjectedFault(true);
          }
          return result;
        };
      },
    }) as Store;
  const stores = pair.map(wrap);

  const sender: Sender = {
    async send(intent, { replace }) {
      const mode = pick(
        [
          "ok",
          "ok",
          "ok",
          "timeoutLanded",
          "notSentLate",
          "slow",
          "unknownClean",
          "poisonNotSent",
          "reverted",
        ] as const,
      );
      const nonce = chain.sign(intent.id, replace && !opts.freshRescues);
      log.push(
        `send ${intent.id} ${mode} replace=${replace} nonce=${nonce} at ${t}`,
      );
      switch (mode) {
        case "ok":
          await tick();
          return { txHash: chain.send(intent.id, true, nonce) };
        case "timeoutLanded":
          chain.send(intent.id, true, nonce);
          await tick();
          throw new Error("timeout after landing");
        case "notSentLate":
          await tick();
          t += Math.floor(random() * 2 * LEASE_MS);
          await tick();
          throw notSent(new Error("node refused the tx"));
        case "slow": {
          // Past the lease and the skew: others may take the intent.
          t += LEASE_MS + 2 * SKEW_MS + 1;
          for (let i = 0; i < 20; i++) await tick();
          return { txHash: chain.send(intent.id, true, nonce) };
        }
        case "unknownClean":
          await tick();
          throw new Error("connection reset");
        case "poisonNotSent":
          throw poison(notSent(new Error("declared bad")));
        case "reverted":
          await tick();
          return { txHash: chain.revert(intent.id, nonce) };
      }
    },
    async receipt(txHash) {
      await tick();
      if (faultsOn && random() < 0.05) throw new Error("rpc down");
      return chain.receipt(txHash);
    },
  };

  const policy = {
    maxDeliveries: 3,
    baseMs: 10,
    capMs: 50,
    jitter: "none" as const,
    stuckAfterMs: 100,
  };
  const apps: WebhookApp[] = [0, skew].map((off, i) =>
    createApp({
      store: stores[i]!,
      sender,
      opsToken: OPS,
      now: () => t + off,
      random: () => 0.5,
      leaseMs: LEASE_MS,
      clockSkewMs: SKEW_MS,
      policy,
      log: (line) => void log.push(line),
    })
  );

  const ids = ["pi_a", "pi_b", "pi_c"].slice(0, WIDTH > 3 ? 3 : 2);
  for (const id of ids) {
    await inner.createIntent({ id, state: "authorized", hold: "pending" });
  }
  // Claims made by answers: checked against the end state.
  const claims: { id: string; says: string; text: string }[] = [];
  const note = (id: string, outcome: Outcome, how: string) => {
    const text = `${how}: ${JSON.stringify(outcome)}`;
    log.push(text);
    if (outcome.action === "poison") {
      if (/intent failed/.test(outcome.resolution)) {
        claims.push({ id, says: "failed", text });
      } else if (/needs review/.test(outcome.resolution)) {
        claims.push({ id, says: "reviewed", text });
      }
    }
    if (outcome.action === "done" && /intent settled/.test(outcome.reason)) {
      claims.push({ id, says: "settled", text });
    }
  };

  // Per intent, its message's deliveries so far (a queue's count).
  const count = new Map<string, number>(ids.map((id) => [id, 0]));
  const message = new Map<string, number>(ids.map((id) => [id, 1]));
  const gaveUp = new Set<string>();

  const action = async (): Promise<void> => {
    const id = pick(ids);
    const app = pick(apps);
    const job = { intentId: id, kind: "settle" } as const;
    const messageId = `m_${id}_${message.get(id)}`;
    const r = random();
    try {
      if (r < 0.6) {
        const n = (count.get(id) ?? 0) + (random() < 0.3 ? 0 : 1);
        count.set(id, Math.max(n, 1));
        const outcome = queueCounts
          ? await app.relayer.deliver(job, Math.max(n, 1), {
            message: { queue: "qstash", messageId },
          })
          : await app.relayer.deliver(job, undefined, {
            countAs: `pubsub/${messageId}`,
            message: { queue: "pubsub", messageId },
          });
        note(id, outcome, `deliver ${messageId} #${n}`);
        if (outcome.action !== "retry") {
          gaveUp.add(messageId);
        }
      } else if (r < 0.75) {
        const n = Math.max(count.get(id) ?? 1, 1);
        const outcome = await app.relayer.giveUp(job, {
          deliveries: n,
          queue: { queue: queueCounts ? "qstash" : "pubsub", messageId },
        });
        note(id, outcome, `giveUp ${messageId}`);
        if (outcome.action !== "retry") gaveUp.add(messageId);
      } else if (r < 0.8) {
        // A job published again (a new publish): a new message.
        if (gaveUp.has(messageId)) {
          message.set(id, message.get(id)! + 1);
          count.set(id, 0);
        }
      } else if (r < 0.88) {
        const job2 = await app.relayer.redrive(`${id}/settle`, {
          publish: () => {
            message.set(id, message.get(id)! + 1);
            count.set(id, 0);
            return Promise.resolve();
          },
        });
        log.push(`redrive ${id}: ${JSON.stringify(job2)}`);
      } else if (opts.operator) {
        await operate(app, id);
      }
    } catch (error) {
      log.push(`threw ${id}: ${(error as Error)?.message}`);
    }
  };

  const operate = async (app: WebhookApp, id: string) => {
    const intent = await inner.getIntent(id);
    if (intent?.state !== "needs_review") return;
    const landed = chain.landed.has(id);
    // A careful operator: a tx landed → settle; else use the nonce with a
    // cancel of their own, then fail. A hasty one asks to fail with no
    // look at the nonce: the route decides.
    const hasty = !landed && random() < 0.5;
    if (!landed && !hasty) chain.cancel(id);
    const to = landed ? "settled" : "failed";
    const res = await app.request(`/v1/intents/${id}/resolve`, {
      method: "POST",
      headers: { authorization: `Bearer ${OPS}` },
      body: JSON.stringify({
        to,
        version: intent.version,
        ...(hasty ? {} : { nonceChecked: true }),
      }),
    });
    const body = await res.json();
    log.push(
      `operator ${id} ${to}: ${res.status} ${
        JSON.stringify(body).slice(0, 200)
      }`,
    );
    if (res.status === 200) claims.push({ id, says: to, text: "operator 200" });
  };

  const steps = opts.steps ?? 12;
  for (let i = 0; i < steps; i++) {
    const width = 1 + Math.floor(random() * WIDTH);
    await Promise.all(Array.from({ length: width }, action));
    t += Math.floor(random() * 150);
  }
  // Drain: no faults, time passes, the queue delivers and gives up, the
  // operator resolves.
  faultsOn = false;
  late = false;
  for (let round = 0; round < 40; round++) {
    t += 400;
    for (const id of ids) {
      const intent = await inner.getIntent(id);
      if (intent === null) continue;
      if (intent.state === "settled" || intent.state === "failed") continue;
      if (intent.state === "needs_review") {
        if (opts.operator) await operate(apps[0]!, id);
        continue;
      }
      const messageId = `m_${id}_${message.get(id)}-drain${round}`;
      const job = { intentId: id, kind: "settle" } as const;
      try {
        const outcome = await apps[0]!.relayer.deliver(job, 1, {
          message: { queue: "qstash", messageId },
        });
        note(id, outcome, `drain ${messageId}`);
        if (outcome.action === "retry") {
          t += 400;
          const g = await apps[0]!.relayer.giveUp(job, {
            deliveries: 1,
            queue: { queue: "qstash", messageId },
          });
          note(id, g, `drain giveUp ${messageId}`);
        }
      } catch (error) {
        log.push(`drain threw ${id}: ${(error as Error)?.message}`);
      }
    }
  }
  await Promise.all(
    apps.map((a) => (a.relayer as { close?: () => Promise<void> }).close?.()),
  );

  for (const id of ids) {
    const intent = await inner.getIntent(id);
    if (intent === null) continue;
    const landed = chain.landed.get(id);
    const s = `${id} ${intent.state} hold ${intent.hold}`;
    if ((chain.paid.get(id) ?? 0) > 1) {
      violations.push(`${s}: paid ${chain.paid.get(id)} times`);
    }
    if (landed !== undefined && intent.state === "failed") {
      violations.push(`${s}: failed but ${landed} landed`);
    }
    if (landed !== undefined && intent.hold === "voided") {
      violations.push(`${s}: hold voided but ${landed} landed`);
    }
    if (intent.state === "failed" && intent.hold !== "voided") {
      violations.push(`${s}: failed with hold not voided (I2)`);
    }
    if (intent.state === "settled" && intent.hold !== "captured") {
      violations.push(`${s}: settled with hold not captured (I6)`);
    }
    if (intent.state === "settled" && landed === undefined) {
      violations.push(`${s}: settled (captured) but nothing landed`);
    }
    for (const claim of claims.filter((c) => c.id === id)) {
      const ok = claim.says === "reviewed"
        ? ["needs_review", "settled", "failed"].includes(intent.state)
        : intent.state === claim.says;
      if (!ok) {
        violations.push(`${s}: an answer said ${claim.says}: ${claim.text}`);
      }
    }
    if (!["settled", "failed", "needs_review"].includes(intent.state)) {
      violations.push(`${s}: not resolved after the drain`);
    }
  }
  return { violations, log };
}
