import assert from "node:assert/strict";
import fc from "fast-check";
import {
  createRelayer,
  definePolicy,
  MemoryStore,
  ScriptedSender,
} from "../../mod.ts";
import { createQueueHandler } from "../../cloudflare/queue_handler.ts";
import { ConfigError, loadConfig } from "../../webhook/config.ts";
import { workerConfig } from "../../webhook/_settings.ts";
import {
  cloudflareRetentionVerdict,
  parseFlags,
} from "../../tools/schedule.ts";
import { runSchedule, scheduleSession } from "./_schedule_cli.ts";
import { runs } from "../_fc.ts";

// `deno task schedule --queue cloudflare --message-retention X
// [--dlq-message-retention Y]` gives the verdict createQueueHandler gives
// (and the service's reading of CLOUDFLARE_MESSAGE_RETENTION and
// CLOUDFLARE_DLQ_MESSAGE_RETENTION before it): one rule, in
// policy/_cloudflare_retention.ts.

const DLQ = "relayer-jobs-dlq";

/** The handler's refusal, or "ok". */
function handlerVerdict(
  policy: { baseMs: number; capMs: number; maxDeliveries: number },
  s: {
    leaseMs: number;
    clockSkewMs: number;
    maxRetries: number;
    jobsMs?: number | undefined;
    deadMs?: number | undefined;
    delayMs?: number | undefined;
  },
): string {
  try {
    createQueueHandler({
      relayer: createRelayer({
        store: new MemoryStore(),
        sender: new ScriptedSender({}),
        policy: definePolicy({ ...policy, stuckAfterMs: 1000 }),
        leaseMs: s.leaseMs,
        clockSkewMs: s.clockSkewMs,
      }),
      maxRetries: s.maxRetries,
      deadLetterQueue: DLQ,
      deadLetterMaxRetries: 100,
      messageRetentionMs: s.jobsMs,
      deadLetterMessageRetentionMs: s.deadMs,
      deliveryDelayMs: s.delayMs,
    });
    return "ok";
  } catch (error) {
    assert.ok(error instanceof RangeError, String(error));
    return error.message;
  }
}

/**
 * Runs `deno task schedule` with `args`, checks that it exits with `code`
 * and that what it wrote to `stream` matches `pattern`, and returns what it
 * wrote.
 */
async function scheduled(
  args: string[],
  code: number,
  stream: "stdout" | "stderr",
  pattern: RegExp,
): Promise<{ stdout: string; stderr: string }> {
  const ran = await runSchedule(args);
  assert.equal(ran.code, code, ran.stdout + ran.stderr);
  assert.match(ran[stream], pattern);
  return ran;
}

/**
 * Runs `deno task schedule --queue cloudflare` with `args` and checks that
 * it exits 1, saying the retention is too short with the reason in
 * `refusal` (the handler's, after "Cannot create queue handler as ").
 */
async function refusedAsHandler(
  args: string[],
  refusal: string,
): Promise<void> {
  const { stdout } = await scheduled(
    ["--queue", "cloudflare", "--dlq-max-retries", "100", ...args],
    1,
    "stdout",
    /^retention TOO SHORT, createQueueHandler refuses it: /m,
  );
  assert.ok(
    stdout.includes(refusal.slice("Cannot create queue handler as ".length)),
    stdout,
  );
}

