/**
 * A Sender that plays a script: for tests, examples and the demo.
 *
 * @module
 */

import { show } from "../policy/_validate.ts";

import type { Intent } from "../store/store.ts";
import type { ReceiptStatus, Sender } from "./sender.ts";

/**
 * One scripted broadcast: the node accepts it with `txHash`, or `error` is thrown.
 *
 * @example A refusal, then an accepted broadcast
 * ```ts
 * import { isNotSent, MemoryStore, notSent, ScriptedSender, type SendStep } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const refused: SendStep = { error: notSent(new Error("signer is locked: nothing signed")) };
 * const accepted: SendStep = { txHash: "0xabc" };
 * const sender = new ScriptedSender({ pi_0001: { sends: [refused, accepted] } });
 * const intent = await new MemoryStore().createIntent({ id: "pi_0001" });
 * await assert.rejects(sender.send(intent, { replace: false }), (error) => isNotSent(error));
 * assert.deepEqual(await sender.send(intent, { replace: false }), { txHash: "0xabc" });
 * assert.deepEqual(await sender.send(intent, { replace: true }), { txHash: "0xabc" }); // the last repeats
 * ```
 */
export type SendStep = { readonly txHash: string } | {
  readonly error: unknown;
};

/**
 * What a {@linkcode ScriptedSender} does for one intent.
 *
 * @example Confirmed on the second look
 * ```ts
 * import { createRelayer, MemoryStore, ScriptedSender, type SenderScript } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const script: SenderScript = { sends: [{ txHash: "0xabc" }], receipts: ["pending", "confirmed"] };
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0001", state: "authorized", hold: "pending" });
 * const relayer = createRelayer({ store, sender: new ScriptedSender({ pi_0001: script }), now: () => 0 });
 * const reasons: string[] = [];
 * for (const n of [1, 2, 3]) reasons.push((await relayer.deliver({ intentId: "pi_0001", kind: "settle" }, n)).reason);
 * assert.deepEqual(reasons, [
 *   "sent 0xabc, waiting for confirmation",
 *   "waiting for 0xabc to confirm",
 *   "0xabc confirmed, intent settled",
 * ]);
 * ```
 */
export interface SenderScript {
  /** The outcome of each broadcast, in order; the last one repeats. */
  readonly sends: readonly SendStep[];
  /**
   * The status of each receipt read, in order; the last one repeats.
   *
   * @default {["pending"]}
   */
  readonly receipts?: readonly ReceiptStatus[];
}

/**
 * A call the {@linkcode ScriptedSender} received.
 *
 * @example Assert what the relayer asked of the chain
 * ```ts
 * import { createRelayer, MemoryStore, ScriptedSender, type SenderCall } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const sender = new ScriptedSender({ pi_0001: { sends: [{ txHash: "0xabc" }], receipts: ["confirmed"] } });
 * const store = new MemoryStore();
 * await store.createIntent({ id: "pi_0001", state: "authorized", hold: "pending" });
 * const relayer = createRelayer({ store, sender, now: () => 0 });
 * for (const n of [1, 2]) await relayer.deliver({ intentId: "pi_0001", kind: "settle" }, n);
 * const calls: readonly SenderCall[] = sender.calls;
 * assert.deepEqual(calls, [
 *   { method: "send", intentId: "pi_0001", replace: false },
 *   { method: "receipt", txHash: "0xabc" },
 * ]);
 * ```
 */
export type SenderCall =
  | {
    readonly method: "send";
    readonly intentId: string;
    readonly replace: boolean;
  }
  | { readonly method: "receipt"; readonly txHash: string };

/**
 * A {@linkcode Sender} that follows a script per intent and records every
 * call, so a test can assert what was broadcast and in which order.
 *
 * @example Script a timeout, then a success
 * ```ts
 * import { MemoryStore, ScriptedSender } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const sender = new ScriptedSender({
 *   pi_0001: { sends: [{ error: new Error("timeout") }, { txHash: "0xabc" }] },
 * });
 * const intent = await new MemoryStore().createIntent({
 *   id: "pi_0001",
 *   state: "settling",
 *   hold: "pending",
 *   settlingSince: 0,
 * });
 * await assert.rejects(sender.send(intent, { replace: false }), /timeout/);
 * assert.deepEqual(await sender.send(intent, { replace: true }), { txHash: "0xabc" });
 * assert.equal(sender.calls.length, 2);
 * ```
 */
