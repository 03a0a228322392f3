/**
 * Counts the connects `node:net` makes from now until `restore()`: a test
 * that a socket refuses before connecting asserts the count stays 0.
 *
 * @module
 */

import net from "node:net";

/** `net.connect` counted; `restore()` puts the original back. */
export function countedConnects(): { count(): number; restore(): void } {
  const connect = net.connect;
  let connects = 0;
  net.connect = ((...args: Parameters<typeof net.connect>) => {
    connects++;
    return connect(...args);
  }) as typeof net.connect;
  return {
    count: () => connects,
    restore: () => void (net.connect = connect),
  };
}