Deno.test("deno task schedule --queue cloudflare --message-retention prints the handler's refusal, with its wrangler command, and exits 1", async () => {
  const short = await runSchedule([
    "--queue",
    "cloudflare",
    "--dlq-max-retries",
    "100",
    "--max-retries",
    "9",
    "--message-retention",
    "10m",
  ]);
  assert.equal(short.code, 1, short.stderr);
  const refusal = handlerVerdict(
    { baseMs: 5000, capMs: 120_000, maxDeliveries: 10 },
    { leaseMs: 30_000, clockSkewMs: 5000, maxRetries: 9, jobsMs: 600_000 },
  );
  const reason = refusal.replace("Cannot create queue handler as ", "");
  // The least the check takes, named, and a command with room past it.
  assert.match(
    short.stdout,
    /the least this check takes is 12m1s\), with room: .*--message-retention-period-secs 86400 \(1 day, which every plan allows/,
  );
  assert.ok(short.stdout.includes(reason), short.stdout);
  await scheduled(
    [
      "--queue=cloudflare",
      "--dlq-max-retries=100",
      "--max-retries=9",
      "--message-retention=96h",
      "--dlq-message-retention=1m",
    ],
    1,
    "stdout",
    /the least this check takes is 14m1s\), with room: .*wrangler queues update relayer-jobs-dlq --message-retention-period-secs 86400 \(1 day, which every plan allows/,
  );
  await scheduled(
    [
      "--queue",
      "cloudflare",
      "--dlq-max-retries",
      "100",
      "--max-retries",
      "9",
      "--message-retention",
      "721s",
      "--dlq-message-retention",
      "336h",
    ],
    0,
    "stdout",
    /^retention jobs queue 12m1s > 12m0s, dead-letter queue 336h0m0s > 14m0s: OK/m,
  );
  await scheduled(
    [
      "--queue",
      "cloudflare",
      "--dlq-max-retries",
      "100",
      "--max-retries",
      "9",
      "--message-retention",
      "721s",
      "--delivery-delay",
      "1m",
    ],
    1,
    "stdout",
    /a message's delivery delay \(1m0s\) and the waits .*the least this check takes is 13m1s\), with room: .*--message-retention-period-secs 86400 /,
  );
  await scheduled(
    [
      "--queue",
      "cloudflare",
      "--message-retention",
      "90500ms",
    ],
    2,
    "stderr",
    /--message-retention must be whole seconds from 1m to 336h/,
  );
  await scheduled(
    [
      "--queue",
      "qstash",
      "--dlq-message-retention",
      "1h",
    ],
    2,
    "stderr",
    /--dlq-message-retention is a flag of --queue cloudflare/,
  );
});

