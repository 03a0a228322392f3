/**
 * A network partition on 127.0.0.1, for the tests of a client's pool
 * across one (store/postgres_partition_pool_test.ts, _docs_service.ts).
 *
 * @module
 */

import net from "node:net";
import { relayUrl } from "./_relay_url.ts";

/**
 * A relay to `target` whose `hole()` stops forwarding and reading both
 * ways on every connection, its sockets left open, and accepts new ones
 * without forwarding them; `replace()` forwards new connections again.
 */
export async function blackHole(target: string) {
  const sockets = new Set<net.Socket>();
  const held = new Set<net.Socket>();
  let holding = false;
  const hold = (socket: net.Socket) => {
    socket.pause();
    held.add(socket);
  };
  const relay = net.createServer((client) => {
    client.on("error", () => {});
    sockets.add(client);
    if (holding) return hold(client);
    const { hostname, port } = new URL(target);
    const server = net.connect(Number(port), hostname);
    sockets.add(server);
    server.on("error", () => {});
    server.on("close", () => client.destroy());
    client.on("close", () => server.destroy());
    client.on("data", (bytes: Uint8Array) => {
      if (!held.has(client)) server.write(bytes);
    });
    server.on("data", (bytes: Uint8Array) => {
      if (!held.has(server)) client.write(bytes);
    });
  });
  return {
    url: await relayUrl(relay, target),
    hole() {
      holding = true;
      for (const socket of sockets) hold(socket);
    },
    replace: () => void (holding = false),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        relay.close(() => resolve());
      }),
  };
}
