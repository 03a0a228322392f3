/**
 * The start line `openService()` gives on a set of settings, the service
 * closed once it is read (tests/start_line_test.ts and the suites it runs
 * in a process of their own).
 *
 * @module
 */
import { openService } from "../main.ts";
import { loadConfig } from "../webhook/config.ts";

/** The start line of `openService()` on `settings`, its service closed. */
export async function startLineOf(
  settings: Record<string, string>,
): Promise<string> {
  const service = await openService(loadConfig(settings), { log: () => {} });
  try {
    return service.description;
  } finally {
    await service.close();
  }
}
