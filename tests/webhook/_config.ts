/**
 * What the tests of the service's start check share: the setting
 * `loadConfig` refuses an environment for.
 *
 * @module
 */

import { ConfigError, loadConfig } from "../../webhook/config.ts";

/** A QStash queue's settings, whole (its signing keys and `PUBLIC_URL`). */
export const QSTASH_ENV = {
  QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
  QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
  PUBLIC_URL: "https://relayer.example.test",
} as const;

/** A Pub/Sub push subscription's settings (its audience and account). */
export const PUBSUB_ENV = {
  PUBSUB_AUDIENCE: "https://relayer.example.test/v1/pubsub",
  PUBSUB_SERVICE_ACCOUNT: "pusher@p.iam.gserviceaccount.com",
} as const;

/**
 * The setting `loadConfig` refuses `env` for, or `null` where it takes it;
 * an error other than a `ConfigError` is thrown on.
 */
export function refusedSetting(env: Record<string, string>): string | null {
  try {
    loadConfig(env);
    return null;
  } catch (error) {
    if (error instanceof ConfigError) return error.setting;
    throw error;
  }
}

/**
 * The `ConfigError` `loadConfig` refuses `env` with; an environment it takes
 * fails the test, and an error other than a `ConfigError` is thrown on.
 */
export function refusal(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error(`loadConfig took ${JSON.stringify(env)}`);
}
