/**
 * `answeredSocketOption`'s socket with its connects counted: how the
 * suites of a standby listed beside its primary (a pool, a failover, no
 * primary up) see how often a client connects again.
 *
 * @module
 */

import { answeredSocketOption } from "../../store/postgres_socket.ts";

/** `answeredSocketOption(ms)`'s socket, counting in `count.made` the connects it makes. */
export function countedSocket(ms: number): {
  socket: ReturnType<typeof answeredSocketOption>["socket"];
  count: { made: number };
} {
  const answered = answeredSocketOption(ms);
  const count = { made: 0 };
  const socket = Object.assign(
    (o: Parameters<typeof answered.socket>[0]) => {
      count.made++;
      return answered.socket(o);
    },
    { closed: answered.socket.closed },
  );
  return { socket, count };
}
