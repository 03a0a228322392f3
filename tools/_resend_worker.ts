/**
 * The send of the resend probe (`tools/_resend_probe.ts`), as the runtime
 * checks run it: `HttpSender` reads a receipt from the signer at `base`,
 * which leaves a kept-alive connection, waits a moment (the connection
 * goes back to the runtime's pool), then sends a payment on it. Portable
 * (no `Deno.*`, no Node API): it runs in-process on Node and Bun
 * (`tools/_resend_main.ts`) and in a Worker on workerd, whose route
 * (`GET /?base=<signer>`, the check's only) answers {@linkcode Sent} as
 * JSON; `&form=string` (`bytes`, `stream`) runs {@linkcode rawSendOnce}
 * instead.
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

/** A body form the runtime's `fetch` takes, beside `HttpSender`'s `Blob`. */
export type BodyForm = "string" | "bytes" | "stream";

/** The body forms {@linkcode rawSendOnce} sends. */
export const BODY_FORMS: readonly BodyForm[] = ["string", "bytes", "stream"];

/**
 * The same receipt and send with the runtime's own `fetch`, the send's
 * body given as `form`: whether the runtime sends a body of that form
 * again, which `HttpSender`'s `Blob` alone does not show.
 *
 * @example
 * ```ts ignore
 * const { outcome } = await rawSendOnce("http://127.0.0.1:9000", "string");
 * ```
 */
export async function rawSendOnce(
  base: string,
  form: BodyForm,
): Promise<Sent> {
  let receipt: string;
  try {
    const answer = await globalThis.fetch(`${base}/receipt/0xwarm`);
    receipt = ((await answer.json()) as { status?: string }).status ??
      "no status";
  } catch (error) {
    receipt = `threw ${(error as Error).message}`;
  }
  await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
  const text = JSON.stringify({ intentId: "pi_0001", replace: false });
  const bytes = new TextEncoder().encode(text);
  const body = form === "string"
    ? text
    : form === "bytes"
    ? bytes
    : new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes);
        controller.close();
      },
    });
  try {
    const answer = await globalThis.fetch(`${base}/send`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
      // A stream body needs it on Node and Bun; workerd ignores it.
      ...(form === "stream" ? { duplex: "half" } : {}),
    } as RequestInit);
    const detail = await answer.text();
    return {
      receipt,
      outcome: answer.ok
        ? "sent"
        : /"notSent":true/.test(detail)
        ? "not sent"
        : "maybe sent",
      detail: `${answer.status} ${detail}`,
    };
  } catch (error) {
    return {
      receipt,
      outcome: "maybe sent",
      detail: (error as Error).message,
    };
  }
}

async function fetch(request: Request): Promise<Response> {
  const url = new URL(request.url);
  const base = url.searchParams.get("base");
  if (base === null) return new Response("no base", { status: 400 });
  const form = url.searchParams.get("form");
  if (form === null) return Response.json(await sendOnce(base));
  if (!(BODY_FORMS as readonly string[]).includes(form)) {
    return new Response("no such form", { status: 400 });
  }
  return Response.json(await rawSendOnce(base, form as BodyForm));
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