Deno.test("createQueueHandler(), loadConfig() and deno task schedule give one verdict on a Cloudflare retention, across settings", () => {
  const seconds = (min: number, max: number) =>
    fc.integer({ min, max }).map((s) => s * 1000);
  const retention = fc.oneof(
    fc.constant(undefined),
    seconds(60, 3600),
    seconds(60, 1_209_600),
    fc.integer({ min: 1, max: 1_300_000_000 }), // some not allowed
  );
  fc.assert(
    fc.property(
      fc.record({
        maxDeliveries: fc.integer({ min: 3, max: 12 }),
        baseMs: seconds(1, 60),
        capMs: seconds(1, 3600),
        leaseMs: seconds(20, 600),
        clockSkewMs: seconds(0, 30),
        extraRetries: fc.integer({ min: 0, max: 5 }),
        jobsMs: retention,
        deadMs: retention,
        delayMs: fc.oneof(
          fc.constant(undefined),
          seconds(0, 600),
          fc.integer({ min: 0, max: 90_000_000 }), // some not whole seconds
        ),
      }),
      (g) => {
        fc.pre(g.baseMs <= g.capMs);
        const maxRetries = g.maxDeliveries - 1 + g.extraRetries;
        const policy = {
          baseMs: g.baseMs,
          capMs: g.capMs,
          maxDeliveries: g.maxDeliveries,
        };
        const ms = (v: number) => `${v}ms`;
        // The tool.
        const args = [
          "--max-deliveries",
          String(g.maxDeliveries),
          "--base",
          ms(g.baseMs),
          "--cap",
          ms(g.capMs),
          "--stuck-after",
          "1s",
          "--clock-skew",
          ms(g.clockSkewMs),
          "--queue",
          "cloudflare",
          "--dlq-max-retries",
          "100",
          "--max-retries",
          String(maxRetries),
          // The lease and the delay count only against a retention: alone,
          // a usage error.
          ...(g.jobsMs !== undefined || g.deadMs !== undefined
            ? [
              "--lease",
              ms(g.leaseMs),
              ...(g.delayMs !== undefined
                ? ["--delivery-delay", ms(g.delayMs)]
                : []),
            ]
            : []),
          ...(g.jobsMs !== undefined
            ? ["--message-retention", ms(g.jobsMs)]
            : []),
          ...(g.deadMs !== undefined
            ? ["--dlq-message-retention", ms(g.deadMs)]
            : []),
        ];
        let tool: string;
        try {
          const flags = parseFlags(args);
          assert.ok(!flags.help);
          tool = cloudflareRetentionVerdict(flags)?.refusal ?? "ok";
        } catch (error) {
          assert.equal((error as Error).name, "UsageError", String(error));
          tool = "not allowed";
        }
        // The service's settings, read as the example Worker reads them.
        let config: string;
        let read;
        // The option whose rule loadConfig refused by, as the handler would.
        let ruled: string | undefined;
        try {
          read = loadConfig({
            SENDER_URL: "http://127.0.0.1:9000",
            WEBHOOK_SECRET: "a-webhook-secret-16",
            MAX_DELIVERIES: String(g.maxDeliveries),
            BASE: ms(g.baseMs),
            CAP: ms(g.capMs),
            STUCK_AFTER: "1s",
            LEASE: ms(g.leaseMs),
            CLOCK_SKEW: ms(g.clockSkewMs),
            CLOUDFLARE_MAX_RETRIES: String(maxRetries),
            ...(g.jobsMs !== undefined
              ? { CLOUDFLARE_MESSAGE_RETENTION: ms(g.jobsMs) }
              : {}),
            ...(g.deadMs !== undefined
              ? { CLOUDFLARE_DLQ_MESSAGE_RETENTION: ms(g.deadMs) }
              : {}),
            ...(g.delayMs !== undefined &&
                (g.jobsMs !== undefined || g.deadMs !== undefined)
              ? { CLOUDFLARE_DELIVERY_DELAY: ms(g.delayMs) }
              : {}),
          });
        } catch (error) {
          if (
            !(error instanceof ConfigError) ||
            !/^CLOUDFLARE_(DLQ_MESSAGE_RETENTION|MESSAGE_RETENTION|DELIVERY_DELAY)$/
              .test(error.setting)
          ) {
            fc.pre(false); // refused for another reason: not this rule's
          } else if (
            /MESSAGE_RETENTION$/.test(error.setting) &&
            !/whole seconds from/.test(error.message)
          ) {
            // The handler's rule, in the setting's name.
            ruled = error.setting === "CLOUDFLARE_MESSAGE_RETENTION"
              ? "messageRetentionMs"
              : "deadLetterMessageRetentionMs";
          }
          read = undefined;
        }
        if (ruled !== undefined) config = `refused by ${ruled}'s rule`;
        else if (read === undefined) config = "not allowed";
        else {
          config = handlerVerdict(policy, {
            leaseMs: read.leaseMs,
            clockSkewMs: read.clockSkewMs,
            maxRetries: read.queues.cloudflare!.maxRetries,
            jobsMs: read.cloudflareRetentions?.messageRetentionMs,
            deadMs: read.cloudflareRetentions?.deadLetterMessageRetentionMs,
            delayMs: read.cloudflareRetentions?.deliveryDelayMs,
          });
        }
        // The handler, given the retentions directly.
        const direct = handlerVerdict(policy, {
          leaseMs: g.leaseMs,
          clockSkewMs: g.clockSkewMs,
          maxRetries,
          jobsMs: g.jobsMs,
          deadMs: g.deadMs,
          delayMs: g.jobsMs !== undefined || g.deadMs !== undefined
            ? g.delayMs
            : undefined,
        });
        const handler = /must be whole seconds/.test(direct)
          ? "not allowed"
          : direct;
        if (ruled !== undefined) {
          assert.ok(
            handler.startsWith(`Cannot create queue handler as '${ruled}' is `),
            `${config}, where the handler says: ${handler}`,
          );
        } else assert.equal(config, handler);
        assert.equal(
          tool === "ok" || tool === "not allowed"
            ? tool
            : `Cannot create queue handler as ${tool}`,
          handler,
        );
      },
    ),
    { numRuns: runs(300) },
  );
});

Deno.test("deno task schedule --queue cloudflare takes --sender-timeout with a retention, which the LEASE is checked against as the Worker's settings are", () => {
  // The refusal of a LEASE under twice SENDER_TIMEOUT says to lower
  // --sender-timeout: the flag is taken, and read as SENDER_TIMEOUT.
  assert.throws(
    () =>
      parseFlags([
        "--queue",
        "cloudflare",
        "--message-retention",
        "96h",
        "--lease",
        "11s",
      ]),
    /--lease \(11s\) must be at least twice --sender-timeout \(10s\).*or lower --sender-timeout/,
  );
  const flags = parseFlags([
    "--queue",
    "cloudflare",
    "--message-retention",
    "96h",
    "--lease",
    "11s",
    "--sender-timeout",
    "5s",
  ]);
  assert.ok(!flags.help);
  assert.equal(flags.cloudflareRetentions?.leaseMs, 11_000);
  // As the Worker's own settings: the same pair starts it.
  assert.equal(
    loadConfig({
      SENDER_URL: "http://127.0.0.1:9",
      WEBHOOK_SECRET: "a-webhook-secret-0123",
      CLOUDFLARE_MESSAGE_RETENTION: "96h",
      LEASE: "11s",
      SENDER_TIMEOUT: "5s",
    }).leaseMs,
    11_000,
  );
  // Alone it counts against the jobs queue's retention not given, 24 h,
  // as the handler counts it.
  const alone = parseFlags(["--queue", "cloudflare", "--sender-timeout", "5s"]);
  assert.ok(!alone.help);
  assert.equal(alone.cloudflareRetentions?.leaseMs, 30_000);
});

