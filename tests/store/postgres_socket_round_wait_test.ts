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
 * Each hold is read as the socket chose it (which connect, how long:
 * `_held_closes.ts`), and the clock checks only that a held close came no
 * sooner than its wait: on a loaded machine a close comes later, never
 * sooner. Bounds on how much later failed there: a connect within a round
 * closed 51 ms after it was made (under 45 ms asked), the bottom of the
 * jitter's 25 ms hold 52 ms (under 40 ms asked).
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
import {
  type HeldClose,
  type HeldCloses,
  heldCloses,
  twoHostsDown,
} from "./_held_closes.ts";

Deno.test("answeredSocketOption()'s socket, with two hosts down under target_session_attrs=primary, holds the close that ends a round in which both failed (50 ms, then doubling, at most 1 s, at the top of its jitter), and hands on at once the one that fails within a round", async () => {
  // The top of the jitter: each wait whole.
  const { closes, holds } = await roundHolds(() => 1, 16);
  const measured = timed(closes);
  // Connects 2, 4, …, 16 end rounds 1 to 8: held 50 ms, doubling, 1 s from
  // round 6. Connects 3, 5, …, 15 fail within a round: not held, handed on
  // at once (were they held as the round before them, connect 3 would be
  // held 50 ms, 5 100 ms, 7 200 ms).
  assert.deepEqual(
    holds.map(({ connect }) => connect),
    [2, 4, 6, 8, 10, 12, 14, 16],
    measured,
  );
  assert.deepEqual(
    holds.map(({ wait }) => wait),
    [50, 100, 200, 400, 800, 1_000, 1_000, 1_000],
    measured,
  );
  assertWaited(closes, holds, measured);
});

/**
 * Each of `connects` connects to `hosts` hosts that are down (two unless
 * told), under `target_session_attrs=primary`, on a socket drawing its
 * jitter from `random` (the socket's default where `undefined`): when
 * each closed, and the closes the socket held.
 */
async function roundHolds(
  random: (() => number) | undefined,
  connects: number,
  hosts = 2,
): Promise<{ closes: number[]; holds: HeldClose[] }> {
  const ports = await Promise.all(Array.from({ length: hosts }, downPort));
  const answered = heldCloses(2_000, random);
  const closes: number[] = [];
  try {
    for (let i = 0; i < connects; i++) {
      closes.push(
        await closedAt(
          answered.socket({
            host: ports.map(() => "127.0.0.1"),
            port: ports,
            target_session_attrs: "primary",
          }),
        ),
      );
    }
  } finally {
    await answered.socket.closed(5_000);
    answered.restore();
  }
  return { closes, holds: answered.holds };
}

/**
 * Checks that each close in `holds` came no sooner than the wait it chose
 * after its hold began (`closes` are when connects 1, 2, … closed): the
 * close is held, not only its wait computed. A loaded machine makes a
 * close later, never sooner.
 */
function assertWaited(
  closes: number[],
  holds: HeldClose[],
  measured: string,
): void {
  for (const { connect, wait, at } of holds) {
    const waited = closes[connect - 1]! - at;
    assert.ok(
      waited >= wait - 5,
      `connect ${connect} closed ${
        waited.toFixed(0)
      } ms into its ${wait} ms hold: ${measured}`,
    );
  }
}

/** `closes`, as how long each connect took from the one before it, for a failure's message. */
function timed(closes: number[]): string {
  return closes.map((at, i) => (at - (closes[i - 1] ?? at)).toFixed(0)).join(
    ", ",
  );
}

Deno.test("answeredSocketOption()'s held waits are jittered (equal jitter: from half the wait to all of it), so instances that lost the same primary do not connect again in step", async () => {
  // Six connects: connects 2, 4 and 6 end rounds whose waits are 50, 100
  // and 200 ms.
  const [low, high] = [
    await roundHolds(() => 0, 6),
    await roundHolds(() => 1, 6),
  ];
  const measured = `random 0: ${timed(low.closes)}; random 1: ${
    timed(high.closes)
  }`;
  // The bottom of the jitter holds half of each wait, the top all of it.
  const waits = ({ holds }: { holds: HeldClose[] }) =>
    holds.map(({ connect, wait }) => [connect, wait]);
  assert.deepEqual(waits(low), [[2, 25], [4, 50], [6, 100]], measured);
  assert.deepEqual(waits(high), [[2, 50], [4, 100], [6, 200]], measured);
  assertWaited(low.closes, low.holds, measured);
  assertWaited(high.closes, high.holds, measured);
});

