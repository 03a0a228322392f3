/**
 * docs/queues.md's "Deploying to Pub/Sub the first time" held to the code:
 * the `gcloud` commands it gives and the service settings beside them are
 * read from the page, the settings their flags amount to are started with
 * `loadConfig`, and each number is checked against the rule the service
 * holds it to (the minimum backoff the default policy needs, the deadline a
 * push may take, `MAX_DELIVERIES`, Pub/Sub's bounds). A page whose numbers
 * drift from the code fails here rather than at an operator's start.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  DEFAULT_CLOCK_SKEW_MS,
  loadConfig,
  PUBSUB_BACKOFF_LIMIT_MS,
  pubsubAckDeadline,
  pubsubMinBackoffNeedMs,
  rescueNeedMs,
  senderTimeout,
} from "../webhook/config.ts";
import { DEFAULT_POLICY } from "../policy/policy.ts";
import { formatDuration } from "../policy/format_duration.ts";
import { parseDuration } from "../policy/parse_duration.ts";

const HEADING = "### Deploying to Pub/Sub the first time";

const page = await Deno.readTextFile(
  new URL("../docs/queues.md", import.meta.url),
);

/**
 * The section's text, from its heading to the next heading of its level or
 * above outside a code block (the blocks' `#` lines are comments).
 */
function section(): string {
  const start = page.indexOf(`\n${HEADING}\n`);
  assert.ok(start >= 0, `docs/queues.md lost "${HEADING}"`);
  const lines = page.slice(start + HEADING.length + 2).split("\n");
  let fenced = false;
  const end = lines.findIndex((line) => {
    if (line.startsWith("```")) fenced = !fenced;
    return !fenced && /^#{1,3} /.test(line);
  });
  return (end < 0 ? lines : lines.slice(0, end)).join("\n");
}

