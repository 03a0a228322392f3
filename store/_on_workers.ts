/**
 * Whether this runs on Cloudflare Workers, for what differs there: a
 * timer's life (the webhook's body deadlines), and what workerd tells a
 * PostgreSQL client of a TLS handshake it refused (nothing). Web APIs only.
 *
 * @module
 */

/**
 * Whether this runs on Cloudflare Workers, whose `navigator.userAgent` is
 * `"Cloudflare-Workers"` (developers.cloudflare.com/workers/runtime-apis/web-standards/#navigatoruseragent):
 * there a timer belongs to the request that set it and ends with it, so a
 * timer shared by reads of several requests could end under one still
 * reading. A Worker whose compatibility date is before 2022-03-21 has no
 * `navigator` (unless its flags ask for one): there `WebSocketPair`, a
 * global only Workers define, tells it.
 */
export function onWorkers(): boolean {
  const scope = globalThis as {
    navigator?: { userAgent?: unknown };
    WebSocketPair?: unknown;
  };
  return scope.navigator?.userAgent === "Cloudflare-Workers" ||
    typeof scope.WebSocketPair === "function";
}
