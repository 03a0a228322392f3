/**
 * A relayer whose give-up its store answers busy, for the dead-letter
 * queue's tests of one.
 *
 * @module
 */

import { createRelayer, MemoryStore, type Relayer } from "../../mod.ts";
import { heldWrites } from "../_held_writes.ts";

/**
 * `memory` holding an authorized intent `pi_0001` with its hold pending,
 * and a relayer (jitter 0.5, no send expected) whose every write on it is
 * refused busy, as another session's lock holds its row.
 */
export async function busyGiveUp(): Promise<
  { memory: MemoryStore; relayer: Relayer }
> {
  const memory = new MemoryStore();
  await memory.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  const relayer = createRelayer({
    store: heldWrites(memory),
    sender: {
      send: () => Promise.reject(new Error("no send expected")),
      receipt: () => Promise.resolve("pending"),
    },
    random: () => 0.5,
  });
  return { memory, relayer };
}
