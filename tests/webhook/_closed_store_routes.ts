/**
 * What every ops route that reads first says on a store closed under it
 * (the service's stop closes the Deno KV handle, or the PostgresStore; a
 * request its drain cut short may still reach a route): its read read
 * nothing and wrote nothing, never that its write "may have landed" or
 * that a redrive "did not complete … if it did complete after all". On
 * Deno (`closed_store_routes_test.ts`) and on Node over `@deno/kv`
 * (`tests/node/kv_contract_node.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { type Job, ScriptedSender, type Store } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { deadLetter } from "../store/_contract.ts";

const OPS = "ops-token-for-closed-store-routes";

/**
 * Seeds `store` with an authorized intent and its job's dead letter, closes
 * it with `close`, then asserts what every ops route that reads first says.
 */
export async function assertReadNothing(store: Store, close: () => void) {
  const intent = await store.createIntent({
    id: "pi_0001",
    state: "authorized",
    hold: "pending",
  });
  await store.putDeadLetter(deadLetter("pi_0001/settle", 1));
  const queued: Job[] = [];
  const lines: string[] = [];
  const app = createApp({
    store,
    sender: new ScriptedSender({}),
    opsToken: OPS,
    log: (line) => void lines.push(line),
    enqueue: (job) => Promise.resolve(void queued.push(job)),
    redriveTo: { publish: (job) => Promise.resolve(void queued.push(job)) },
  });
  close();
  const calls: [string, string, string?][] = [
    ["POST", "/v1/dead-letters/pi_0001/settle/redrive"],
    ["DELETE", "/v1/dead-letters/pi_0001/settle"],
    ["GET", "/v1/intents/pi_0001"],
    ["GET", "/v1/dead-letters"],
    [
      "POST",
      "/v1/intents/pi_0001/resolve",
      JSON.stringify({
        to: "failed",
        version: intent.version,
        nonceChecked: true,
      }),
    ],
    [
      "POST",
      "/v1/jobs",
      JSON.stringify({
        intentId: "pi_0001",
        kind: "settle",
      }),
    ],
  ];
  for (const [method, path, body] of calls) {
    const res = await app.request(path, {
      method,
      headers: { authorization: `Bearer ${OPS}` },
      ...(body === undefined ? {} : { body }),
    });
    const problem = await res.json();
    const which = `${method} ${path}: ${problem.detail}`;
    assert.equal(res.status, 503, which);
    assert.equal(res.headers.get("retry-after"), "5", which);
    assert.match(
      problem.detail,
      /read nothing and wrote nothing[^]*try again/,
      which,
    );
    assert.doesNotMatch(
      problem.detail,
      /may have landed|did not complete|could not reach/,
      which,
    );
  }
  assert.deepEqual(queued, [], "nothing queued");
  return lines.join("\n");
}
