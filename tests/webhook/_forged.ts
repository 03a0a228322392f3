/**
 * What the forged-delivery suites send their forgeries to: the app with
 * every route configured (`makeApp`), over a fresh store holding
 * `pi_0001` authorized, whose one send is scripted so that the genuine
 * delivery sent after the forgeries is taken; and how many sends the
 * Sender was asked for, which no forgery may move.
 *
 * @module
 */

import type { ScriptedSender } from "../../mod.ts";
import type { AppDeps } from "../../webhook/app.ts";
import { AUTHORIZED, makeApp } from "./_app.ts";

/** `pi_0001`'s one send, scripted: its genuine delivery broadcasts `0xabc`. */
export const SENDS = { pi_0001: { sends: [{ txHash: "0xabc" }] } };

/**
 * The app (`makeApp`, with `deps` over its own) on a fresh store holding
 * `pi_0001` authorized, its send scripted by {@linkcode SENDS}.
 */
export function targetApp(
  deps?: Partial<AppDeps>,
): ReturnType<typeof makeApp> {
  return makeApp({
    intents: [AUTHORIZED],
    scripts: SENDS,
    ...(deps === undefined ? {} : { deps }),
  });
}

/** How many sends the signer was asked for. */
export function sendsOf(sender: ScriptedSender): number {
  return sender.calls.filter((call) => call.method === "send").length;
}
