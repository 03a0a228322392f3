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
  /**
   * Ends the sends held now, and holds no later one: for a test that
   * waits for a sign that the send was waited on (a drain begun), not
   * for a fixed time.
   */
  release(): void;
  /** Stops it. */
  close(): Promise<void>;
}

/**
 * A signer stub on 127.0.0.1 whose sends take `holdMs` (or until
 * {@linkcode SlowSigner.release}), then answer `0xdrained`; every other
 * request is answered pending.
 */
export function slowSigner(holdMs: number): SlowSigner {
  const counts = { started: 0, finished: 0 };
  let started: () => void = () => {};
  const firstStarted = new Promise<void>((resolve) => (started = resolve));
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      if (new URL(req.url).pathname === "/send") {
        counts.started++;
        started();
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([
          released,
          new Promise((resolve) => (timer = setTimeout(resolve, holdMs))),
        ]);
        clearTimeout(timer);
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
    release: () => release(),
    close: () => server.shutdown(),
  };
}