Deno.test("deno task schedule --queue cloudflare without a retention counts the jobs queue's as the handler does, 24 h, the Workers Free plan's, and gives its verdict, --lease and --delivery-delay counted in it; --delivery-delay is refused on another queue, and --dlq-message-retention named in its refusal", async () => {
  // BASE 1h, CAP 12h: 75 h of waits over 9 retries, which a Worker on
  // the Workers Free plan deletes at 24 h.
  const slow = { baseMs: 3_600_000, capMs: 43_200_000, maxDeliveries: 10 };
  const handler = handlerVerdict(slow, {
    leaseMs: 30_000,
    clockSkewMs: 5_000,
    maxRetries: 9,
  });
  assert.match(
    handler,
    /^Cannot create queue handler as 'messageRetentionMs' is not given, so it is counted as 24h0m0s, the Workers Free plan's /,
  );
  await refusedAsHandler(
    ["--max-retries", "9", "--base", "1h", "--cap", "12h"],
    handler,
  );
  // The dead-letter queue's too: 15 h of waits over 4 retries fit in the
  // jobs queue's 24 h, not a busy give-up's 12 h after them.
  const five = { baseMs: 3_600_000, capMs: 43_200_000, maxDeliveries: 5 };
  const dead = handlerVerdict(five, {
    leaseMs: 30_000,
    clockSkewMs: 5_000,
    maxRetries: 4,
  });
  assert.match(
    dead,
    /^Cannot create queue handler as 'deadLetterMessageRetentionMs' is not given, so it is counted as 24h0m0s, .* so it may be 27h0m0s old, /,
  );
  await refusedAsHandler(
    [
      "--max-retries",
      "4",
      "--max-deliveries",
      "5",
      "--base",
      "1h",
      "--cap",
      "12h",
    ],
    dead,
  );
  // The default policy's 12 min and 14 min fit in them: OK, and saying
  // what it counted.
  await scheduled(
    ["--queue", "cloudflare", "--dlq-max-retries", "100", "--max-retries", "9"],
    0,
    "stdout",
    /^retention jobs queue 24h0m0s \(not given: the Workers Free plan's, the least a plan keeps\) > 12m0s, dead-letter queue 24h0m0s \(not given: the Workers Free plan's, the least a plan keeps\) > 14m0s: OK, /m,
  );
  // --lease and --delivery-delay count in it: a lease of 2h (4 × 2h10s
  // and 5 × 2 min) fits, a delivery delay of 24h does not.
  for (
    const [flag, value, code] of [
      ["--lease", "2h", 0],
      ["--delivery-delay", "24h", 1],
    ] as const
  ) {
    const flags = parseFlags([
      "--queue",
      "cloudflare",
      "--dlq-max-retries",
      "100",
      "--max-retries",
      "9",
      flag,
      value,
    ]);
    assert.ok(!flags.help);
    assert.equal(
      cloudflareRetentionVerdict(flags)?.refusal === undefined ? 0 : 1,
      code,
      `${flag} ${value}`,
    );
  }
  for (const queue of ["qstash", "pubsub"]) {
    assert.throws(
      () => parseFlags(["--queue", queue, "--delivery-delay", "30s"]),
      /--delivery-delay is a flag of --queue cloudflare/,
      queue,
    );
  }
  assert.throws(
    () =>
      parseFlags(["--queue", "cloudflare", "--dlq-message-retention", "59s"]),
    /: --dlq-message-retention must be whole seconds from 1m to 336h/,
  );
});

