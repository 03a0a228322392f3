/**
 * What the tests of the service's start check share: the setting
 * `loadConfig` refuses an environment for.
 *
 * @module
 */

import { ConfigError, loadConfig } from "../../webhook/config.ts";

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
