/**
 * A Worker's `fetch` as the README builds it (`workerConfig`, `createApp`
 * on `routeOptions`, wrapped by `nameUnread`), over a `MemoryStore`, and
 * the lines its first event logged.
 *
 * @module
 */
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import { createApp, routeOptions, workerConfig } from "../../webhook/app.ts";

/** The Worker's fetch over `env`, and what it logged. */
export function worker(env: Record<string, string>): {
  fetch: (request: Request) => Response | Promise<Response>;
  logged: string[];
} {
  const { config, nameUnread } = workerConfig(env);
  const app = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    ...routeOptions(config),
    enqueue: () => Promise.resolve(),
  });
  const logged: string[] = [];
  const handlers = nameUnread(
    { fetch: (request: Request) => app.fetch(request) },
    (line) => void logged.push(line),
  );
  return { fetch: handlers.fetch, logged };
}
