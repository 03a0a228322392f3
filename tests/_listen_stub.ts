/**
 * `Deno.listen` stood in for while a helper probes a port, for the tests
 * of a port another process takes between the probe and the bind.
 *
 * @module
 */

/**
 * Runs `start` with `Deno.listen` replaced by `fake` (which gets the real
 * one), and puts the real one back once `start` returned or threw.
 */
export async function withListen<T>(
  fake: (options: Deno.TcpListenOptions, real: typeof Deno.listen) => unknown,
  start: () => T | Promise<T>,
): Promise<T> {
  const listen = Deno.listen;
  Object.defineProperty(Deno, "listen", {
    value: (options: Deno.TcpListenOptions) => fake(options, listen),
    configurable: true,
    writable: true,
  });
  try {
    return await start();
  } finally {
    Object.defineProperty(Deno, "listen", {
      value: listen,
      configurable: true,
      writable: true,
    });
  }
}
