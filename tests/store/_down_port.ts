/**
 * A loopback port nothing listens on, for a host list whose host is down.
 *
 * @module
 */

import net from "node:net";

/** A loopback port nothing listens on (a host that is down: refused). */
export async function downPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
