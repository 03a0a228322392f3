/**
 * A Worker's settings for its Cloudflare queues are checked where the
 * Worker's other settings are (`workerConfig`, `loadConfig`), by the rule
 * the queue handler applies to the same numbers: a Worker that reads them
 * with workerConfig but builds its handler without one of them had it
 * taken unchecked, and `main.ts` said of a value every Worker refuses that
 * it was "checked all the same".
 *
 * @module
 */

import assert from "node:assert/strict";
import { HttpSender, MemoryStore } from "../../mod.ts";
import { createQueueHandler } from "../../cloudflare/queue_handler.ts";
import { createApp, routeOptions } from "../../webhook/app.ts";
import { type Config, ConfigError, loadConfig } from "../../webhook/config.ts";
import { unreadSettingLines, workerConfig } from "../../webhook/_settings.ts";

const base = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-webhook-secret-16",
  CLOUDFLARE_MAX_RETRIES: "9",
  CLOUDFLARE_DLQ_MAX_RETRIES: "100",
};

/**
 * The relayer of the app built from `config` on a memory store, for a
 * queue handler.
 */
function relayerOf(config: Config) {
  return createApp({
    store: new MemoryStore(),
    sender: new HttpSender(config.sender),
    policy: config.policy,
    leaseMs: config.leaseMs,
    clockSkewMs: config.clockSkewMs,
    ...routeOptions(config),
  }).relayer;
}

