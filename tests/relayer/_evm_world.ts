/**
 * An adopter's world: an EVM-like chain (one account, sequential nonces, a
 * mempool with fee-bump replacement, drops, re-broadcasts of dropped txs,
 * shallow reorgs, reverts decided at each mining), a signer service
 * written from the Sender docs and spoken to through `HttpSender`, and the
 * relayer over `MemoryStore` driven by a QStash-like queue on a virtual
 * clock, with crashes between a send and its record and an operator who
 * resolves reviews through the route. At the end, whatever may still land
 * lands, the worst way for a failed payment.
 *
 * @module
 */
import {
  createRelayer,
  HttpSender,
  type Intent,
  MemoryStore,
  type Store,
} from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { mulberry32 } from "../../support/prng.ts";

export interface Tx {
  hash: string;
  intentId: string; // "" for an operator's cancel
  nonce: number;
  fee: number;
}
interface Mined {
  tx: Tx;
  ok: boolean;
}

export const FINAL = 3;

export class Chain {
  blocks: Mined[][] = [];
  mempool = new Map<number, Tx>();
  signed = new Map<string, Tx>();
  constructor(readonly rnd: () => number, readonly revertP: number) {}
  get minedCount(): number {
    let n = 0;
    for (const b of this.blocks) n += b.length;
    return n;
  }
  find(hash: string): { m: Mined; depth: number } | undefined {
    for (let i = 0; i < this.blocks.length; i++) {
      const m = this.blocks[i]!.find((m) => m.tx.hash === hash);
      if (m) return { m, depth: this.blocks.length - i };
    }
    return undefined;
  }
  minedAt(nonce: number): Mined | undefined {
    for (const b of this.blocks) {
      for (const m of b) if (m.tx.nonce === nonce) return m;
    }
    return undefined;
  }
  submit(
    tx: Tx,
  ): "ok" | "nonce too low" | "replacement underpriced" | "already known" {
    this.signed.set(tx.hash, tx);
    if (tx.nonce < this.minedCount) return "nonce too low";
    const old = this.mempool.get(tx.nonce);
    if (old?.hash === tx.hash) return "already known";
    if (old && tx.fee < old.fee * 1.1) return "replacement underpriced";
    this.mempool.set(tx.nonce, tx);
    return "ok";
  }
  mine() {
    const block: Mined[] = [];
    let n = this.minedCount;
    for (let k = 0; k < 2; k++) {
      const tx = this.mempool.get(n);
      if (!tx) break;
      this.mempool.delete(n);
      block.push({ tx, ok: this.rnd() >= this.revertP });
      n++;
    }
    this.blocks.push(block);
  }
  drop() {
    const keys = [...this.mempool.keys()];
    if (keys.length === 0) return;
    this.mempool.delete(keys[Math.floor(this.rnd() * keys.length)]!);
  }
  reorg(depth: number) {
    depth = Math.min(depth, FINAL - 1, this.blocks.length);
    const undone = this.blocks.splice(this.blocks.length - depth, depth);
    for (const b of undone) {
      for (const { tx } of b) {
        // Back to the mempool, unless evicted (or a replacement is there).
        if (this.rnd() < 0.5 && !this.mempool.has(tx.nonce)) {
          this.mempool.set(tx.nonce, tx);
        }
      }
    }
    for (let i = 0; i < depth; i++) this.blocks.push([]); // the new fork's blocks
  }
  rebroadcast() {
    const live = [...this.signed.values()].filter((tx) =>
      tx.nonce >= this.minedCount && !this.mempool.has(tx.nonce)
    );
    if (live.length === 0) return;
    const tx = live[Math.floor(this.rnd() * live.length)]!;
    this.mempool.set(tx.nonce, tx);
  }
  /** Anything that may still land lands, the worst way for a failed intent. */
  flush(failed: Set<string>) {
    for (;;) {
      const n = this.minedCount;
      const cands = [...this.signed.values()].filter((tx) => tx.nonce === n);
      if (cands.length === 0) break;
      const tx = cands.find((t) => failed.has(t.intentId)) ?? cands[0]!;
      this.blocks.push([{ tx, ok: true }]);
    }
    for (let i = 0; i < FINAL; i++) this.blocks.push([]);
  }
}

export type SendFault =
  | "ok"
  | "503_before" // nothing done, no flags
  | "503_before_notsent" // nothing done, declared
  | "502_after" // broadcast, then a proxy error
  | "timeout_after" // broadcast, answer lost
  | "timeout_before"
  | "400_poison_notsent" // refused before signing, no retry can help
  | "500_poison" // poison only: no retry helps, but it may have gone
  | "crash_after_broadcast"; // broadcast, signer died before keeping (if it keeps after)
