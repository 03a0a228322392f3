/**
 * Run with `--v8-flags=--expose-gc`: 300 requests through an `HttpSender`
 * whose timeout is its longest (answered at once, answered 500, and a
 * fetch that throws), then a garbage collection; prints how many of the
 * signals the requests were given are still held, as JSON.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { HttpSender } from "../../mod.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with --v8-flags=--expose-gc");

const signals: WeakRef<AbortSignal>[] = [];
let calls = 0;
const sender = new HttpSender({
  url: "https://signer.example",
  timeoutMs: 2_147_483_647,
  fetch: (_input, init) => {
    signals.push(new WeakRef(init!.signal!));
    const kind = calls++ % 3;
    if (kind === 0) {
      return Promise.resolve(Response.json({ status: "pending" }));
    }
    if (kind === 1) {
      return Promise.resolve(Response.json({ error: "busy" }, { status: 500 }));
    }
    return Promise.reject(new TypeError("connection refused"));
  },
});
for (let i = 0; i < 300; i++) {
  await sender.receipt(`0x${i}`).catch(() => {});
}
// Past the microtasks of the last request.
await new Promise((resolve) => setTimeout(resolve, 0));
gc();
gc();
const held = signals.filter((ref) => ref.deref() !== undefined).length;
console.log(JSON.stringify({ requests: signals.length, held }));
// A timer left behind must not keep this process up: the test reads it.
Deno.exit(0);
