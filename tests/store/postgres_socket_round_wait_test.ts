/**
 * How long `answeredSocketOption`'s socket holds a failed connection's
 * close (and with it postgres.js's next connect) once every listed host
 * failed in a row: the close that ends such a round is held (50 ms,
 * doubling with each round, at most 1 s, each with equal jitter: half of
 * it to all of it), a failed connect within a round
 * is not. Were each failed connect held, a host that comes back (a primary
 * restarted) would be reached only after one held close for every host
 * listed before it, up to 2 s with a standby listed first, instead of
 * after at most one.
 *
 * @module
 */

import assert from "node:assert/strict";
import net from "node:net";
import {
  answeredSocketOption,
  type PostgresSocket,
} from "../../store/postgres_socket.ts";
import { downPort } from "./_down_port.ts";

Deno.test("answeredSocketOption()'s socket, with two hosts down under target_session_attrs=primary, holds the close that ends a round in which both failed (50 ms, then doubling, at most 1 s, at the top of its jitter), and hands on at once the one that fails within a round", async () => {
  const ports = [await downPort(), await downPort()];
  // The top of the jitter: each wait whole.
  const answered = answeredSocketOption(2_000, undefined, () => 1);
  const holds: number[] = [];
  try {
    for (let i = 0; i < 16; i++) {
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
    assert.ok(
      holds[i]! >= least - 5 && holds[i]! < least + 150,
      `connect ${i + 1}: ${measured}`,
    );
  }
  // Connects 3, 5 and 7 fail within a round: handed on at once, not held
  // as the round before them ended (50, 100, 200 ms).
  for (const [i, most] of [[2, 45], [4, 90], [6, 180]] as const) {
    assert.ok(holds[i]! < most, `connect ${i + 1}: ${measured}`);
  }
  // Rounds 6 to 8 are held 1 s, the most.
  for (const i of [11, 13, 15]) {
    assert.ok(
      holds[i]! >= 995 && holds[i]! < 1_300,
      `connect ${i + 1}: ${measured}`,
    );
  }
});

/**
 * How long each of `connects` connects to two hosts that are down, under
 * `target_session_attrs=primary`, took to close on a socket drawing its
 * jitter from `random`.
 */
async function roundHolds(
  random: (() => number) | undefined,
  connects: number,
): Promise<number[]> {
  const ports = [await downPort(), await downPort()];
  const answered = answeredSocketOption(2_000, undefined, random);
  const holds: number[] = [];
  try {
    for (let i = 0; i < connects; i++) {
      const started = performance.now();
      holds.push(
        await closeAfter(
          answered.socket({
            host: ["127.0.0.1", "127.0.0.1"],
            port: ports,
            target_session_attrs: "primary",
          }),
          started,
        ),
      );
    }
  } finally {
    await answered.socket.closed(5_000);
  }
  return holds;
}

Deno.test("answeredSocketOption()'s held waits are jittered (equal jitter: from half the wait to all of it), so instances that lost the same primary do not connect again in step", async () => {
  // Six connects: connects 2, 4 and 6 end rounds whose waits are 50, 100
  // and 200 ms.
  const [low, high] = [
    await roundHolds(() => 0, 6),
    await roundHolds(() => 1, 6),
  ];
  const measured = `random 0: ${low.map((ms) => ms.toFixed(0)).join(", ")}; ` +
    `random 1: ${high.map((ms) => ms.toFixed(0)).join(", ")}`;
  // The bottom of the jitter holds half of each wait, the top all of it.
  for (const [i, wait] of [[1, 50], [3, 100], [5, 200]] as const) {
    assert.ok(
      low[i]! >= wait / 2 - 5 && low[i]! < wait * 0.8,
      `connect ${i + 1}: ${measured}`,
    );
    assert.ok(
      high[i]! >= wait - 5 && high[i]! < wait + 150,
      `connect ${i + 1}: ${measured}`,
    );
  }
});

Deno.test("answeredSocketOption()'s held waits draw random afresh at each hold, and only there: none at the socket's making nor at a close not held", async () => {
  // Six connects: connects 2, 4 and 6 end rounds whose waits are 50, 100
  // and 200 ms, drawn at the bottom, the top, then the bottom again.
  const draws: number[] = [];
  const random = () => {
    draws.push(draws.length % 2);
    return draws.at(-1)!;
  };
  const holds = await roundHolds(random, 6);
  const measured = holds.map((ms) => ms.toFixed(0)).join(", ");
  assert.deepEqual(draws, [0, 1, 0], measured);
  // The bottom holds half of its wait, the top all of it.
  const rounds = [[1, 50, "bottom"], [3, 100, "top"], [5, 200, "bottom"]];
  for (const [i, wait, at] of rounds as [number, number, string][]) {
    const held = holds[i]!;
    const [least, most] = at === "top"
      ? [wait - 5, wait + 150]
      : [wait / 2 - 5, wait * 0.8];
    assert.ok(held >= least && held < most, `connect ${i + 1}: ${measured}`);
  }
});

Deno.test("answeredSocketOption()'s held waits draw from Math.random by default, never below half the wait nor above it, the most held still 1 s", async () => {
  // Connects 2, 4, …, 16 end rounds 1 to 8: 50 ms doubling, 1 s from
  // round 6.
  const holds = await roundHolds(undefined, 16);
  const measured = holds.map((ms) => ms.toFixed(0)).join(", ");
  for (let round = 1; round <= 8; round++) {
    const wait = Math.min(1_000, 50 * 2 ** (round - 1));
    const held = holds[2 * round - 1]!;
    assert.ok(
      held >= wait / 2 - 5 && held < wait + 150,
      `round ${round}: ${measured}`,
    );
  }
});

Deno.test("answeredSocketOption()'s held waits draw from Math.random when no random is given (read as the option is made)", async () => {
  const draws: number[] = [];
  const saved = Math.random;
  Math.random = () => {
    draws.push(draws.length % 2);
    return draws.at(-1)!;
  };
  let holds: number[];
  try {
    holds = await roundHolds(undefined, 4);
  } finally {
    Math.random = saved;
  }
  const measured = holds.map((ms) => ms.toFixed(0)).join(", ");
  assert.deepEqual(draws, [0, 1], measured);
  // Rounds of 50 and 100 ms: the first at its bottom, the second its top.
  assert.ok(holds[1]! >= 20 && holds[1]! < 40, measured);
  assert.ok(holds[3]! >= 95 && holds[3]! < 250, measured);
});

Deno.test("answeredSocketOption() refuses a random that is not a function, before any socket is made", () => {
  assert.throws(
    () =>
      answeredSocketOption(2_000, undefined, 0.5 as unknown as () => number),
    {
      name: "TypeError",
      message:
        "Cannot make the PostgreSQL socket as 'random' must be a function returning numbers in [0, 1), such as Math.random: current value is 0.5",
    },
  );
});

/** How long `socket` took to emit its close, from `started`. */
async function closeAfter(
  socket: PostgresSocket,
  started: number,
): Promise<number> {
  socket.on("error", () => {});
  await new Promise((resolve) => socket.once("close", resolve));
  return performance.now() - started;
}

Deno.test("answeredSocketOption()'s socket starts its wait afresh after a connection that lasted: once one answered and stayed open 1 s, the next round in which both hosts fail is held 50 ms, not longer than the rounds before it", async () => {
  const ports = [await downPort(), await downPort()];
  const answered = answeredSocketOption(2_000, undefined, () => 1);
  const options = {
    host: ["127.0.0.1", "127.0.0.1"],
    port: ports,
    target_session_attrs: "primary",
  };
  const servers: net.Server[] = [];
  const taken: net.Socket[] = [];
  try {
    const before: number[] = [];
    for (let i = 0; i < 8; i++) {
      const started = performance.now();
      before.push(await closeAfter(answered.socket(options), started));
    }
    // Rounds 1 to 4 ended: the last held 400 ms.
    assert.ok(before[7]! >= 395, before.map((ms) => ms.toFixed(0)).join());
    // The hosts come back: a connection is answered and lasts 1 s, then
    // the server ends it.
    for (const port of ports) {
      const server = net.createServer((socket) => {
        taken.push(socket);
        socket.write("N");
      });
      await new Promise<void>((resolve) =>
        server.listen(port, "127.0.0.1", resolve)
      );
      servers.push(server);
    }
    const socket = answered.socket(options);
    socket.on("error", () => {});
    await new Promise((resolve) => socket.once("data", resolve));
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    // While it is open, a round in which two other hosts fail is not held:
    // the server takes this client.
    const others = { ...options, port: [await downPort(), await downPort()] };
    for (let i = 0; i < 2; i++) {
      const started = performance.now();
      const ms = await closeAfter(answered.socket(others), started);
      assert.ok(ms < 100, `beside a lasting connection: ${ms.toFixed(0)} ms`);
    }
    const ended = performance.now();
    for (const taker of taken) taker.destroy();
    assert.ok((await closeAfter(socket, ended)) < 100, "held");
    for (const server of servers) {
      await new Promise((resolve) => server.close(resolve));
    }
    await assertFirstRoundWait(answered, options);
  } finally {
    for (const taker of taken) taker.destroy();
    for (const server of servers) server.close();
    await answered.socket.closed(5_000);
  }
});

Deno.test("answeredSocketOption()'s socket holds no close of a single host that is down: postgres.js's own backoff spaces its connects there", async () => {
  const port = await downPort();
  const answered = answeredSocketOption(2_000);
  const holds: number[] = [];
  try {
    for (let i = 0; i < 4; i++) {
      const started = performance.now();
      holds.push(
        await closeAfter(
          answered.socket({
            host: ["127.0.0.1"],
            port: [port],
            target_session_attrs: "primary",
          }),
          started,
        ),
      );
    }
  } finally {
    await answered.socket.closed(5_000);
  }
  const measured = holds.map((ms) => ms.toFixed(0)).join(", ");
  assert.ok(Math.max(...holds) < 45, measured);
});

Deno.test("answeredSocketOption()'s closed() waits for a close it holds back: it resolves only once that socket has closed", async () => {
  const ports = [await downPort(), await downPort()];
  const answered = answeredSocketOption(2_000);
  const options = {
    host: ["127.0.0.1", "127.0.0.1"],
    port: ports,
    target_session_attrs: "primary",
  };
  // The first host fails within the round: handed on at once.
  await closeAfter(answered.socket(options), performance.now());
  // The second ends a round in which both failed: its close held 50 ms.
  const last = answered.socket(options);
  last.on("error", () => {});
  let closed = false;
  last.once("close", () => closed = true);
  const started = performance.now();
  await answered.socket.closed(5_000);
  const ms = (performance.now() - started).toFixed(0);
  assert.ok(closed, `closed() resolved after ${ms} ms, its socket still open`);
});

Deno.test("answeredSocketOption()'s socket counts a connection as lasting from the server's first answer, not its last: one busy with answers for 1 s, then cut, starts the wait afresh", async () => {
  const ports = [await downPort(), await downPort()];
  // At the top of its jitter: each held wait whole.
  const answered = answeredSocketOption(2_000, undefined, () => 1);
  const options = {
    host: ["127.0.0.1", "127.0.0.1"],
    port: ports,
    target_session_attrs: "primary",
  };
  const servers: net.Server[] = [];
  const taken: net.Socket[] = [];
  const ticks: ReturnType<typeof setInterval>[] = [];
  try {
    // Rounds 1 to 4 in which both hosts failed: the last held 400 ms.
    for (let i = 0; i < 8; i++) {
      await closeAfter(answered.socket(options), performance.now());
    }
    // The hosts come back, and a connection answered every 100 ms (a
    // stream of query results) lasts 1.2 s, until the server is cut.
    for (const port of ports) {
      const server = net.createServer((socket) => {
        taken.push(socket);
        socket.write("N");
        ticks.push(setInterval(() => socket.write("N"), 100));
      });
      await new Promise<void>((resolve) =>
        server.listen(port, "127.0.0.1", resolve)
      );
      servers.push(server);
    }
    const socket = answered.socket(options);
    socket.on("error", () => {});
    socket.on("data", () => {});
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    for (const tick of ticks) clearInterval(tick);
    const cut = performance.now();
    for (const taker of taken) taker.destroy();
    await closeAfter(socket, cut);
    for (const server of servers) {
      await new Promise((resolve) => server.close(resolve));
    }
    await assertFirstRoundWait(answered, options);
  } finally {
    for (const tick of ticks) clearInterval(tick);
    for (const taker of taken) taker.destroy();
    for (const server of servers) server.close();
    await answered.socket.closed(5_000);
  }
});

/**
 * With both hosts of `options` down again, the first round in which both
 * fail is held 50 ms (the wait started afresh), at the top of its jitter.
 */
async function assertFirstRoundWait(
  answered: ReturnType<typeof answeredSocketOption>,
  options: Parameters<ReturnType<typeof answeredSocketOption>["socket"]>[0],
): Promise<void> {
  const after: number[] = [];
  for (let i = 0; i < 2; i++) {
    const started = performance.now();
    after.push(await closeAfter(answered.socket(options), started));
  }
  const measured = after.map((ms) => ms.toFixed(0)).join(", ");
  assert.ok(after[1]! >= 45 && after[1]! < 150, measured);
}
