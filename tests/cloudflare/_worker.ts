/**
 * A Worker's `fetch` as the README builds it (`workerConfig`, `createApp`
 * on `routeOptions`, wrapped by `nameUnread`), over a `MemoryStore`, and
 * the lines its first event logged.
 *
 * @module
 */
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import { createApp, routeOptions, workerConfig } from "../../webhook/app.ts";

/**
 * The Worker's fetch over `env` (its settings, and any binding, an object),
 * read with `options` (`database`: as the PostgreSQL Worker reads it), and
 * what it logged.
 */
export function worker(
  env: Record<string, unknown>,
  options: { readonly database?: boolean } = {},
): {
  fetch: (request: Request) => Response | Promise<Response>;
  logged: string[];
} {
  const { config, nameUnread } = workerConfig(env, options);
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
