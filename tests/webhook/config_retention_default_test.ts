/**
 * A Pub/Sub subscription without a dead-letter policy, whose retention the
 * service was not told (`PUBSUB_MESSAGE_RETENTION` unset), keeps a message
 * Pub/Sub's default of 7 days, and drops it then with no dead letter: the
 * start check counts that default, so a `MAX_DELIVERIES` whose pushes may
 * not all come within it is refused, as a retention set that short is.
 *
 * @module
 */

import assert from "node:assert/strict";
import { checkQueue, definePolicy } from "../../mod.ts";
import { ConfigError, loadConfig } from "../../webhook/config.ts";

const env = {
  SENDER_URL: "http://127.0.0.1:9000",
  PUBSUB_AUDIENCE: "https://relayer.example.test/v1/pubsub",
  PUBSUB_SERVICE_ACCOUNT: "pusher@p.iam.gserviceaccount.com",
};
/** Pub/Sub's default message retention: 7 days. */
const WEEK_MS = 604_800_000;

Deno.test("loadConfig() refuses, with PUBSUB_MESSAGE_RETENTION unset and no dead-letter policy, MAX_DELIVERIES that Pub/Sub's default retention of 7 days may not hold, as checkQueue() counts it", () => {
  // Each failed push may take 25 s (2 × SENDER_TIMEOUT + 5s) and 10 min
  // before the next: 7 days hold 967 such steps, and the busy wait after
  // the last.
  const cases: [number, boolean][] = [[967, true], [968, false], [1000, false]];
  for (const [max, taken] of cases) {
    const settings = { ...env, MAX_DELIVERIES: String(max) };
    const queue = {
      kind: "pubsub",
      minBackoffMs: 10_000,
      maxBackoffMs: 600_000,
      retentionMs: WEEK_MS,
      ackDeadlineMs: 25_000,
    } as const;
    assert.equal(
      checkQueue(definePolicy({ maxDeliveries: max }), queue).problem ===
        null,
      taken,
      `checkQueue, MAX_DELIVERIES ${max}`,
    );
    if (taken) {
      assert.doesNotThrow(() => loadConfig(settings), `MAX_DELIVERIES ${max}`);
      continue;
    }
    assert.throws(() => loadConfig(settings), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.setting, "PUBSUB_MESSAGE_RETENTION");
      assert.match(
        error.message,
        /^PUBSUB_MESSAGE_RETENTION is unset, so the subscription's is counted as Pub\/Sub's default, 168h0m0s, and each failed delivery may take up to 25s .*: Pub\/Sub then drops it with no dead letter, and its intent is stranded\. Set the subscription's message retention, and PUBSUB_MESSAGE_RETENTION, to more than /,
      );
      assert.match(error.message, / --message-retention 168h0m0s$/);
      return true;
    });
  }
});

Deno.test("loadConfig() takes, with PUBSUB_MESSAGE_RETENTION unset, a MAX_DELIVERIES past 7 days' pushes where a retention is set that holds them, or its pushes fit in 7 days", () => {
  const many = { ...env, MAX_DELIVERIES: "1000" };
  assert.equal(
    loadConfig({ ...many, PUBSUB_MESSAGE_RETENTION: "744h" }).queues.pubsub
      .retentionMs,
    2_678_400_000,
  );
  // Shorter steps: a maximum backoff of 1 min fits 1000 pushes in 7 days.
  assert.equal(
    loadConfig({ ...many, PUBSUB_MAX_BACKOFF: "1m" }).queues.pubsub
      .retentionMs,
    undefined,
  );
});

Deno.test("loadConfig() counts LEASE and CLOCK_SKEW against Pub/Sub's default retention, as against one set: 967 pushes fit 7 days with 425 s over, which a busy last delivery's wait of more takes", () => {
  const settings = { ...env, MAX_DELIVERIES: "967" };
  // 967 × (25s + 10m) = 604 375 s of 604 800: the default wait (LEASE 30s
  // + 2 × CLOCK_SKEW 5s) fits.
  assert.doesNotThrow(() => loadConfig(settings));
  for (
    const [extra, wait] of [
      [{ LEASE: "7m" }, "7m10s"],
      [{ CLOCK_SKEW: "3m30s" }, "7m30s"],
    ] as const
  ) {
    // The same with the retention set to the default: refused alike.
    assert.throws(
      () =>
        loadConfig({ ...settings, ...extra, PUBSUB_MESSAGE_RETENTION: "168h" }),
      /: PUBSUB_MESSAGE_RETENTION is 168h0m0s, /,
      JSON.stringify(extra),
    );
    assert.throws(
      () => loadConfig({ ...settings, ...extra }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.setting, "PUBSUB_MESSAGE_RETENTION");
        assert.match(
          error.message,
          /^PUBSUB_MESSAGE_RETENTION is unset, so the subscription's is counted as Pub\/Sub's default, 168h0m0s, /,
        );
        assert.ok(error.message.includes(wait), `${wait}: ${error.message}`);
        return true;
      },
      JSON.stringify(extra),
    );
  }
});
