/**
 * The `deno task schedule` command a Pub/Sub retention refusal prints
 * reproduces the service's verdict for any of the settings that change it
 * (the policy's, `CLOCK_SKEW`, `SENDER_TIMEOUT`, `LEASE`, the retry and
 * dead-letter policies), each in milliseconds: read as the tool reads it,
 * it names the retention the refusal names, and with a millisecond more
 * the tool passes exactly when the service starts.
 * (`config_retention_schedule_test.ts` runs a few such commands as the
 * task does.)
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { parseDuration } from "../../mod.ts";
import { ConfigError, loadConfig } from "../../webhook/config.ts";
import { parseFlags, schedule } from "../../tools/schedule.ts";
import { runs } from "../_fc.ts";

/** The refusal `loadConfig` gives `env`, or `null`. */
function refusal(env: Record<string, string>): ConfigError | null {
  try {
    loadConfig(env);
    return null;
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
}

/** The tool's verdict on `args`: the retention it asks for, and whether it exits 0. */
function tool(args: readonly string[]) {
  const flags = parseFlags(args);
  assert.ok(!flags.help);
  const s = schedule(flags.policy, flags.queue, {
    clockSkewMs: flags.clockSkewMs,
  });
  return {
    needMs: s.retentionNeedMs,
    passes: s.outlasts && !s.stopsEarly && s.ownTooShortMs === undefined &&
      s.retentionNeedMs === undefined,
  };
}

/** A setting in milliseconds, or absent. */
function ms(min: number, max: number) {
  return fc.option(fc.integer({ min, max }).map((v) => `${v}ms`), {
    nil: undefined,
  });
}

Deno.test("the deno task schedule command a Pub/Sub retention refusal prints names the retention the service needs, and passes with it exactly when the service starts", () => {
  const settings = fc.record({
    MAX_DELIVERIES: fc.option(fc.integer({ min: 2, max: 15 }).map(String), {
      nil: undefined,
    }),
    BASE: ms(100, 20_000),
    CAP: ms(20_000, 600_000),
    JITTER: fc.option(fc.constantFrom("none", "full", "equal"), {
      nil: undefined,
    }),
    STUCK_AFTER: ms(1000, 900_000),
    CLOCK_SKEW: ms(0, 10_000),
    SENDER_TIMEOUT: ms(1000, 60_000),
    LEASE: ms(120_000, 900_000),
    PUBSUB_MIN_BACKOFF: ms(0, 600_000),
    PUBSUB_MAX_BACKOFF: ms(0, 600_000),
    PUBSUB_MAX_DELIVERY_ATTEMPTS: fc.option(
      fc.integer({ min: 5, max: 100 }).map(String),
      { nil: undefined },
    ),
    PUBSUB_MESSAGE_RETENTION: ms(600_000, 20_000_000).map((v) => v!),
  });
  let refused = 0;
  fc.assert(
    fc.property(settings, (given) => {
      const env: Record<string, string> = {
        SENDER_URL: "http://127.0.0.1:9000",
        PUBSUB_AUDIENCE: "https://relayer.example.test/v1/pubsub",
        PUBSUB_SERVICE_ACCOUNT: "pusher@p.iam.gserviceaccount.com",
      };
      for (const [name, value] of Object.entries(given)) {
        if (value !== undefined) env[name] = value;
      }
      if (env.PUBSUB_MAX_DELIVERY_ATTEMPTS !== undefined) {
        env.PUBSUB_DEAD_LETTER_AUDIENCE =
          "https://relayer.example.test/v1/pubsub/dead";
      }
      const error = refusal(env);
      fc.pre(error?.setting === "PUBSUB_MESSAGE_RETENTION");
      refused++;
      const command = error!.message.match(
        /, and check the retention you choose with deno task schedule (--queue pubsub .*--message-retention \S+)$/,
      );
      assert.ok(command, error!.message);
      const args = command[1]!.split(" ");
      const more = error!.message.match(/to more than (\d[\dhms.]*)/);
      assert.ok(more, error!.message);
      const needMs = parseDuration(more[1]!);
      const what = `${JSON.stringify(env)}\n${error!.message}`;
      assert.equal(tool(args).needMs, needMs, what);

      const taken = `${needMs + 1}ms`;
      const then = refusal({ ...env, PUBSUB_MESSAGE_RETENTION: taken });
      const after = tool(
        args.with(args.indexOf("--message-retention") + 1, taken),
      );
      assert.notEqual(then?.setting, "PUBSUB_MESSAGE_RETENTION", what);
      assert.equal(after.needMs, undefined, what);
      assert.equal(after.passes, then === null, `${what}\n${then?.message}`);
    }),
    { numRuns: runs(300) },
  );
  assert.ok(refused > 0);
});
