/**
 * `deno task schedule --queue pubsub` without `--message-retention` and
 * without a dead-letter policy counts the subscription's retention as
 * Pub/Sub's default, 7 days, as the service's start check does with
 * `PUBSUB_MESSAGE_RETENTION` unset: its verdict is the service's.
 *
 * @module
 */

import assert from "node:assert/strict";
import { main, parseFlags, schedule, verdict } from "../../tools/schedule.ts";
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

/** What `main(args)` printed to stdout. */
async function printed(args: readonly string[]): Promise<string> {
  let stdout = "";
  await main(args, { out: (line) => stdout += `${line}\n`, err: () => {} });
  return stdout;
}

Deno.test("tools/schedule.ts --queue pubsub without --message-retention or a dead-letter policy says the retention it counts is Pub/Sub's default, as the service's refusal does", async () => {
  const args = [
    "--max-deliveries=968",
    "--queue=pubsub",
    "--min-backoff=10s",
    "--max-backoff=10m",
  ];
  const unset = await printed(args);
  assert.match(
    unset,
    /^retention 168h0m0s \(Pub\/Sub's default: --message-retention is unset\); /m,
  );
  assert.match(
    unset,
    /; --message-retention is unset, so the subscription's is counted as Pub\/Sub's default, 168h0m0s: MESSAGE MAY EXPIRE /,
  );
  // The service's refusal of the same settings says it the same way.
  assert.throws(
    () => loadConfig({ ...ENV, MAX_DELIVERIES: "968" }),
    /PUBSUB_MESSAGE_RETENTION is unset, so the subscription's is counted as Pub\/Sub's default, 168h0m0s,/,
  );
  // Given, even as long as the default, it is the one given.
  const given = await printed([...args, "--message-retention=168h"]);
  assert.match(given, /^retention 168h0m0s; /m);
  assert.doesNotMatch(given, /Pub\/Sub's default/);
});

Deno.test("schedule() marks a retention as Pub/Sub's default only on a Pub/Sub queue with a retention counted", () => {
  const policy = { maxDeliveries: 3 };
  const options = { retentionDefault: true };
  const pubsub = {
    kind: "pubsub",
    minBackoffMs: 40_000,
    maxBackoffMs: 600_000,
  } as const;
  assert.equal(
    schedule(policy, { ...pubsub, retentionMs: 7 * 86_400_000 }, options)
      .retentionDefault,
    true,
  );
  for (
    const queue of [
      pubsub,
      { kind: "qstash", retries: 4 },
      { kind: "cloudflare", maxRetries: 3 },
      undefined,
    ] as const
  ) {
    assert.equal(
      schedule(policy, queue, options).retentionDefault,
      undefined,
      JSON.stringify(queue),
    );
  }
});