export type ReceiptFault = "ok" | "503" | "timeout";

export interface SignerOptions {
  /** When the nonce is kept: before the tx leaves (right) or after the node accepted it. */
  keep: "before" | "after";
  /** What a rescue answers when the node says its nonce is used. */
  onNonceUsed: "notSent409" | "plain502" | "returnOwn";
  /** Report confirmed / reverted only at FINAL depth (right) or once mined (JSDoc example). */
  receiptDepth: number;
}

export class Signer {
  nonces = new Map<string, number>();
  fees = new Map<string, number>();
  local = 0;
  seq = 0;
  sendFaults: SendFault[] = [];
  receiptFaults: ReceiptFault[] = [];
  constructor(readonly chain: Chain, readonly o: SignerOptions) {}

  handle = async (req: Request): Promise<Response | "hang"> => {
    const url = new URL(req.url);
    if (req.method === "POST" && url.pathname === "/send") {
      const { intentId, replace } = await req.json();
      const fault = this.sendFaults.shift() ?? "ok";
      if (fault === "503_before") {
        return Response.json({ error: "busy" }, { status: 503 });
      }
      if (fault === "503_before_notsent") {
        return Response.json({
          error: "rpc down, nothing signed",
          notSent: true,
        }, {
          status: 503,
        });
      }
      if (fault === "timeout_before") return "hang";
      if (fault === "400_poison_notsent") {
        return Response.json({
          error: "policy refused",
          notSent: true,
          poison: true,
        }, { status: 400 });
      }
      const kept = this.nonces.get(intentId);
      let nonce: number;
      // Kept, the intent's nonce, even for `replace: false`: a first send
      // that reaches the signer after a rescue of its intent is late.
      if (kept !== undefined) nonce = kept;
      else {
        // A fresh nonce: the account's next, never one kept for another intent.
        nonce = Math.max(this.local, this.chain.minedCount);
        this.local = nonce + 1;
      }
      if (this.o.keep === "before") this.nonces.set(intentId, nonce);
      const fee = replace
        ? Math.ceil((this.fees.get(intentId) ?? 100) * 1.2)
        : 100;
      const tx: Tx = {
        hash: `0x${intentId}_${++this.seq}`,
        intentId,
        nonce,
        fee,
      };
      const r = this.chain.submit(tx);
      if (r === "ok" || r === "already known") {
        this.fees.set(intentId, fee);
        if (fault === "crash_after_broadcast") return "hang"; // never kept
        if (this.o.keep === "after") this.nonces.set(intentId, nonce);
        if (fault === "502_after") {
          return Response.json({ error: "bad gateway" }, { status: 502 });
        }
        if (fault === "timeout_after") return "hang";
        if (fault === "500_poison") {
          return Response.json({ error: "signer broken", poison: true }, {
            status: 500,
          });
        }
        return Response.json({ txHash: tx.hash });
      }
      if (r === "nonce too low") {
        const own = this.chain.minedAt(nonce);
        if (
          this.o.onNonceUsed === "returnOwn" && own?.tx.intentId === intentId
        ) {
          return Response.json({ txHash: own!.tx.hash });
        }
        if (this.o.onNonceUsed === "notSent409") {
          // Against the Sender docs (never notSent on a nonce that
          // carries a tx of the intent): money-safe here only because
          // every send of this world is the relayer's own, so its sticky
          // mayHaveSent stands; a copy it never sent (send_copy_test) is
          // a payment failed though paid.
          return Response.json({ error: "nonce too low", notSent: true }, {
            status: 409,
          });
        }
        return Response.json({ error: "nonce too low" }, { status: 502 });
      }
      // Underpriced: the node holds a tx on this nonce. A tx of this
      // intent (a copy of a send, or a first send that came late) may
      // land: never notSent, which the relayer would take for the payment
      // (its hold voided) if it never saw the request that sent that tx.
      const held = this.chain.mempool.get(nonce);
      if (held !== undefined && held.intentId === intentId) {
        return Response.json({ txHash: held.hash });
      }
      return Response.json({ error: r, notSent: true }, { status: 409 });
    }
    const m = /^\/receipt\/(.+)$/.exec(url.pathname);
    if (req.method === "GET" && m) {
      const fault = this.receiptFaults.shift() ?? "ok";
      if (fault === "503") {
        return Response.json({ error: "rpc" }, { status: 503 });
      }
      if (fault === "timeout") return "hang";
      const hash = decodeURIComponent(m[1]!);
      const found = this.chain.find(hash);
      if (found && found.depth >= this.o.receiptDepth) {
        return found.m.ok
          ? Response.json({ status: "confirmed" })
          : Response.json({ error: "reverted", poison: true }, { status: 409 });
      }
      if (found) return Response.json({ status: "pending" });
      const tx = this.chain.signed.get(hash);
      if (tx && this.chain.mempool.get(tx.nonce)?.hash === hash) {
        return Response.json({ status: "pending" });
      }
      return Response.json({ status: "dropped" });
    }
    return Response.json({ error: "not found" }, { status: 404 });
  };