export class ScriptedSender implements Sender {
  #scripts: Map<string, SenderScript>;
  #sends = new Map<string, number>();
  #receipts = new Map<string, number>();
  // Which intent's script sends each tx hash, so a receipt finds its script
  // even for a tx sent before this Sender existed.
  #owners = new Map<string, string>();
  /** Every call received, in order. */
  readonly calls: SenderCall[] = [];

  /**
   * Constructs a new instance.
   *
   * @param scripts The script for each intent id; an intent without one
   * gets an error on every broadcast.
   * @throws {TypeError} If `scripts` or a script is not of the shape of
   * {@linkcode SenderScript}, naming the intent and the field.
   */
  constructor(scripts: Readonly<Record<string, SenderScript>>) {
    checkScripts(scripts);
    this.#scripts = new Map(Object.entries(scripts));
    for (const [intentId, script] of this.#scripts) {
      for (const step of script.sends) {
        if ("txHash" in step) this.#owners.set(step.txHash, intentId);
      }
    }
  }

  /**
   * Plays the intent's next scripted send. See {@linkcode Sender.send}.
   */
  send(
    intent: Intent,
    options: { replace: boolean },
  ): Promise<{ txHash: string }> {
    this.calls.push({
      method: "send",
      intentId: intent.id,
      replace: options.replace,
    });
    const steps = this.#scripts.get(intent.id)?.sends ?? [];
    const step = next(this.#sends, intent.id, steps);
    if (step === undefined) {
      return Promise.reject(
        new Error(`scripted sender has no broadcast for ${intent.id}`),
      );
    }
    if ("error" in step) return Promise.reject(step.error);
    return Promise.resolve({ txHash: step.txHash });
  }

  /** Plays the next scripted receipt. See {@linkcode Sender.receipt}. */
  receipt(txHash: string): Promise<ReceiptStatus> {
    this.calls.push({ method: "receipt", txHash });
    const owner = this.#owners.get(txHash) ?? "";
    const steps = this.#scripts.get(owner)?.receipts ?? ["pending"];
    return Promise.resolve(next(this.#receipts, owner, steps) ?? "pending");
  }
}

function next<T>(
  cursor: Map<string, number>,
  key: string,
  steps: readonly T[],
): T | undefined {
  const index = cursor.get(key) ?? 0;
  cursor.set(key, index + 1);
  return steps[Math.min(index, steps.length - 1)];
}

/** Refuses scripts of the wrong shape, in words that name the field. */
function checkScripts(scripts: unknown): void {
  const refuse = (words: string, value: unknown): never => {
    throw new TypeError(
      `Cannot create ScriptedSender as ${words}: current value is ${
        show(value)
      }`,
    );
  };
  if (typeof scripts !== "object" || scripts === null) {
    refuse(
      'its scripts must be an object such as { pi_0001: { sends: [{ txHash: "0xabc" }] } }',
      scripts,
    );
  }
  for (const [id, script] of Object.entries(scripts as object)) {
    if (typeof script !== "object" || script === null) {
      refuse(
        `the script of ${id} must be an object with 'sends', an array of { txHash } or { error }`,
        script,
      );
    }
    for (const name of Object.keys(script)) {
      if (name !== "sends" && name !== "receipts") {
        throw new TypeError(
          `Cannot create ScriptedSender as the script of ${id} names ${
            JSON.stringify(name.slice(0, 40))
          }, which it does not read (sends, receipts): check its spelling`,
        );
      }
    }
    const { sends, receipts } = script as Partial<SenderScript>;
    if (!Array.isArray(sends)) {
      refuse(
        `'sends' of ${id} must be an array of { txHash } or { error }`,
        sends,
      );
    }
    (sends as unknown[]).forEach((step, i) => {
      if (
        typeof step !== "object" || step === null ||
        !(("txHash" in step && typeof step.txHash === "string") ||
          "error" in step)
      ) refuse(`'sends[${i}]' of ${id} must be { txHash } or { error }`, step);
    });
    if (
      receipts !== undefined &&
      !(Array.isArray(receipts) &&
        receipts.every((r) => ["confirmed", "pending", "dropped"].includes(r)))
    ) {
      refuse(
        `'receipts' of ${id} must be an array of "confirmed", "pending" or "dropped"`,
        receipts,
      );
    }
  }
}
