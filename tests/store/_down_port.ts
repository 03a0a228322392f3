/**
 * A loopback port nothing listens on, for a host list whose host is down.
 *
 * @module
 */

import net from "node:net";

/**
 * The ports given: below the ephemeral ports the system hands out for a
 * listen on port 0 and for outgoing connections (Linux's default range
 * starts at 32768, IANA's, which other systems use, at 49152), and above
 * the well-known services' numbers.
 */
const LOWEST = 10_000;
const HIGHEST = 32_767;

/** The ports handed out in this process, so that each call gives another. */
const given = new Set<number>();

/**
 * A loopback port nothing listens on (a host that is down: refused), and
 * another at each call.
 *
 * A port probed free with a listen on port 0, then closed, is one the
 * system may hand out again to the next listen on port 0 (any test's
 * server on a shared machine, a PostgreSQL started on a probed port), and
 * a host list that names it would then reach that server. So the port is
 * drawn below the ephemeral range, where a listener comes only from a bind
 * to that number, and checked refused now; drawn at random, as a test may
 * later bring its down host up on it (another test file running beside it
 * draws another). What remains: a process that binds that very number
 * between this call and the test's connect (another test's down host
 * coming up on the same draw, one in about 23,000), or a system whose
 * ephemeral range was set to reach below 32768 (the range is not read:
 * Deno reads `/proc/sys` only with every permission).
 */
export async function downPort(): Promise<number> {
  for (let tries = 0; tries < 100; tries++) {
    // Not Math.random: a test counts the draws of its own.
    const [draw32] = crypto.getRandomValues(new Uint32Array(1));
    const port = LOWEST + draw32! % (HIGHEST - LOWEST + 1);
    if (given.has(port) || !await refused(port)) continue;
    given.add(port);
    return port;
  }
  throw new Error(
    `downPort: 100 loopback ports drawn from ${LOWEST} to ${HIGHEST} were each taken or not refused`,
  );
}

/** Whether a connect to 127.0.0.1 at `port` is refused now. */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", (error: NodeJS.ErrnoException) => {
      socket.destroy();
      resolve(error.code === "ECONNREFUSED");
    });
  });
}
