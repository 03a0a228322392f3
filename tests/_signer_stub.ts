/**
 * The signer the local-queue suites start beside the service: every send
 * lands as `0xabc`, every receipt answers `receipt`.
 *
 * @module
 */

/** The signer stub on a free port of 127.0.0.1; `sends()` counts the sends. */
export function signerStub(receipt: "pending" | "confirmed"): {
  stub: Deno.HttpServer<Deno.NetAddr>;
  sends: () => number;
} {
  let sends = 0;
  const stub = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen() {} },
    async (request) => {
      await request.body?.cancel();
      if (new URL(request.url).pathname === "/send") {
        sends++;
        return Response.json({ txHash: "0xabc" });
      }
      return Response.json({ status: receipt });
    },
  );
  return { stub, sends: () => sends };
}
