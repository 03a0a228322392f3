/**
 * Run by `tests/deploy_run_test.ts` on the Deno it names: a Pub/Sub push
 * to an app whose `googleJwks()` fetches its keys from a mirror's URL that
 * carries a key in its query, on a loopback port nothing listens on
 * (`Deno.args[0]`). Prints the answer's status and the app's log lines as
 * one line of JSON.
 *
 * @module
 */

import { createApp, googleJwks } from "../webhook/app.ts";
import { MemoryStore, ScriptedSender } from "../mod.ts";

/** What the mirror's URL carries, which no log line may hold. */
export const MIRROR_KEY = "mirror-key-0123456789";

if (import.meta.main) {
  const lines: string[] = [];
  const app = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    log: (line) => lines.push(line),
    pubsub: {
      audience: "https://relayer.example.test/v1/pubsub",
      serviceAccount: "pusher@project.iam.gserviceaccount.com",
      jwks: googleJwks({
        url: `http://127.0.0.1:${Deno.args[0]}/certs?key=${MIRROR_KEY}`,
      }),
    },
  });
  // A token with a kid: its keys are asked for before its signature is.
  const part = (value: unknown) =>
    btoa(JSON.stringify(value)).replaceAll("=", "").replaceAll("+", "-")
      .replaceAll("/", "_");
  const token = `${part({ alg: "RS256", kid: "k1", typ: "JWT" })}.${
    part({ iss: "https://accounts.google.com" })
  }.c2lnbmF0dXJl`;
  const res = await app.request("/v1/pubsub", {
    method: "POST",
    body: "{}",
    headers: { authorization: `Bearer ${token}` },
  });
  await res.body?.cancel();
  // Its one line is what deploy_run_test reads.
  // deno-lint-ignore no-console
  console.log(JSON.stringify({ status: res.status, lines }));
}
