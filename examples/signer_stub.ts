/**
 * A stand-in for your signer service, to try the relayer locally: it speaks
 * the `HttpSender` protocol and pretends to broadcast. Intent ids choose
 * the behaviour:
 *
 * - `pi_…_notsent`: declares nothing was sent and retrying will not help;
 * - `pi_…_timeout`: answers 502 "rpc: connection refused" (maybe sent);
 * - `pi_…_pending`: accepts with a txHash ending `_pending`, whose receipt
 *   stays pending (the steady state `deno task bench:http` measures);
 * - anything else: accepts, and the receipt confirms on the second read.
 *
 * A receipt of a tx it never signed (a hash mistyped, one it signed before
 * a restart) reads `dropped`, as the protocol asks of a tx the node does
 * not know: the relayer then rescues on the intent's nonce, which signs the
 * same tx again. Confirmed, it would have the payment settled with no tx.
 * A `_pending` hash stays pending either way.
 *
 * A send it cannot read (no string `intentId`) is refused before anything
 * is signed: 400, `notSent: true`. Every send of an intent, first, late or
 * rescue (`replace: true`), gets the same tx: its hash is the intent id's,
 * so at most one tx of a payment exists. A signer of your own keeps that
 * property with a nonce per intent (docs/api.md, the `Sender` docs): kept
 * durably before the tx leaves, reused by every later send of the intent
 * whatever `replace` says, and kept when its tx reads `dropped`; it says
 * `notSent: true` only when no tx of the request can reach the chain, now
 * or later, and never on a nonce that carries a tx of the intent that may
 * be out there (answer that tx's hash); a receipt it cannot read is an
 * error, one its node does not know `dropped`.
 *
 * `deno task signer` (port 9000, or `PORT`: `PORT=9001 deno task signer`;
 * it refuses arguments, `--port` too).
 *
 * @module
 */

// deno-lint-ignore-file no-console
const reads = new Map<string, number>();
/** The txs this process signed: a receipt of any other reads `dropped`. */
const signed = new Set<string>();

/** The stub's handler, exported for tests. */
export function signer(request: Request): Promise<Response> | Response {
  const url = new URL(request.url);
  if (request.method === "POST" && url.pathname === "/send") {
    return send(request);
  }
  const receipt = /^\/receipt\/(.+)$/.exec(url.pathname);
  if (request.method === "GET" && receipt) {
    const txHash = decodeURIComponent(receipt[1]!);
    if (txHash.endsWith("_pending")) {
      return Response.json({ status: "pending" });
    }
    if (!signed.has(txHash)) return Response.json({ status: "dropped" });
    const n = (reads.get(txHash) ?? 0) + 1;
    reads.set(txHash, n);
    return Response.json({ status: n >= 2 ? "confirmed" : "pending" });
  }
  return Response.json({ error: "not found" }, { status: 404 });
}

async function send(request: Request): Promise<Response> {
  let intentId: unknown;
  try {
    intentId = (await request.json() as { intentId?: unknown } | null)
      ?.intentId;
  } catch {
    intentId = undefined;
  }
  if (typeof intentId !== "string" || intentId === "") {
    // Nothing signed: declared, so the payment is not left to review. Not
    // poison: a request this signer cannot read, a newer one may.
    return Response.json({
      error: "a send needs a JSON body with a string intentId",
      notSent: true,
    }, { status: 400 });
  }
  if (intentId.endsWith("_notsent")) {
    return Response.json({
      error: "chain id mismatch",
      notSent: true,
      poison: true,
    }, { status: 400 });
  }
  if (intentId.endsWith("_timeout")) {
    return Response.json({ error: "rpc: connection refused" }, { status: 502 });
  }
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(intentId)),
  );
  const hex = Array.from(
    hash.slice(0, 8),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("");
  const txHash = `0x${hex}${intentId.endsWith("_pending") ? "_pending" : ""}`;
  signed.add(txHash);
  return Response.json({ txHash });
}

if (import.meta.main) {
  // `deno task signer --port 9001` hands `--port 9001` to this script, not
  // to Deno: refused, where serving on 9000 would go unnoticed. Counted,
  // not shown: an argument may be a secret.
  if (Deno.args.length > 0) {
    const count = Deno.args.length;
    console.error(
      `signer stub: it reads no arguments, so it refuses the ${count} argument${
        count === 1 ? "" : "s"
      } given (not shown): its port is PORT's, 9000 unless set (PORT=9001 deno task signer)`,
    );
    Deno.exit(2);
  }
  const text = Deno.env.get("PORT") || "9000";
  const port = /^\d{1,5}$/.test(text) ? Number(text) : Number.NaN;
  if (!(port >= 0 && port <= 65535)) {
    console.error(
      `signer stub: PORT must be a port number, 0-65535: current value is ${
        JSON.stringify(text)
      }`,
    );
    Deno.exit(1);
  }
  try {
    Deno.serve({
      port,
      hostname: "127.0.0.1",
      // The port it got: with PORT=0, one the system chose.
      onListen: ({ port }) =>
        console.log(`signer stub on http://127.0.0.1:${port}`),
    }, signer);
  } catch (error) {
    if (!(error instanceof Deno.errors.AddrInUse)) throw error;
    console.error(
      `signer stub: port ${port} is in use (another stub still running?): stop it, or set PORT to another port`,
    );
    Deno.exit(1);
  }
}
