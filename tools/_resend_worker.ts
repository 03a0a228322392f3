/**
 * The send of the resend probe (`tools/_resend_probe.ts`), as the runtime
 * checks run it: `HttpSender` reads a receipt from the signer at `base`,
 * which leaves a kept-alive connection, waits a moment (the connection
 * goes back to the runtime's pool), then sends a payment on it. Portable
 * (no `Deno.*`, no Node API): it runs in-process on Node and Bun
 * (`tools/_resend_main.ts`) and in a Worker on workerd, whose route
 * (`GET /?base=<signer>`, the check's only) answers {@linkcode Sent} as
 * JSON.
 *
 * @module
 */

import { HttpSender, isNotSent, MemoryStore } from "../mod.ts";

/** What `HttpSender` made of the send. */
export interface Sent {
  /** What `receipt("0xwarm")` returned, or its error. */
  readonly receipt: string;
  /** `sent` (a tx hash), `not sent` (`isNotSent`) or `maybe sent` (any other error). */
  readonly outcome: "sent" | "not sent" | "maybe sent";
  /** The tx hash or the error's message. */
  readonly detail: string;
}

/** How long the kept-alive connection sits idle before the send. */
const IDLE_MS = 50;

/**
 * A receipt, then a send, through one `HttpSender` on the runtime's own
 * `fetch`.
 *
 * @example
 * ```ts ignore
 * const { outcome } = await sendOnce("http://127.0.0.1:9000");
 * ```
 */
export async function sendOnce(base: string): Promise<Sent> {
  const sender = new HttpSender({ url: base, timeoutMs: 5_000 });
  let receipt: string;
  try {
    receipt = await sender.receipt("0xwarm");
  } catch (error) {
    receipt = `threw ${(error as Error).message}`;
  }
  await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
  const intent = await new MemoryStore().createIntent({
    id: "pi_0001",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
  });
  try {
    const { txHash } = await sender.send(intent, { replace: false });
    return { receipt, outcome: "sent", detail: txHash };
  } catch (error) {
    return {
      receipt,
      outcome: isNotSent(error) ? "not sent" : "maybe sent",
      detail: (error as Error).message,
    };
  }
}

async function fetch(request: Request): Promise<Response> {
  const base = new URL(request.url).searchParams.get("base");
  if (base === null) return new Response("no base", { status: 400 });
  return Response.json(await sendOnce(base));
}

/**
 * The Worker: `GET /?base=<signer>` runs {@linkcode sendOnce} against the
 * signer and answers its {@linkcode Sent} as JSON.
 *
 * @example
 * ```ts ignore
 * const answer = await worker.fetch(new Request("http://probe.test/?base=http%3A%2F%2F127.0.0.1%3A9000"));
 * ```
 */
const worker: { fetch(request: Request): Promise<Response> } = { fetch };
export default worker;
