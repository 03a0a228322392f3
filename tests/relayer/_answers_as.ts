/**
 * Stores of one's own that answer wrongly, made from a MemoryStore: one
 * method's answers passed through a function (nothing, text for a count,
 * `undefined` for a missing letter), the rest as MemoryStore answers; and
 * an app over such a store that keeps its log lines.
 *
 * @module
 */

import { MemoryStore, ScriptedSender, type Store } from "../../mod.ts";
import { createApp, type WebhookApp } from "../../webhook/app.ts";

/** What `method` of a Store answers, awaited. */
type AnswerOf<M extends keyof Store> = Store[M] extends
  ((...args: never[]) => infer R) | undefined ? Awaited<R> : never;

/**
 * A MemoryStore whose `method` does what MemoryStore's does, then answers
 * what `as` makes of its answer; `memory` is the store beneath, to set up
 * and read back.
 */
export function answersAs<M extends keyof Store>(
  method: M,
  as: (answer: AnswerOf<M>) => unknown,
): { store: Store; memory: MemoryStore } {
  const memory = new MemoryStore();
  const store = new Proxy(memory, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (key !== method) return value.bind(target);
      return async (...args: unknown[]) => as(await value.apply(target, args));
    },
  });
  return { store, memory };
}

/** The ops token of {@linkcode opsAppOver}'s app. */
export const OPS_TOKEN = "ops-token-for-store-answers";

/** An app over `store` with its ops routes on {@linkcode OPS_TOKEN}, and the lines it logs. */
export function opsAppOver(store: Store): {
  app: WebhookApp;
  lines: string[];
} {
  const lines: string[] = [];
  const app = createApp({
    store,
    sender: new ScriptedSender({}),
    now: () => 1_000,
    random: () => 0,
    opsToken: OPS_TOKEN,
    log: (line) => void lines.push(line),
  });
  return { app, lines };
}

/**
 * `GET /v1/intents/pi_0001` on an app over `store` (pi_0001 made
 * authorized in `memory` first): its status, its body and the lines
 * logged.
 */
export async function readIntentOver(
  store: Store,
  memory: MemoryStore,
): Promise<{ status: number; body: string; lines: string[] }> {
  await memory.createIntent({ id: "pi_0001", state: "authorized" });
  const { app, lines } = opsAppOver(store);
  const answer = await app.request("/v1/intents/pi_0001", {
    headers: { authorization: `Bearer ${OPS_TOKEN}` },
  });
  return { status: answer.status, body: await answer.text(), lines };
}
