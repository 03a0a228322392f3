/**
 * Bounded reads of an answer's body, for the outbound calls whose far end
 * could send without end (a signer, Google's keys): at most `maxBytes` of
 * it are read and kept, the rest is let go. Web APIs only.
 *
 * @module
 */

/**
 * Rejects with the signal's reason once it aborts, whatever `promise` does:
 * the deadline holds even for an injected fetch that ignores the signal.
 *
 * @typeParam T What `promise` resolves to.
 * @param promise What to wait for.
 * @param signal What ends the wait.
 * @returns `promise`'s outcome, or the signal's reason if it aborts first.
 *
 * @example A promise that never settles, cut by its signal
 * ```ts
 * import assert from "node:assert/strict";
 *
 * const controller = new AbortController();
 * const waiting = abortable(new Promise(() => {}), controller.signal);
 * controller.abort(new Error("late"));
 * await assert.rejects(waiting, /late/);
 * ```
 */
export function abortable<T>(
  promise: Promise<T>,
  signal: AbortSignal,
): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() =>
      signal.removeEventListener("abort", onAbort)
    );
  });
}

/**
 * Reads at most `maxBytes` of a body as UTF-8 text, then lets the rest go
 * (the reader is cancelled): `truncated` says there was more. A body of
 * exactly `maxBytes` is whole.
 *
 * @param response The answer whose body to read.
 * @param signal Ends the read (its reason is the rejection).
 * @param maxBytes The most bytes read.
 * @returns The text read, and whether the body went on past `maxBytes`.
 *
 * @example An endless body is read to its cap, no further
 * ```ts
 * import assert from "node:assert/strict";
 *
 * const endless = new ReadableStream<Uint8Array>({
 *   pull: (c) => c.enqueue(new TextEncoder().encode("a")),
 * });
 * const read = await readText(new Response(endless), AbortSignal.timeout(1000), 4);
 * assert.deepEqual(read, { text: "aaaa", truncated: true });
 * ```
 */
export async function readText(
  response: Response,
  signal: AbortSignal,
  maxBytes: number,
): Promise<{ text: string; truncated: boolean }> {
  if (response.body === null) return { text: "", truncated: false };
  const length = response.headers.get("content-length");
  // Content-Length counts the bytes on the wire: with a Content-Encoding,
  // fetch hands over the decoded body, which may be a thousand times more.
  // With a Transfer-Encoding it says nothing (RFC 9112 §6.3): fetch reads
  // such an answer to its connection's close, the header still shown.
  if (
    length !== null && /^\d{1,5}$/.test(length) &&
    +length <= maxBytes && !response.headers.has("content-encoding") &&
    !response.headers.has("transfer-encoding")
  ) {
    // The usual answer, a short JSON body of a declared length: read whole
    // in one call (the chunk-by-chunk loop below cost more than the rest of
    // the exchange). The length is checked again: an injected fetch may
    // declare one and deliver another.
    const bytes = new Uint8Array(
      await abortable(response.arrayBuffer(), signal),
    );
    return {
      text: new TextDecoder().decode(bytes.subarray(0, maxBytes)),
      truncated: bytes.length > maxBytes,
    };
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let size = 0;
  let done = false;
  try {
    for (;;) {
      const chunk = await abortable(reader.read(), signal);
      if (chunk.done) {
        done = true;
        return { text: text + decoder.decode(), truncated: false };
      }
      const bytes = chunk.value.subarray(0, maxBytes - size);
      size += bytes.byteLength;
      text += decoder.decode(bytes, { stream: true });
      if (bytes.byteLength < chunk.value.byteLength) {
        return { text: text + decoder.decode(), truncated: true };
      }
    }
  } finally {
    if (!done) reader.cancel().catch(() => {});
  }
}
