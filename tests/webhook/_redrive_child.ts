/**
 * A process that redrives the letters `pi_0` … `pi_<n-1>` of a Deno KV
 * file onto its own queue, from letter `offset` on, as `KV_QUEUE=1` does:
 * the message enqueued in the commit that removes the letter. It prints
 * `ready` once the file is open, so that a test can kill it mid-way.
 *
 * Usage: `deno run --allow-read --allow-write --unstable-kv _redrive_child.ts <path> <n> <offset>`
 *
 * @module
 */

import { ConflictError, createRelayer, ScriptedSender } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";

const [path, count, offset] = Deno.args;
const kv = await Deno.openKv(path!);
// An hour out: the messages stay on the file's queue for the test to read.
const store = new KvStore(kv, {
  enqueueOptions: () => ({ delay: 3_600_000 }),
});
const relayer = createRelayer({ store, sender: new ScriptedSender({}) });
await Deno.stdout.write(new TextEncoder().encode("ready\n"));
const n = Number(count);
for (let k = 0; k < n; k++) {
  const i = (k + Number(offset)) % n;
  try {
    await relayer.redrive(`pi_${i}/settle`, {
      message: (job) => ({ job, id: crypto.randomUUID() }),
    });
  } catch (error) {
    // The other process took this letter first.
    if (!(error instanceof ConflictError)) throw error;
  }
}
kv.close();