/** The refusal of `env` by workerConfig, which must refuse it. */
function refused(env: Record<string, string>): ConfigError {
  try {
    workerConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  assert.fail(`workerConfig took ${JSON.stringify(env)}`);
}

/**
 * What the example Workers' handler says of `env`'s queue settings, read
 * without their check in workerConfig: after "'option' is ", or
 * `undefined` if it takes them.
 */
function handlerRefusal(env: Record<string, string>): string | undefined {
  const read = (name: string) =>
    env[name] === undefined ? undefined : env[name];
  const { config } = workerConfig({
    ...base,
    ...Object.fromEntries(
      Object.entries(env).filter(([name]) =>
        !/^CLOUDFLARE_(DLQ_MAX_RETRIES|MESSAGE_RETENTION|DLQ_MESSAGE_RETENTION)$/
          .test(name)
      ),
    ),
  });
  const ms = (name: string) => {
    const text = read(name);
    return text === undefined
      ? undefined
      : Number(/^(\d+)(m|h)$/.exec(text)![1]) *
        (text.endsWith("h") ? 3_600_000 : 60_000);
  };
  const relayer = relayerOf(config);
  try {
    createQueueHandler({
      relayer,
      maxRetries: config.queues.cloudflare?.maxRetries,
      deadLetterQueue: "<dead-letter queue>",
      deadLetterMaxRetries: Number(read("CLOUDFLARE_DLQ_MAX_RETRIES") ?? 3),
      messageRetentionMs: ms("CLOUDFLARE_MESSAGE_RETENTION"),
      deadLetterMessageRetentionMs: ms("CLOUDFLARE_DLQ_MESSAGE_RETENTION"),
    });
    return undefined;
  } catch (error) {
    assert.ok(error instanceof RangeError, String(error));
    return /^Cannot create queue handler as '[A-Za-z]+' is (.*)$/s.exec(
      error.message,
    )![1];
  }
}

Deno.test("workerConfig() refuses a queue's message retention, or a dead-letter queue's max_retries, that the queue handler refuses, naming the setting with the handler's reason", () => {
  const cases = [
    ["CLOUDFLARE_MESSAGE_RETENTION", { CLOUDFLARE_MESSAGE_RETENTION: "10m" }],
    ["CLOUDFLARE_DLQ_MESSAGE_RETENTION", {
      CLOUDFLARE_DLQ_MESSAGE_RETENTION: "10m",
    }],
    ["CLOUDFLARE_DLQ_MAX_RETRIES", { CLOUDFLARE_DLQ_MAX_RETRIES: "3" }],
  ] as const;
  for (const [name, values] of cases) {
    const env = { ...base, ...values };
    const why = handlerRefusal(env);
    assert.ok(why !== undefined, `the handler takes ${name}`);
    const error = refused(env);
    assert.equal(error.setting, name);
    if (name === "CLOUDFLARE_DLQ_MAX_RETRIES") {
      assert.match(
        error.message,
        /^CLOUDFLARE_DLQ_MAX_RETRIES is 3, so a give-up that fails while the store is down would be retried for only .* \(less than 14 days, Cloudflare's longest retention\) before Cloudflare deletes it, and its intent would be stranded\. Set the dead-letter queue consumer's max_retries and CLOUDFLARE_DLQ_MAX_RETRIES to at least \d+ \(100 is safe\)$/,
      );
    } else {
      assert.equal(error.message, `${name} is ${why}`);
    }
  }
  // What the handler takes, workerConfig takes.
  const taken = {
    ...base,
    CLOUDFLARE_MESSAGE_RETENTION: "96h",
    CLOUDFLARE_DLQ_MESSAGE_RETENTION: "336h",
  };
  assert.equal(handlerRefusal(taken), undefined);
  assert.equal(
    workerConfig(taken).config.cloudflareRetentions?.messageRetentionMs,
    96 * 3_600_000,
  );
});

Deno.test("main.ts names a Worker's message retention that the Worker refuses, beside the max_retries it is counted with, with the Worker's refusal, not as checked", () => {
  const env = { ...base, CLOUDFLARE_MESSAGE_RETENTION: "10m" };
  const line = unreadSettingLines(env).find((line) =>
    line.startsWith("relayer: CLOUDFLARE_MESSAGE_RETENTION ")
  );
  assert.equal(
    line,
    `relayer: CLOUDFLARE_MESSAGE_RETENTION is set, but only a Cloudflare Worker reads it (its queue handler, createQueueHandler) and this service consumes no Cloudflare queue, so it is ignored here; a Worker given this value refuses to start: ${
      refused(env).message
    }`,
  );
  assert.match(
    unreadSettingLines({ ...base, CLOUDFLARE_DLQ_MAX_RETRIES: "3" })[1]!,
    /CLOUDFLARE_DLQ_MAX_RETRIES .* a Worker given this value refuses to start: CLOUDFLARE_DLQ_MAX_RETRIES is 3, so a give-up/,
  );
});

Deno.test("workerConfig() counts a message retention not given as the queue handler does, 24 h, naming it unset; the service's own settings, which hold no CLOUDFLARE_*, are never held to a Cloudflare retention", () => {
  // 9 retries under a CAP of 12 h: about 75 h of waits, past 24 h.
  const long = { BASE: "1h", CAP: "12h", STUCK_AFTER: "1h" };
  const error = refused({ ...base, ...long });
  assert.equal(error.setting, "CLOUDFLARE_MESSAGE_RETENTION");
  assert.match(
    error.message,
    /^CLOUDFLARE_MESSAGE_RETENTION is unset, so it is counted as 24h0m0s, the Workers Free plan's \(fixed there; a paid plan keeps messages 4 days unless set\): /,
  );
  // The handler says the same of its option not given.
  const { config } = workerConfig({
    ...base,
    ...long,
    CLOUDFLARE_MESSAGE_RETENTION: "96h",
    CLOUDFLARE_DLQ_MESSAGE_RETENTION: "96h",
  });
  const relayer = relayerOf(config);
  assert.throws(
    () =>
      createQueueHandler({
        relayer,
        maxRetries: 9,
        deadLetterQueue: "<dead-letter queue>",
        deadLetterMaxRetries: 100,
      }),
    /^RangeError: Cannot create queue handler as 'messageRetentionMs' is not given, so it is counted as 24h0m0s, the Workers Free plan's/,
  );
  // The service (main.ts leaves every CLOUDFLARE_* out): no queue of
  // Cloudflare's to count a retention against.
  const {
    CLOUDFLARE_MAX_RETRIES: _,
    CLOUDFLARE_DLQ_MAX_RETRIES: __,
    ...service
  } = base;
  // Three waits of 12 h, past 24 h were Cloudflare's 3 retries counted.
  const longer = { ...long, BASE: "12h" };
  assert.equal(loadConfig({ ...service, ...longer }).policy.baseMs, 43_200_000);
});

Deno.test("loadConfig() counts a message retention not given as 24 h where CLOUDFLARE_DELIVERY_DELAY or CLOUDFLARE_DLQ_MAX_RETRIES alone is set, as the queue handler built from its settings does", () => {
  // Three waits of 12 h (Cloudflare's 3 retries, CLOUDFLARE_MAX_RETRIES
  // unset): past 24 h.
  const longer = {
    SENDER_URL: base.SENDER_URL,
    WEBHOOK_SECRET: base.WEBHOOK_SECRET,
    BASE: "12h",
    CAP: "12h",
    STUCK_AFTER: "1h",
    MAX_DELIVERIES: "4",
  };
  const handler = (deliveryDelayMs?: number) => {
    const config = loadConfig(longer);
    const relayer = relayerOf(config);
    try {
      createQueueHandler({
        relayer,
        deadLetterQueue: "<dead-letter queue>",
        deadLetterMaxRetries: 100,
        deliveryDelayMs,
      });
    } catch (error) {
      return String(error).replace(
        /^RangeError: Cannot create queue handler as 'messageRetentionMs' is not given,/,
        "CLOUDFLARE_MESSAGE_RETENTION is unset,",
      );
    }
    return "taken";
  };
  for (
    const [more, delayMs] of [
      [{ CLOUDFLARE_DELIVERY_DELAY: "1m" }, 60_000],
      [{ CLOUDFLARE_DELIVERY_DELAY: "0s" }, 0],
      [{ CLOUDFLARE_DLQ_MAX_RETRIES: "100" }, undefined],
    ] as const
  ) {
    let said = "taken";
    try {
      loadConfig({ ...longer, ...more });
    } catch (error) {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.setting, "CLOUDFLARE_MESSAGE_RETENTION");
      said = error.message;
    }
    assert.equal(said, handler(delayMs), JSON.stringify(more));
  }
});

Deno.test("main.ts judges a Worker's Cloudflare settings together, as the Worker reads them: a retention set is not named unset on another's line, and a Worker that takes them all is said to by every line", () => {
  // Three waits of 12 h: 36 h on the jobs queue, 48 h with a busy
  // give-up's on the dead-letter queue.
  const longer = { ...base, BASE: "12h", CAP: "12h", STUCK_AFTER: "1h" };
  const { CLOUDFLARE_MAX_RETRIES: _, ...three } = longer;
  for (
    const env of [
      // Taken by a Worker: both retentions outlast the waits.
      {
        ...three,
        MAX_DELIVERIES: "4",
        CLOUDFLARE_MESSAGE_RETENTION: "96h",
        CLOUDFLARE_DLQ_MESSAGE_RETENTION: "96h",
      },
      {
        ...three,
        MAX_DELIVERIES: "4",
        CLOUDFLARE_DELIVERY_DELAY: "1m",
        CLOUDFLARE_MESSAGE_RETENTION: "96h",
        CLOUDFLARE_DLQ_MESSAGE_RETENTION: "96h",
      },
      // Refused by a Worker for the dead-letter queue's retention, set.
      {
        ...three,
        MAX_DELIVERIES: "4",
        CLOUDFLARE_MESSAGE_RETENTION: "96h",
        CLOUDFLARE_DLQ_MESSAGE_RETENTION: "40h",
      },
      // Refused for the dead-letter queue's, unset (24 h).
      {
        ...three,
        MAX_DELIVERIES: "4",
        CLOUDFLARE_MESSAGE_RETENTION: "96h",
      },
    ]
  ) {
    let worker: ConfigError | undefined;
    try {
      workerConfig(env);
    } catch (error) {
      assert.ok(error instanceof ConfigError, String(error));
      worker = error;
    }
    const lines = unreadSettingLines(env).filter((line) =>
      line.startsWith("relayer: CLOUDFLARE_")
    );
    const said = lines.filter((line) => line.includes("refuses to start"));
    if (worker === undefined) {
      assert.deepEqual(said, [], JSON.stringify(env));
      continue;
    }
    // The Worker's refusal, word for word, on the line of the setting it
    // names where that is set, else on those it is counted with.
    assert.ok(said.length > 0, JSON.stringify(env));
    for (const line of said) {
      assert.ok(line.endsWith(`: ${worker.message}`), line);
    }
    if (worker.setting in env) {
      assert.deepEqual(
        said.map((line) => line.split(" ")[1]),
        [worker.setting],
        JSON.stringify(env),
      );
    }
  }
});

Deno.test("loadConfig() holds CLOUDFLARE_MAX_RETRIES alone, or CLOUDFLARE_DLQ_MESSAGE_RETENTION alone, to the retention rule, counting a retention unset as 24 h", () => {
  const env = {
    SENDER_URL: base.SENDER_URL,
    WEBHOOK_SECRET: base.WEBHOOK_SECRET,
  };
  const long = { BASE: "1h", CAP: "12h", STUCK_AFTER: "1h" };
  assert.throws(
    () => loadConfig({ ...env, ...long, CLOUDFLARE_MAX_RETRIES: "9" }),
    (error: unknown) =>
      error instanceof ConfigError &&
      error.setting === "CLOUDFLARE_MESSAGE_RETENTION" &&
      /^CLOUDFLARE_MESSAGE_RETENTION is unset, /.test(error.message),
  );
  assert.throws(
    () => loadConfig({ ...env, CLOUDFLARE_DLQ_MESSAGE_RETENTION: "2m" }),
    (error: unknown) =>
      error instanceof ConfigError &&
      error.setting === "CLOUDFLARE_DLQ_MESSAGE_RETENTION" &&
      /^CLOUDFLARE_DLQ_MESSAGE_RETENTION is 2m0s: /.test(error.message),
  );
});

Deno.test("main.ts names a Worker's dead-letter retention it refuses beside a jobs retention out of bounds, judged without that one", () => {
  const env = {
    ...base,
    CLOUDFLARE_MESSAGE_RETENTION: "3600",
    CLOUDFLARE_DLQ_MESSAGE_RETENTION: "2m",
  };
  const line = unreadSettingLines(env).find((line) =>
    line.startsWith("relayer: CLOUDFLARE_DLQ_MESSAGE_RETENTION ")
  );
  assert.match(
    line ?? "",
    /a Worker given this value refuses to start: CLOUDFLARE_DLQ_MESSAGE_RETENTION is 2m0s: /,
  );
});

Deno.test("main.ts names a Worker's message retention refused beside a CLOUDFLARE_MAX_RETRIES that holds on its own, counted with it", () => {
  // 20 retries under a CAP of 12 h: days of waits, past 96 h; CLOUDFLARE_MAX_RETRIES
  // alone is refused only for the retention, which is set.
  const env = {
    ...base,
    BASE: "1h",
    CAP: "12h",
    STUCK_AFTER: "1h",
    CLOUDFLARE_MAX_RETRIES: "20",
    CLOUDFLARE_MESSAGE_RETENTION: "96h",
    CLOUDFLARE_DLQ_MESSAGE_RETENTION: "336h",
  };
  const error = refused(env);
  assert.equal(error.setting, "CLOUDFLARE_MESSAGE_RETENTION");
  const line = unreadSettingLines(env).find((line) =>
    line.startsWith("relayer: CLOUDFLARE_MESSAGE_RETENTION ")
  );
  assert.ok(
    line?.endsWith(
      `a Worker given this value refuses to start: ${error.message}`,
    ),
    line,
  );
});

Deno.test("workerConfig() takes a Worker that consumes its Cloudflare queue with no HTTP delivery route's keys (its jobs come by the queue), whose routes answer 503; a fetch-only Worker (queues: false) is still refused with none", async () => {
  // Before: "No delivery route is configured: set QSTASH_CURRENT_SIGNING_KEY
  // …, or WEBHOOK_SECRET", so a queue consumer was made to put a secret no
  // request of its own is signed with.
  const { WEBHOOK_SECRET: _, ...consumer } = base;
  const { config } = workerConfig({
    ...consumer,
    OPS_TOKEN: "an-ops-token-0123456789",
  });
  assert.equal(config.webhookSecret, undefined);
  assert.equal(config.queues.cloudflare?.maxRetries, 9);
  // The app built from it, as the example Worker builds it: the queue
  // handler takes its relayer, and the generic route says it is off.
  const app = createApp({
    store: new MemoryStore(),
    sender: new HttpSender(config.sender),
    policy: config.policy,
    ...routeOptions(config),
  });
  createQueueHandler({
    relayer: app.relayer,
    maxRetries: config.queues.cloudflare?.maxRetries,
    deadLetterQueue: "relayer-jobs-dlq",
    deadLetterMaxRetries: config.cloudflareDeadLetterMaxRetries,
  });
  const res = await app.request("/v1/deliveries", {
    method: "POST",
    body: "{}",
  });
  assert.equal(res.status, 503);
  assert.match(
    (await res.json()).detail,
    /^POST \/v1\/deliveries is off: set WEBHOOK_SECRET/,
  );
  assert.throws(
    () => workerConfig(consumer, { queues: false }),
    (error) =>
      error instanceof ConfigError &&
      /^No delivery route is configured: .*, or WEBHOOK_SECRET, or consume a Cloudflare queue \(workerConfig without queues: false\)$/
        .test(error.message),
  );
});
