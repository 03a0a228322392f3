/**
 * A signer stub whose sends take their time, for the drain suites: a
 * delivery stays in flight while a drain runs.
 *
 * @module
 */

/** A running {@linkcode slowSigner}. */
export interface SlowSigner {
  /** Sends begun, and sends answered. */
  readonly counts: { started: number; finished: number };
  /** Settles as the first send begins. */
  readonly firstStarted: Promise<void>;
  /** Its base URL, for `SENDER_URL`. */
  readonly url: string;
  /** Stops it. */
  close(): Promise<void>;
}

/**
 * A signer stub on 127.0.0.1 whose sends take `holdMs`, then answer
 * `0xdrained`; every other request is answered pending.
 */
export function slowSigner(holdMs: number): SlowSigner {
  const counts = { started: 0, finished: 0 };
  let started: () => void = () => {};
  const firstStarted = new Promise<void>((resolve) => (started = resolve));
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      if (new URL(req.url).pathname === "/send") {
        counts.started++;
        started();
        await new Promise((resolve) => setTimeout(resolve, holdMs));
        counts.finished++;
        return Response.json({ txHash: "0xdrained" });
      }
      return Response.json({ status: "pending" });
    },
  );
  return {
    counts,
    firstStarted,
    url: `http://127.0.0.1:${server.addr.port}`,
    close: () => server.shutdown(),
  };
}
