/**
 * A TCP relay to a PostgreSQL server whose listener can close while the
 * connections opened through it go on: the server's address then refuses
 * new connections (a cancel's among them), as one whose postmaster stopped
 * taking connections in a failover or a restart.
 *
 * @module
 */

import net from "node:net";

/** A relay from {@linkcode refusingRelay}. */
export interface RefusingRelay {
  /** `target` with the relay's port: connect through it. */
  readonly url: string;
  /** Closes the listener: new connections are refused from here on. */
  refuse(): void;
  /** Ends every connection opened through the relay, and the listener. */
  close(): void;
}

/** A relay on 127.0.0.1 to the server at `target` (a `postgres://` URL). */
export async function refusingRelay(target: string): Promise<RefusingRelay> {
  const to = new URL(target);
  const sockets: net.Socket[] = [];
  const relay = net.createServer((client) => {
    const upstream = net.connect(Number(to.port), to.hostname);
    sockets.push(client, upstream);
    client.on("error", () => {});
    upstream.on("error", () => {});
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) =>
    relay.listen(0, "127.0.0.1", () => resolve())
  );
  const via = new URL(target);
  via.port = String((relay.address() as net.AddressInfo).port);
  return {
    url: via.href,
    refuse: () => void relay.close(),
    close() {
      if (relay.listening) relay.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}
