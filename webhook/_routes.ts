/**
 * The service's delivery routes at the end of a path: a base URL that ends
 * with one would have the routes appended after it (…/v1/qstash/v1/qstash).
 *
 * @module
 */

/** Matches a path that ends with one of the service's delivery routes. */
export const ROUTE_AT_END: RegExp =
  /\/v1\/(?:qstash(?:\/failed)?|pubsub(?:\/dead-letter)?|deliveries)$/;
