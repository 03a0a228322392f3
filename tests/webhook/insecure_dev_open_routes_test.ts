/**
 * `RELAYER_INSECURE_DEV` refused at a URL off this machine names each route
 * it would open, by the keys set: a route whose keys are set is not named,
 * and one whose keys are not is, each by its own keys alone (a route named
 * open while it is signed, or signed while it is open, misleads an operator
 * deciding which keys to set).
 *
 * @module
 */

import assert from "node:assert/strict";
import { ConfigError, loadConfig } from "../../webhook/config.ts";

const URL_OFF = "https://relayer.example.com";
const QSTASH = {
  QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
  QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
};
const PUBSUB = {
  PUBSUB_AUDIENCE: `${URL_OFF}/v1/pubsub`,
  PUBSUB_SERVICE_ACCOUNT: "push@p.iam.gserviceaccount.com",
};
const DEAD_LETTER = {
  PUBSUB_DEAD_LETTER_AUDIENCE: `${URL_OFF}/v1/pubsub/dead-letter`,
};
const DELIVERIES = { WEBHOOK_SECRET: "a-webhook-secret-16" };
const OPS = { OPS_TOKEN: "an-ops-token-of-16" };
const OPS_NAMED =
  "the ops routes (which create and resolve intents, and publish, redrive and discard jobs)";

/** The routes the refusal of `keys` names as open. */
function named(keys: Record<string, string>): string {
  try {
    loadConfig({
      SENDER_URL: "http://127.0.0.1:9000",
      PUBLIC_URL: URL_OFF,
      RELAYER_INSECURE_DEV: "1",
      ...keys,
    });
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    assert.equal(error.setting, "RELAYER_INSECURE_DEV", error.message);
    const match = / from anyone who reaches it, on (.*)\. Unset /.exec(
      error.message,
    );
    assert.ok(match, error.message);
    return match[1]!;
  }
  assert.fail(`taken: ${JSON.stringify(keys)}`);
}

Deno.test("loadConfig() refusing RELAYER_INSECURE_DEV off this machine names as open each route whose keys are not set, and no route whose keys are", () => {
  const cases: [Record<string, string>, string][] = [
    [
      QSTASH,
      `/v1/pubsub, /v1/pubsub/dead-letter, /v1/deliveries, ${OPS_NAMED}`,
    ],
    [
      DELIVERIES,
      `/v1/qstash and /v1/qstash/failed, /v1/pubsub, /v1/pubsub/dead-letter, ${OPS_NAMED}`,
    ],
    [
      OPS,
      "/v1/qstash and /v1/qstash/failed, /v1/pubsub, /v1/pubsub/dead-letter, /v1/deliveries",
    ],
    [
      PUBSUB,
      `/v1/qstash and /v1/qstash/failed, /v1/pubsub/dead-letter, /v1/deliveries, ${OPS_NAMED}`,
    ],
    [
      { ...PUBSUB, ...DEAD_LETTER },
      `/v1/qstash and /v1/qstash/failed, /v1/deliveries, ${OPS_NAMED}`,
    ],
    [
      { ...QSTASH, ...DELIVERIES, ...OPS },
      "/v1/pubsub, /v1/pubsub/dead-letter",
    ],
    // QStash's publisher token signs nothing: its routes stay open.
    [
      { QSTASH_TOKEN: "qstash-token-0123456789", ...DELIVERIES, ...OPS },
      "/v1/qstash and /v1/qstash/failed, /v1/pubsub, /v1/pubsub/dead-letter",
    ],
    // One route left open is named, not taken for none.
    [
      { ...QSTASH, ...PUBSUB, ...DEAD_LETTER, ...DELIVERIES },
      OPS_NAMED,
    ],
    [
      { ...QSTASH, ...PUBSUB, ...DEAD_LETTER, ...OPS },
      "/v1/deliveries",
    ],
  ];
  for (const [keys, routes] of cases) {
    assert.equal(named(keys), routes, Object.keys(keys).join(", "));
  }
});