Deno.test("answeredSocketOption()'s held waits draw random afresh at each hold, and only there: none at the socket's making nor at a close not held", async () => {
  // Six connects: connects 2, 4 and 6 end rounds whose waits are 50, 100
  // and 200 ms, drawn at the bottom, the top, then the bottom again.
  const draws: number[] = [];
  const random = () => {
    draws.push(draws.length % 2);
    return draws.at(-1)!;
  };
  const { closes, holds } = await roundHolds(random, 6);
  const measured = timed(closes);
  assert.deepEqual(draws, [0, 1, 0], measured);
  // The bottom holds half of its wait, the top all of it.
  assert.deepEqual(
    holds.map(({ connect, wait }) => [connect, wait]),
    [[2, 25], [4, 100], [6, 100]],
    measured,
  );
  assertWaited(closes, holds, measured);
});

Deno.test("answeredSocketOption()'s held waits draw from Math.random by default, never below half the wait nor above it, the most held still 1 s", async () => {
  // Connects 2, 4, …, 16 end rounds 1 to 8: 50 ms doubling, 1 s from
  // round 6.
  const { closes, holds } = await roundHolds(undefined, 16);
  const measured = `${timed(closes)}; held ${
    holds.map(({ wait, drawn }) => `${wait} (${drawn.toFixed(2)})`).join(", ")
  }`;
  // A draw from Math.random at each round's end, and at no other connect.
  assert.deepEqual(
    holds.map(({ connect }) => connect),
    [2, 4, 6, 8, 10, 12, 14, 16],
    measured,
  );
  for (const [i, { wait, drawn }] of holds.entries()) {
    const round = i + 1;
    const whole = Math.min(1_000, 50 * 2 ** (round - 1));
    // Half the wait and the share of the other half that Math.random drew.
    assert.ok(
      wait >= whole / 2 && wait <= whole &&
        Math.abs(wait - whole / 2 * (1 + drawn)) <= 1,
      `round ${round}: ${measured}`,
    );
  }
  assertWaited(closes, holds, measured);
});

