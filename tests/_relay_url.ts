/**
 * Where a test's TCP relay listens: on 127.0.0.1 at a port of the system's
 * choosing, reached under the URL of the server it relays to.
 *
 * @module
 */

import type net from "node:net";

/**
 * Starts `relay` listening on 127.0.0.1, and answers `target` (a
 * `postgres://` URL) with the relay's host and port.
 */
export async function relayUrl(
  relay: net.Server,
  target: string,
): Promise<string> {
  await new Promise<void>((resolve) =>
    relay.listen(0, "127.0.0.1", () => resolve())
  );
  const via = new URL(target);
  via.hostname = "127.0.0.1";
  via.port = String((relay.address() as net.AddressInfo).port);
  return via.href;
}