/** The section's `sh` blocks, in order. */
function shBlocks(text: string): string[] {
  return [...text.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

/** One `gcloud` command: its words before the first flag, and its flags. */
interface Gcloud {
  readonly words: readonly string[];
  readonly flags: ReadonlyMap<string, string>;
}

/**
 * The block's `gcloud` commands, continued lines joined and `$VAR`s set in
 * the block expanded (a command substitution is left as written), and its
 * plain `NAME=value` assignments.
 */
function readCommands(block: string): Gcloud[] {
  const vars = new Map<string, string>();
  const expand = (text: string) =>
    text.replace(/\$([A-Z_]+)/g, (all, name) => vars.get(name) ?? all);
  const unquote = (text: string) => text.replace(/^"(.*)"$/, "$1");
  const commands: Gcloud[] = [];
  const lines = block.replace(/\\\n\s*/g, "").split("\n");
  for (const line of lines) {
    if (line.trim() === "" || line.trimStart().startsWith("#")) continue;
    const assignment = /^([A-Z_]+)=(.*)$/.exec(line);
    if (assignment) {
      const value = unquote(assignment[2]!);
      if (!value.startsWith("$(")) vars.set(assignment[1]!, expand(value));
      continue;
    }
    const tokens = line.trim().split(/\s+/);
    if (tokens[0] !== "gcloud") continue;
    const words: string[] = [];
    const flags = new Map<string, string>();
    for (const token of tokens.slice(1)) {
      const flag = /^--([a-z-]+)(?:=(.*))?$/.exec(token);
      if (flag) {
        assert.ok(!flags.has(flag[1]!), `${line}: --${flag[1]} twice`);
        flags.set(flag[1]!, expand(unquote(flag[2] ?? "")));
      } else if (flags.size === 0) words.push(expand(unquote(token)));
    }
    commands.push({ words, flags });
  }
  return commands;
}

/** The block's `NAME=value` lines, as the service's environment. */
function readSettings(block: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of block.split("\n")) {
    const setting = /^([A-Z_]+)=(\S+)$/.exec(line);
    if (setting) env[setting[1]!] = setting[2]!;
  }
  return env;
}

/**
 * A gcloud duration flag's value in milliseconds, as gcloud reads one:
 * `INTEGER[UNIT]`, the unit `s`, `m`, `h` or `d`, seconds without one.
 */
function gcloudDurationMs(text: string | undefined, flag: string): number {
  const parts = /^(\d+)([smhd]?)$/.exec(text ?? "");
  assert.ok(parts, `--${flag}=${text} is not INTEGER[UNIT]`);
  const unit = { "": 1, s: 1, m: 60, h: 3600, d: 86_400 }[parts[2]!]!;
  return Number(parts[1]) * unit * 1000;
}

/** The one `gcloud pubsub subscriptions create` that pushes to `route`. */
function subscription(commands: Gcloud[], route: string): Gcloud {
  const found = commands.filter((c) =>
    c.words.join(" ").startsWith("pubsub subscriptions create") &&
    new URL(c.flags.get("push-endpoint") ?? "http://none/").pathname === route
  );
  assert.equal(found.length, 1, `one subscription pushing to ${route}`);
  return found[0]!;
}

const text = section();
const [commandBlock, settingsBlock] = shBlocks(text);
assert.ok(commandBlock && settingsBlock, "the section's two sh blocks");
const commands = readCommands(commandBlock);
const settings = readSettings(settingsBlock);
const jobs = subscription(commands, "/v1/pubsub");
const deadLetter = subscription(commands, "/v1/pubsub/dead-letter");
const base = { SENDER_URL: "http://127.0.0.1:9000" };

/** The service's settings the jobs' and dead-letter subscriptions amount to. */
function settingsOfCommands(): Record<string, string> {
  const seconds = (flag: string) =>
    `${gcloudDurationMs(jobs.flags.get(flag), flag) / 1000}s`;
  return {
    PUBSUB_AUDIENCE: jobs.flags.get("push-auth-token-audience")!,
    PUBSUB_DEAD_LETTER_AUDIENCE: deadLetter.flags.get(
      "push-auth-token-audience",
    )!,
    PUBSUB_SERVICE_ACCOUNT: jobs.flags.get("push-auth-service-account")!,
    PUBSUB_MIN_BACKOFF: seconds("min-retry-delay"),
    PUBSUB_MAX_BACKOFF: seconds("max-retry-delay"),
    PUBSUB_MAX_DELIVERY_ATTEMPTS: jobs.flags.get("max-delivery-attempts")!,
    PUBSUB_MESSAGE_RETENTION: seconds("message-retention-duration"),
  };
}

Deno.test("docs/queues.md's Pub/Sub settings are what its gcloud commands set, and the service starts with them", () => {
  const fromCommands = settingsOfCommands();
  const durations = [
    "PUBSUB_MIN_BACKOFF",
    "PUBSUB_MAX_BACKOFF",
    "PUBSUB_MESSAGE_RETENTION",
  ];
  assert.deepEqual(
    Object.keys(settings).sort(),
    Object.keys(fromCommands).sort(),
  );
  for (const [name, value] of Object.entries(fromCommands)) {
    if (durations.includes(name)) {
      assert.equal(parseDuration(settings[name]!), parseDuration(value), name);
    } else assert.equal(settings[name], value, name);
  }
  for (const env of [settings, fromCommands]) {
    const pubsub = loadConfig({ ...base, ...env }).queues.pubsub;
    assert.equal(pubsub.minBackoffMs, parseDuration(env.PUBSUB_MIN_BACKOFF!));
    assert.equal(
      pubsub.maxDeliveryAttempts,
      Number(env.PUBSUB_MAX_DELIVERY_ATTEMPTS),
    );
  }
});

Deno.test("docs/queues.md's gcloud numbers meet the rules the service checks for the default policy, within Pub/Sub's bounds", () => {
  const max = DEFAULT_POLICY.maxDeliveries;
  const needMs = pubsubMinBackoffNeedMs(
    rescueNeedMs(DEFAULT_POLICY.stuckAfterMs, DEFAULT_CLOCK_SKEW_MS),
    max,
  );
  const minMs = gcloudDurationMs(
    jobs.flags.get("min-retry-delay"),
    "min-retry-delay",
  );
  const maxMs = gcloudDurationMs(
    jobs.flags.get("max-retry-delay"),
    "max-retry-delay",
  );
  assert.ok(minMs >= needMs, `--min-retry-delay ${minMs} ms < ${needMs} ms`);
  assert.ok(minMs <= maxMs && maxMs <= PUBSUB_BACKOFF_LIMIT_MS);
  const attempts = Number(jobs.flags.get("max-delivery-attempts"));
  assert.ok(Number.isInteger(attempts) && attempts >= max && attempts <= 100);
  assert.equal(
    jobs.flags.get("dead-letter-topic"),
    deadLetter.flags.get("topic"),
  );
  const pushMs = pubsubAckDeadline(senderTimeout({}));
  for (const sub of [jobs, deadLetter]) {
    const ack = sub.flags.get("ack-deadline") ?? "";
    assert.match(ack, /^\d+$/, "--ack-deadline is whole seconds");
    assert.ok(Number(ack) * 1000 >= pushMs && Number(ack) <= 600, ack);
    const retentionMs = gcloudDurationMs(
      sub.flags.get("message-retention-duration"),
      "message-retention-duration",
    );
    assert.ok(retentionMs >= 600_000 && retentionMs <= 31 * 86_400_000);
    assert.equal(sub.flags.get("expiration-period"), "never");
    assert.equal(
      sub.flags.get("push-auth-service-account"),
      settings.PUBSUB_SERVICE_ACCOUNT,
    );
    assert.equal(
      sub.flags.get("push-auth-token-audience"),
      sub.flags.get("push-endpoint"),
    );
  }
  // The page's words for the rule: the need, and the whole second over it.
  assert.ok(
    text.includes(
      `above the ${formatDuration(needMs)} the default policy needs`,
    ),
  );
  assert.ok(text.includes(`at least ${Math.ceil(needMs / 1000)}s in gcloud's`));
  assert.ok(
    text.includes(
      `is ${attempts}, ${["no", "one", "two", "three"][attempts - max]} above`,
    ),
  );
});

Deno.test("docs/queues.md's dead-letter subscription has no policy of its own, retries on a backoff, keeps give-ups 31 days, and exists before the jobs' subscription", () => {
  assert.equal(deadLetter.flags.has("dead-letter-topic"), false);
  assert.equal(deadLetter.flags.has("max-delivery-attempts"), false);
  assert.ok(
    deadLetter.flags.has("min-retry-delay") ||
      deadLetter.flags.has("max-retry-delay"),
    "without a retry policy, Pub/Sub pushes a give-up answered busy again at once",
  );
  assert.equal(
    gcloudDurationMs(
      deadLetter.flags.get("message-retention-duration"),
      "message-retention-duration",
    ),
    31 * 86_400_000,
  );
  const at = (c: Gcloud) => commands.indexOf(c);
  const topic = (name: string) =>
    commands.findIndex((c) =>
      c.words.join(" ") === `pubsub topics create ${name}`
    );
  const deadLetterTopic = topic(deadLetter.flags.get("topic")!);
  assert.ok(deadLetterTopic >= 0, "the dead-letter topic is created");
  assert.ok(
    deadLetterTopic < at(deadLetter),
    "the dead-letter topic is created before its subscription",
  );
  assert.ok(topic(jobs.flags.get("topic")!) >= 0, "the jobs' topic is created");
  assert.ok(
    at(deadLetter) < at(jobs),
    "the dead-letter topic has its subscription before anything can be forwarded to it",
  );
});

Deno.test("docs/queues.md grants Pub/Sub's service agent publisher on the dead-letter topic and subscriber on the jobs' subscription", () => {
  const binding = (words: string) =>
    commands.find((c) => c.words.join(" ") === words);
  const agent =
    /^serviceAccount:service-\$PROJECT_NUMBER@gcp-sa-pubsub\.iam\.gserviceaccount\.com$/;
  const publisher = binding(
    `pubsub topics add-iam-policy-binding ${
      jobs.flags.get("dead-letter-topic")
    }`,
  );
  assert.ok(publisher, "a binding on the dead-letter topic");
  assert.match(publisher.flags.get("member")!, agent);
  assert.equal(publisher.flags.get("role"), "roles/pubsub.publisher");
  const jobsName = jobs.words[jobs.words.length - 1];
  const subscriber = binding(
    `pubsub subscriptions add-iam-policy-binding ${jobsName}`,
  );
  assert.ok(subscriber, "a binding on the jobs' subscription");
  assert.match(subscriber.flags.get("member")!, agent);
  assert.equal(subscriber.flags.get("role"), "roles/pubsub.subscriber");
  const actAs = binding(
    `iam service-accounts add-iam-policy-binding ${settings.PUBSUB_SERVICE_ACCOUNT}`,
  );
  assert.equal(actAs?.flags.get("role"), "roles/iam.serviceAccountUser");
});
