/**
 * A Sender whose sends hang until released, for tests of sends in flight.
 *
 * @module
 */
import type { Intent, ReceiptStatus, Sender } from "../../mod.ts";

/** A Sender whose sends hang until released, counting sends in flight. */
export function gatedSender() {
  let inFlight = 0;
  let maxInFlight = 0;
  const releases: Array<() => void> = [];
  const started: Array<() => void> = [];
  let sends = 0;
  const sender: Sender = {
    async send(_intent: Intent) {
      const n = ++sends;
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      started.shift()?.();
      await new Promise<void>((resolve) => releases.push(resolve));
      inFlight--;
      return { txHash: `0x${n.toString(16).padStart(4, "0")}` };
    },
    receipt(): Promise<ReceiptStatus> {
      return Promise.resolve("pending");
    },
  };
  return {
    sender,
    get maxInFlight() {
      return maxInFlight;
    },
    get sends() {
      return sends;
    },
    nextStart: () => new Promise<void>((resolve) => started.push(resolve)),
    releaseAll() {
      for (const release of releases.splice(0)) release();
    },
  };
}
