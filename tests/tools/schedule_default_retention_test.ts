/**
 * `deno task schedule --queue pubsub` without `--message-retention` and
 * without a dead-letter policy counts the subscription's retention as
 * Pub/Sub's default, 7 days, as the service's start check does with
 * `PUBSUB_MESSAGE_RETENTION` unset: its verdict is the service's.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseFlags, schedule, verdict } from "../../tools/schedule.ts";
import { ConfigError, loadConfig } from "../../webhook/config.ts";

const ENV = {
  SENDER_URL: "http://127.0.0.1:9000",
  PUBSUB_AUDIENCE: "https://relayer.example.test/v1/pubsub",
  PUBSUB_SERVICE_ACCOUNT: "pusher@p.iam.gserviceaccount.com",
};

/** Whether the service starts with `env`. */
function serviceStarts(env: Record<string, string>): boolean {
  try {
    loadConfig(env);
    return true;
  } catch (error) {
    if (error instanceof ConfigError) return false;
    throw error;
  }
}

Deno.test("tools/schedule.ts --queue pubsub without --message-retention or a dead-letter policy gives loadConfig()'s verdict on Pub/Sub's default retention of 7 days", () => {
  // Pushes of 25 s, 10 min apart: 7 days hold 967 of them and the busy
  // wait after the last, not 968.
  for (const [max, starts] of [[967, true], [968, false]] as const) {
    const flags = parseFlags([
      `--max-deliveries=${max}`,
      "--queue=pubsub",
      "--min-backoff=10s",
      "--max-backoff=10m",
    ]);
    assert.ok(!flags.help);
    const tool = schedule(flags.policy, flags.queue, {
      clockSkewMs: flags.clockSkewMs,
    });
    const ok = tool.outlasts && !tool.stopsEarly &&
      tool.ownTooShortMs === undefined && tool.retentionNeedMs === undefined;
    assert.equal(
      serviceStarts({ ...ENV, MAX_DELIVERIES: String(max) }),
      starts,
    );
    assert.equal(ok, starts, `MAX_DELIVERIES ${max}: ${verdict(tool)}`);
  }
  // A dead-letter policy gives up within 7 days: nothing counted.
  const flags = parseFlags([
    "--max-deliveries=100",
    "--queue=pubsub",
    "--max-delivery-attempts=100",
  ]);
  assert.ok(!flags.help);
  assert.equal(
    (flags.queue as { retentionMs?: number }).retentionMs,
    undefined,
  );
});