Deno.test("deno task schedule --queue cloudflare counts the dead-letter queue's max_retries as createQueueHandler and a Worker's settings do, Cloudflare's 3 unless --dlq-max-retries, and exits 1 with the handler's refusal where they refuse it", async () => {
  fc.assert(
    fc.property(
      fc.record({
        baseMs: fc.oneof(
          fc.integer({ min: 1, max: 1000 }),
          fc.integer({ min: 1, max: 3600 }).map((s) => s * 1000),
        ),
        retries: fc.option(fc.integer({ min: 0, max: 100 }), {
          nil: undefined,
        }),
      }),
      ({ baseMs, retries }) => {
        const capMs = Math.max(baseMs, 120_000);
        const given = retries === undefined
          ? []
          : ["--dlq-max-retries", String(retries)];
        const flags = parseFlags([
          "--base",
          `${baseMs}ms`,
          "--cap",
          `${capMs}ms`,
          "--queue",
          "cloudflare",
          "--max-retries",
          "9",
          "--message-retention",
          "336h",
          "--dlq-message-retention",
          "336h",
          ...given,
        ]);
        assert.ok(!flags.help);
        const tool = cloudflareRetentionVerdict(flags)?.refusal;
        let handler: string | undefined;
        try {
          createQueueHandler({
            relayer: createRelayer({
              store: new MemoryStore(),
              sender: new ScriptedSender({}),
              policy: definePolicy({ baseMs, capMs, stuckAfterMs: 1000 }),
            }),
            maxRetries: 9,
            deadLetterQueue: DLQ,
            ...(retries === undefined ? {} : { deadLetterMaxRetries: retries }),
            messageRetentionMs: 1_209_600_000,
            deadLetterMessageRetentionMs: 1_209_600_000,
          });
        } catch (error) {
          assert.ok(error instanceof RangeError, String(error));
          handler = error.message;
        }
        assert.equal(
          tool === undefined
            ? undefined
            : `Cannot create queue handler as ${tool}`,
          handler,
        );
        // A Worker given the same settings starts exactly where the tool
        // says OK.
        let worker = true;
        try {
          workerConfig({
            SENDER_URL: "http://127.0.0.1:9000",
            WEBHOOK_SECRET: "a-webhook-secret-16",
            BASE: `${baseMs}ms`,
            CAP: `${capMs}ms`,
            // No rescue window to hold: the dead-letter queue's rule alone.
            STUCK_AFTER: "0ms",
            CLOCK_SKEW: "0ms",
            CLOUDFLARE_MAX_RETRIES: "9",
            CLOUDFLARE_MESSAGE_RETENTION: "336h",
            CLOUDFLARE_DLQ_MESSAGE_RETENTION: "336h",
            ...(retries === undefined
              ? {}
              : { CLOUDFLARE_DLQ_MAX_RETRIES: String(retries) }),
          });
        } catch (error) {
          assert.ok(error instanceof ConfigError, String(error));
          assert.equal(error.setting, "CLOUDFLARE_DLQ_MAX_RETRIES");
          worker = false;
        }
        assert.equal(worker, tool === undefined, tool);
      },
    ),
    { numRuns: runs(200) },
  );
  // Cloudflare's 3, not given: the handler's refusal, and exit 1.
  await using session = scheduleSession();
  const run = async (args: string[], code: number, pattern: RegExp) => {
    const ran = await session.run(["--queue", "cloudflare", ...args]);
    assert.equal(ran.code, code, ran.stdout + ran.stderr);
    assert.match(ran.stdout, pattern);
  };
  await run(
    ["--max-retries", "9"],
    1,
    /^dead-letter retries TOO FEW, createQueueHandler refuses them \(give --dlq-max-retries\): 'deadLetterMaxRetries' is 3, Cloudflare's default when max_retries is not set: .* at least 41 \(100 is safe\)/m,
  );
  await run(
    ["--max-retries", "9", "--dlq-max-retries", "40"],
    1,
    /'deadLetterMaxRetries' is 40: .* at least 41 \(100 is safe\)/,
  );
  await run(
    ["--max-retries", "9", "--dlq-max-retries", "41"],
    0,
    /: OK, no message is deleted while the handler may still retry it$/m,
  );
  assert.throws(
    () => parseFlags(["--queue", "qstash", "--dlq-max-retries", "100"]),
    /--dlq-max-retries is a flag of --queue cloudflare/,
  );
  assert.throws(
    () => parseFlags(["--queue", "cloudflare", "--dlq-max-retries", "101"]),
    /--dlq-max-retries must be an integer from 0 to 100/,
  );
});