  fetch: typeof fetch = (input, init) => {
    // No answer: rejected at once, as HttpSender's timeout would (both are
    // "maybe sent"), so a run waits on no timer.
    return this.handle(new Request(input as string, init)).then((r) =>
      r === "hang" ? Promise.reject(new TypeError("connection reset")) : r
    );
  };
}

export interface RunPlan {
  seed: number;
  intents: number;
  signer: SignerOptions;
  sendFaults: SendFault[];
  receiptFaults: ReceiptFault[];
  crashes: number[]; // indices of recordBroadcast calls that crash the process
  revertP: number;
  /**
   * none: reviews stay; route: fails through the route without nonceChecked
   * (only a reverted tx on record lets it); dropped: the runbook read
   * literally, "none can land (the signer dropped it)": nonceChecked once
   * every tx on record reads dropped and the nonce is not mined.
   */
  operator: "none" | "route" | "dropped";
  maxDeliveries?: number;
  stuckAfterMs?: number;
}

export interface RunResult {
  violations: string[];
  states: Record<string, string>;
  log: string[];
}

export async function run(plan: RunPlan): Promise<RunResult> {
  const rnd = mulberry32(plan.seed);
  const chain = new Chain(rnd, plan.revertP);
  const signer = new Signer(chain, plan.signer);
  signer.sendFaults = [...plan.sendFaults];
  signer.receiptFaults = [...plan.receiptFaults];
  const memory = new MemoryStore();
  let writes = 0;
  const crashes = new Set(plan.crashes);
  const store = new Proxy(memory, {
    get(target, prop, recv) {
      const v = Reflect.get(target, prop, recv);
      if (prop === "recordBroadcast" && typeof v === "function") {
        return (...args: unknown[]) => {
          if (crashes.has(writes++)) {
            return Promise.reject(new Error("process crashed"));
          }
          return v.apply(target, args);
        };
      }
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as Store;
  const clock = { t: 1_000_000 };
  const logLines: string[] = [];
  const log = (line: string) =>
    logLines.push(`t=${(clock.t - 1_000_000) / 1000}s ${line}`);
  const sender = new HttpSender({
    url: "http://signer.test",
    timeoutMs: 15,
    fetch: signer.fetch,
  });
  const policy = {
    maxDeliveries: plan.maxDeliveries ?? 10,
    baseMs: 5000,
    capMs: 120000,
    jitter: "none",
    stuckAfterMs: plan.stuckAfterMs ?? 60_000,
  } as const;
  const relayer = createRelayer({
    store,
    sender,
    policy,
    now: () => clock.t,
    random: () => 0.5,
    leaseMs: 30_000,
    clockSkewMs: 5_000,
  });
  const ids = Array.from({ length: plan.intents }, (_, i) => `pi${i}`);
  for (const id of ids) {
    await memory.createIntent({ id, state: "authorized", hold: "pending" });
  }
  const queue = ids.map((id) => ({
    id,
    at: clock.t + Math.floor(rnd() * 10_000),
    n: 1,
    live: true,
  }));
  const advance = (to: number) => {
    while (clock.t < to) {
      const step = Math.min(12_000, to - clock.t);
      clock.t += step;
      if (step === 12_000) {
        const r = rnd();
        if (r < 0.65) chain.mine();
        else if (r < 0.75) chain.drop();
        else if (r < 0.85) chain.reorg(1 + Math.floor(rnd() * 2));
        else chain.rebroadcast();
      }
    }
  };
  const giveUp = async (m: { id: string; n: number }) => {
    const g = await relayer.giveUp({ intentId: m.id, kind: "settle" }, {
      deliveries: m.n,
      queue: { queue: "qstash", messageId: `msg_${m.id}` },
    });
    log(`${m.id} giveUp ${g.action} ${g.reason}`);
  };
  for (let guard = 0; guard < 1000; guard++) {
    const m = queue.filter((m) => m.live).sort((a, b) => a.at - b.at)[0];
    if (!m) break;
    advance(m.at);
    const job = { intentId: m.id, kind: "settle" } as const;
    let outcome;
    try {
      outcome = await relayer.deliver(job, m.n);
    } catch (error) {
      log(`${m.id} #${m.n} threw ${(error as Error).message}`);
      if (m.n >= 12) {
        m.live = false;
        await giveUp(m);
      }
      m.n++;
      m.at = clock.t + 40_000; // the process restarts; the queue redelivers
      continue;
    }
    log(`${m.id} #${m.n} ${outcome.action} ${outcome.reason}`);
    if (outcome.action === "retry") {
      if (m.n >= 12) {
        m.live = false;
        await giveUp(m);
      }
      m.n++;
      m.at = clock.t + outcome.delayMs;
    } else m.live = false;
  }
  // Time passes: the chain goes on (still reorging shallow blocks).
  advance(clock.t + 20 * 12_000);
  // The operator resolves reviews.
  if (plan.operator !== "none") {
    // The monotonic clock the resolve route's send-in-flight wait counts
    // on: the operator waits its Retry-After on it.
    let mono = 0;
    const app = createApp({
      store,
      sender,
      opsToken: "ops-token-0123456789abc",
      now: () => clock.t,
      monotonicNow: () => mono,
    });
    for (const id of ids) {
      // A payment that may have sent answers its first fail 409
      // send-in-flight: the operator waits its Retry-After, then reads the
      // intent, looks the nonce up and posts again, as the runbook says.
      for (let attempt = 1; attempt <= 2; attempt++) {
        const intent = await memory.getIntent(id) as Intent;
        if (intent.state !== "needs_review") break;
        let nonceChecked = false;
        const nonce = signer.nonces.get(id);
        const ownMined = nonce !== undefined && chain.minedAt(nonce);
        if (ownMined && ownMined.tx.intentId === id && ownMined.ok) break; // settle: skip
        if (plan.operator === "dropped" && !ownMined) {
          const all = await Promise.all(
            intent.txHashes.map((h) => sender.receipt(h).catch(() => "err")),
          );
          nonceChecked = all.length > 0 && all.every((s) => s === "dropped");
        }
        const res = await app.request(`/v1/intents/${id}/resolve`, {
          method: "POST",
          headers: { authorization: "Bearer ops-token-0123456789abc" },
          body: JSON.stringify({
            to: "failed",
            version: intent.version,
            ...(nonceChecked ? { nonceChecked } : {}),
          }),
        });
        const text = await res.text();
        log(
          `operator fails ${id} nonceChecked=${nonceChecked}: ${res.status} ${
            text.slice(0, 120)
          }`,
        );
        const retryAfter = Number(res.headers.get("retry-after"));
        if (res.status !== 409 || !/send-in-flight/.test(text)) break;
        mono += retryAfter * 1000;
      }
    }
  }
  // Worst case: whatever may still land, lands.
  const states: Record<string, string> = {};
  const failed = new Set<string>();
  for (const id of ids) {
    const i = await memory.getIntent(id) as Intent;
    states[id] = `${i.state}/${i.hold}`;
    if (i.state === "failed") failed.add(id);
  }
  const settledBefore = new Map<string, boolean>();
  for (const id of ids) {
    settledBefore.set(
      id,
      chain.blocks.flat().some((m) => m.tx.intentId === id && m.ok),
    );
  }
  chain.flush(failed);
  const violations: string[] = [];
  for (const id of ids) {
    const i = await memory.getIntent(id) as Intent;
    const paid = chain.blocks.flat().filter((m) =>
      m.tx.intentId === id && m.ok
    );
    if (paid.length > 1) {
      violations.push(
        `${id}: paid twice (${
          paid.map((m) => `${m.tx.hash}@${m.tx.nonce}`)
        }) state ${i.state}`,
      );
    }
    if (i.state === "failed" && paid.length > 0) {
      violations.push(
        `${id}: failed (hold ${i.hold}) but paid by ${paid[0]!.tx.hash}`,
      );
    }
    if (i.state === "settled" && !settledBefore.get(id)) {
      violations.push(
        `${id}: settled (hold captured) but nothing of it on the chain`,
      );
    }
    if (i.state === "settling" || i.state === "authorized") {
      violations.push(`${id}: stranded ${i.state}`);
    }
  }
  return { violations, states, log: logLines };
}
