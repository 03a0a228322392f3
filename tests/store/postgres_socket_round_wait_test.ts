/**
 * How long `answeredSocketOption`'s socket holds a failed connection's
 * close (and with it postgres.js's next connect) once every listed host
 * failed in a row: the close that ends such a round is held (50 ms,
 * doubling with each round, at most 1 s), a failed connect within a round
 * is not. Were each failed connect held, a host that comes back (a primary
 * restarted) would be reached only after one held close for every host
 * listed before it, up to 2 s with a standby listed first, instead of
 * after at most one.
 *
 * @module
 */

import assert from "node:assert/strict";
import { answeredSocketOption } from "../../store/postgres_socket.ts";
import { downPort } from "./_down_port.ts";

Deno.test("answeredSocketOption()'s socket, with two hosts down under target_session_attrs=primary, holds the close that ends a round in which both failed (50 ms, then doubling), and hands on at once the one that fails within a round", async () => {
  const ports = [await downPort(), await downPort()];
  const answered = answeredSocketOption(2_000);
  const holds: number[] = [];
  try {
    for (let i = 0; i < 7; i++) {
      const started = performance.now();
      const socket = answered.socket({
        host: ["127.0.0.1", "127.0.0.1"],
        port: ports,
        target_session_attrs: "primary",
      });
      socket.on("error", () => {});
      await new Promise((resolve) => socket.once("close", resolve));
      holds.push(performance.now() - started);
    }
  } finally {
    await answered.socket.closed(5_000);
  }
  const measured = holds.map((ms) => ms.toFixed(0)).join(", ");
  // Connects 2, 4 and 6 end a round: held 50, 100 and 200 ms.
  for (const [i, least] of [[1, 50], [3, 100], [5, 200]] as const) {
    assert.ok(holds[i]! >= least - 5, `connect ${i + 1}: ${measured}`);
  }
  // Connects 3, 5 and 7 fail within a round: handed on at once, not held
  // as the round before them ended (50, 100, 200 ms).
  for (const [i, most] of [[2, 45], [4, 90], [6, 180]] as const) {
    assert.ok(holds[i]! < most, `connect ${i + 1}: ${measured}`);
  }
});
