/**
 * The service's refusal of a Pub/Sub message retention names the
 * `deno task schedule` command that checks one as the service does, with
 * the settings it was given: run as printed, it exits 1 with the expiry,
 * and with the retention the refusal asks for (a millisecond more than it
 * names), the service starts and the command exits 0.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseDuration } from "../../mod.ts";
import { loadConfig } from "../../webhook/config.ts";
import { refusal } from "./_config.ts";
import { runSchedule } from "../tools/_schedule_cli.ts";

const pubsub = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-webhook-secret-16",
  PUBSUB_AUDIENCE: "https://relayer.example.test/v1/pubsub",
  PUBSUB_SERVICE_ACCOUNT: "pusher@p.iam.gserviceaccount.com",
};

/** Runs the schedule task's script with `args`, as `deno task schedule` does. */
async function schedule(args: readonly string[]) {
  const { code, stdout, stderr } = await runSchedule(args);
  return { code, out: stdout + stderr };
}

const cases: Record<string, string>[] = [
  // The defaults: ten pushes fit, a busy last one and the next do not.
  { PUBSUB_MIN_BACKOFF: "40s", PUBSUB_MESSAGE_RETENTION: "104m50s" },
  // Nine pushes fit.
  { PUBSUB_MIN_BACKOFF: "40s", PUBSUB_MESSAGE_RETENTION: "93m45s" },
  // Settings of the service's own, each away from its default.
  {
    MAX_DELIVERIES: "8",
    BASE: "2s",
    CAP: "1m",
    JITTER: "none",
    STUCK_AFTER: "2m",
    CLOCK_SKEW: "2s",
    SENDER_TIMEOUT: "20s",
    LEASE: "1m",
    PUBSUB_MIN_BACKOFF: "45s",
    PUBSUB_MAX_BACKOFF: "5m",
    PUBSUB_MESSAGE_RETENTION: "45m",
  },
  // A dead-letter policy whose last attempt the retention may cut off.
  {
    PUBSUB_MIN_BACKOFF: "40s",
    PUBSUB_MAX_DELIVERY_ATTEMPTS: "12",
    PUBSUB_DEAD_LETTER_AUDIENCE: "https://relayer.example.test/v1/pubsub/dead",
    PUBSUB_MESSAGE_RETENTION: "104m50s",
  },
];

for (const settings of cases) {
  Deno.test(
    `a refused Pub/Sub message retention names the deno task schedule command that checks it (${
      Object.entries(settings).map(([k, v]) => `${k}=${v}`).join(" ")
    })`,
    async () => {
      const env = { ...pubsub, ...settings };
      const error = refusal(env);
      assert.equal(error.setting, "PUBSUB_MESSAGE_RETENTION", error.message);
      const command = error.message.match(
        /deno task schedule (--queue pubsub [^;:,()]*?--message-retention \S+)/,
      );
      assert.ok(command, `no deno task schedule command in: ${error.message}`);
      const args = command[1]!.split(" ");
      const refused = await schedule(args);
      assert.equal(refused.code, 1, refused.out);
      assert.match(refused.out, /MESSAGE MAY EXPIRE/);

      // The retention the refusal asks for: the service takes it, and so
      // does the command.
      const more = error.message.match(/to more than (\d[\dhms.]*)/);
      assert.ok(more, error.message);
      const needMs = parseDuration(more[1]!);
      const taken = `${needMs + 1}ms`;
      loadConfig({ ...env, PUBSUB_MESSAGE_RETENTION: taken });
      const at = args.indexOf("--message-retention") + 1;
      const accepted = await schedule(args.with(at, taken));
      assert.equal(accepted.code, 0, accepted.out);
    },
  );
}
