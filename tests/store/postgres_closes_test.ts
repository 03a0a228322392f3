/**
 * `poolCloses` and `onPoolClose` on a stand-in client whose `onclose` is
 * called by hand, as postgres.js 3.4.9 calls it when a connection of its
 * pool closes: no server needed.
 */

import assert from "node:assert/strict";
import { onPoolClose, poolCloses } from "../../store/_postgres_closes.ts";

/** A client whose `options.onclose` records the ids it was called with. */
function standIn(): {
  client: { options: { onclose?: (id: number) => unknown } };
  theirs: number[];
  close: (id: number) => unknown;
} {
  const theirs: number[] = [];
  const client = {
    options: {
      onclose: (id: number) => {
        theirs.push(id);
        return `closed ${id}`;
      },
    } as { onclose?: (id: number) => unknown },
  };
  return { client, theirs, close: (id) => client.options.onclose?.(id) };
}

/** Lets the microtasks queued so far run. */
const turn = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

Deno.test("onPoolClose() calls its watcher once for several closes in one turn, after them, and again for a close in a later turn", async () => {
  const { client, theirs, close } = standIn();
  let calls = 0;
  onPoolClose(client, () => calls++);
  close(1);
  close(2);
  close(3);
  // Not in the close's own turn: postgres.js hands its queue on first.
  assert.equal(calls, 0);
  await turn();
  assert.equal(calls, 1);
  close(4);
  await turn();
  assert.equal(calls, 2);
  // The client's own onclose, each time, with its answer passed on.
  assert.deepEqual(theirs, [1, 2, 3, 4]);
  assert.equal(close(5), "closed 5");
});

Deno.test("poolCloses() is one count per client, shared by every caller, counting from the first call that installed the chain, in the close's own turn", () => {
  const { client, theirs, close } = standIn();
  close(0); // before any call: not counted
  const first = poolCloses(client);
  assert.equal(first.count, 0);
  close(1);
  assert.equal(first.count, 1);
  const again = poolCloses(client);
  assert.equal(again, first);
  assert.equal(again.count, 1);
  // A watch added later rides the same chain: one more close counts once.
  const stop = onPoolClose(client, () => {});
  close(2);
  assert.equal(first.count, 2);
  stop();
  // The client's own onclose was called once per close, never twice.
  assert.deepEqual(theirs, [0, 1, 2]);
});

Deno.test("poolCloses() of a client without options (a stand-in), or whose options are no object, stays 0, and onPoolClose() watches nothing there", () => {
  const count = poolCloses({});
  assert.equal(count.count, 0);
  assert.equal(poolCloses({ options: null }).count, 0);
  assert.equal(poolCloses({ options: "postgres://" }).count, 0);
  const stop = onPoolClose({ options: undefined }, () => {
    throw new Error("not watched");
  });
  stop();
});
