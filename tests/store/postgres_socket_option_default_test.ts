/**
 * `answeredSocketOption()` with no bound given waits 10 s (the store's
 * default `connectionWaitMs`) for an answer to what a connection wrote
 * before it closes it: a server silent for a few seconds is not cut.
 *
 * @module
 */

import assert from "node:assert/strict";
import net from "node:net";
import { answeredSocketOption } from "../../store/postgres_socket.ts";

/**
 * A loopback server that takes each connection and says nothing on it;
 * `close()` ends the connections it took, then the server.
 */
async function silentServer(): Promise<
  { port: number; close(): Promise<void> }
> {
  const taken: net.Socket[] = [];
  const server = net.createServer((client) => {
    taken.push(client);
    client.on("error", () => {});
  });
  await new Promise<void>((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve())
  );
  const { port } = server.address() as net.AddressInfo;
  return {
    port,
    async close() {
      for (const client of taken) client.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

Deno.test("answeredSocketOption() without a bound does not cut a connection silent for 1.5 s after a write", async () => {
  const { port, close } = await silentServer();
  const cuts: string[] = [];
  const { socket } = answeredSocketOption(undefined, (line) => cuts.push(line));
  const connection = socket({ host: ["127.0.0.1"], port: [port] });
  connection.on("error", () => {});
  try {
    connection.write("hello");
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    assert.deepEqual(cuts, []);
    assert.equal(connection.destroyed, false);
  } finally {
    connection.destroy();
    await socket.closed(5_000);
    await close();
  }
});

Deno.test("answeredSocketOption() without a bound watches a write for 10 s, the store's default connectionWaitMs", async () => {
  const { port, close } = await silentServer();
  const { socket } = answeredSocketOption();
  const connection = socket({ host: ["127.0.0.1"], port: [port] });
  connection.on("error", () => {});
  // The timers set while the write is handed on: the watch's among them.
  const delays: unknown[] = [];
  const realSetTimeout = globalThis.setTimeout;
  globalThis.setTimeout = ((fn: () => void, ms?: number) => {
    delays.push(ms);
    return realSetTimeout(fn, ms);
  }) as typeof setTimeout;
  try {
    connection.write("hello");
  } finally {
    globalThis.setTimeout = realSetTimeout;
  }
  try {
    assert.ok(delays.includes(10_000), `timers set: ${delays}`);
  } finally {
    connection.destroy();
    await socket.closed(5_000);
    await close();
  }
});
