/**
 * `workerConfig` leaves `QSTASH_TOKEN` unchecked, as a Worker publishes
 * through its own queue; but the Worker serves the ops routes with
 * `OPS_TOKEN`, and a token equal to QStash's opens them to whoever reads
 * QStash's console, as it would the service's. Refused, as `loadConfig`
 * refuses it.
 *
 * @module
 */
import assert from "node:assert/strict";
import { ConfigError, loadConfig, workerConfig } from "../../webhook/app.ts";

const ENV = {
  SENDER_URL: "http://127.0.0.1:9",
  WEBHOOK_SECRET: "a-webhook-secret-16",
  CLOUDFLARE_MAX_RETRIES: "9",
  CLOUDFLARE_DLQ_MAX_RETRIES: "100",
};
const TOKEN = "a-shared-token-0123456789";

Deno.test("workerConfig refuses an OPS_TOKEN equal to the QSTASH_TOKEN it is given, in loadConfig's words", () => {
  const service = () =>
    loadConfig({
      ...ENV,
      OPS_TOKEN: TOKEN,
      QSTASH_TOKEN: TOKEN,
      PUBLIC_URL: "https://relayer.example.test",
      QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
      QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
    });
  assert.throws(service, ConfigError);
  let said = "";
  try {
    service();
  } catch (error) {
    said = (error as Error).message;
  }
  assert.match(said, /^OPS_TOKEN must differ from QSTASH_TOKEN: /);
  assert.throws(
    () => workerConfig({ ...ENV, OPS_TOKEN: TOKEN, QSTASH_TOKEN: TOKEN }),
    (error: unknown) => error instanceof ConfigError && error.message === said,
  );
});

Deno.test("workerConfig takes an OPS_TOKEN apart from the QSTASH_TOKEN it is given, and names that token once", () => {
  const { config, unread } = workerConfig({
    ...ENV,
    OPS_TOKEN: TOKEN,
    QSTASH_TOKEN: "another-token-0123456789",
  });
  assert.equal(config.opsToken, TOKEN);
  assert.equal(
    unread.filter((line) => line.startsWith("relayer: QSTASH_TOKEN is set"))
      .length,
    1,
  );
});

Deno.test("workerConfig refuses an OPS_TOKEN equal to the QSTASH_TOKEN it is given as numbers (wrangler.toml's unquoted [vars])", () => {
  const digits = 1234567890123456;
  assert.throws(
    () =>
      workerConfig({
        ...ENV,
        CLOUDFLARE_MAX_RETRIES: 9,
        OPS_TOKEN: digits,
        QSTASH_TOKEN: digits,
      }),
    /^ConfigError: OPS_TOKEN must differ from QSTASH_TOKEN: /,
  );
});