Deno.test("answeredSocketOption()'s held waits draw from Math.random when no random is given (read as the option is made)", async () => {
  const draws: number[] = [];
  const saved = Math.random;
  Math.random = () => {
    draws.push(draws.length % 2);
    return draws.at(-1)!;
  };
  let round: { closes: number[]; holds: HeldClose[] };
  try {
    round = await roundHolds(undefined, 4);
  } finally {
    Math.random = saved;
  }
  const measured = timed(round.closes);
  assert.deepEqual(draws, [0, 1], measured);
  // Rounds of 50 and 100 ms: the first at its bottom, the second its top.
  assert.deepEqual(
    round.holds.map(({ connect, wait }) => [connect, wait]),
    [[2, 25], [4, 100]],
    measured,
  );
  assertWaited(round.closes, round.holds, measured);
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

/**
 * A server on each of `ports` (127.0.0.1) that answers each connection
 * with a byte, then hands it to `taken`.
 */
async function answering(
  ports: number[],
  taken: (socket: net.Socket) => void,
): Promise<net.Server[]> {
  const servers: net.Server[] = [];
  for (const port of ports) {
    const server = net.createServer((socket) => {
      socket.write("N");
      taken(socket);
    });
    await new Promise<void>((resolve) =>
      server.listen(port, "127.0.0.1", resolve)
    );
    servers.push(server);
  }
  return servers;
}

/** When `socket` emitted its close (`performance.now()`). */
async function closedAt(socket: PostgresSocket): Promise<number> {
  socket.on("error", () => {});
  await new Promise((resolve) => socket.once("close", resolve));
  return performance.now();
}

Deno.test("answeredSocketOption()'s socket starts its wait afresh after a connection that lasted: once one answered and stayed open 1 s, the next round in which both hosts fail is held 50 ms, not longer than the rounds before it", async () => {
  const { ports, answered, options } = await twoHostsDown();
  const servers: net.Server[] = [];
  const taken: net.Socket[] = [];
  try {
    const before: number[] = [];
    for (let i = 0; i < 8; i++) {
      before.push(await closedAt(answered.socket(options)));
    }
    // Rounds 1 to 4 ended: the last held 400 ms.
    assert.deepEqual(answered.holds.map(({ wait }) => wait), [
      50,
      100,
      200,
      400,
    ]);
    assertWaited(before, answered.holds, timed(before));
    // The hosts come back: a connection is answered and lasts 1 s, then
    // the server ends it.
    servers.push(...await answering(ports, (socket) => taken.push(socket)));
    const socket = answered.socket(options);
    socket.on("error", () => {});
    await new Promise((resolve) => socket.once("data", resolve));
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    // While it is open, a round in which two other hosts fail is not held:
    // the server takes this client.
    const others = { ...options, port: [await downPort(), await downPort()] };
    for (let i = 0; i < 2; i++) {
      await closedAt(answered.socket(others));
      assert.deepEqual(
        answered.holds.slice(4),
        [],
        `beside a lasting connection, connect ${i + 1} of a round was held`,
      );
    }
    for (const taker of taken) taker.destroy();
    await closedAt(socket);
    assert.deepEqual(answered.holds.slice(4), [], "held");
    for (const server of servers) {
      await new Promise((resolve) => server.close(resolve));
    }
    await assertFirstRoundWait(answered, options);
  } finally {
    for (const taker of taken) taker.destroy();
    for (const server of servers) server.close();
    await answered.socket.closed(5_000);
    answered.restore();
  }
});

Deno.test("answeredSocketOption()'s socket holds no close of a single host that is down: postgres.js's own backoff spaces its connects there", async () => {
  const { holds } = await roundHolds(undefined, 4, 1);
  assert.deepEqual(holds, []);
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
  await closedAt(answered.socket(options));
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
  const { ports, answered, options } = await twoHostsDown();
  const servers: net.Server[] = [];
  const taken: net.Socket[] = [];
  const ticks: ReturnType<typeof setInterval>[] = [];
  try {
    // Rounds 1 to 4 in which both hosts failed: the last held 400 ms.
    for (let i = 0; i < 8; i++) await closedAt(answered.socket(options));
    assert.equal(answered.holds.at(-1)?.wait, 400);
    // The hosts come back, and a connection answered every 100 ms (a
    // stream of query results) lasts 1.2 s from its first answer, until
    // the server is cut.
    servers.push(
      ...await answering(ports, (socket) => {
        taken.push(socket);
        ticks.push(setInterval(() => socket.write("N"), 100));
      }),
    );
    const socket = answered.socket(options);
    socket.on("error", () => {});
    await new Promise((resolve) => socket.once("data", resolve));
    socket.on("data", () => {});
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    for (const tick of ticks) clearInterval(tick);
    for (const taker of taken) taker.destroy();
    await closedAt(socket);
    for (const server of servers) {
      await new Promise((resolve) => server.close(resolve));
    }
    await assertFirstRoundWait(answered, options);
  } finally {
    for (const tick of ticks) clearInterval(tick);
    for (const taker of taken) taker.destroy();
    for (const server of servers) server.close();
    await answered.socket.closed(5_000);
    answered.restore();
  }
});

/**
 * With both hosts of `options` down again, the first round in which both
 * fail is held 50 ms (the wait started afresh), at the top of its jitter,
 * and the connect before it, within the round, not at all.
 */
async function assertFirstRoundWait(
  answered: HeldCloses,
  options: Parameters<HeldCloses["socket"]>[0],
): Promise<void> {
  const held = answered.holds.length;
  const after: number[] = [];
  for (let i = 0; i < 2; i++) {
    after.push(await closedAt(answered.socket(options)));
  }
  const holds = answered.holds.slice(held);
  const measured = `${timed(after)}; held ${
    holds.map(({ wait }) => wait).join(", ")
  }`;
  assert.deepEqual(holds.map(({ wait }) => wait), [50], measured);
  const last = holds[0]!;
  assert.ok(after[1]! - last.at >= last.wait - 5, measured);
}
