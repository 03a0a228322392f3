/**
 * The closes `answeredSocketOption`'s socket held back, as it decided them
 * (which connect, how long), not as a loaded machine's clock times them:
 * the suites of the wait between failed rounds read each hold here, and
 * time only what a busy machine cannot shorten (a held close comes no
 * sooner than its wait).
 *
 * The socket draws its jitter (`random`) at each hold and nowhere else,
 * and arms the hold's timer (`setTimeout`) right after the draw, in the
 * same turn. A draw, then, is a hold; the delay of the first timer armed
 * after it, before the turn ends, is the wait it chose.
 *
 * @module
 */

import {
  type AnsweredSocket,
  answeredSocketOption,
} from "../../store/postgres_socket.ts";
import { downPort } from "./_down_port.ts";

/** One close the socket held back. */
export interface HeldClose {
  /** Which connect it was: 1 for the socket's first, and so on. */
  connect: number;
  /** The wait it chose, in ms (`NaN` if it armed no timer after the draw). */
  wait: number;
  /** The value `random` gave at the draw. */
  drawn: number;
  /** When it was drawn (`performance.now()`): the hold's start. */
  at: number;
}

/** An `answeredSocketOption` socket whose holds are recorded. */
export interface HeldCloses {
  /** The socket option's socket, counting the connects it makes. */
  socket: AnsweredSocket;
  /** The closes held so far, in order. */
  holds: HeldClose[];
  /** Resolves with the `n`th hold (from 1) once its timer is armed. */
  hold(n: number): Promise<HeldClose>;
  /** Puts `setTimeout` (and `Math.random`, if it was watched) back. */
  restore(): void;
}

/**
 * `answeredSocketOption(answerMs, undefined, random)`, its holds recorded
 * in `holds`. Without `random`, the socket's default (`Math.random`) is
 * the one drawn from, watched until `restore()`.
 *
 * @param answerMs How long a write may go with nothing read back.
 * @param random The jitter's source, or none for the socket's default.
 */
export function heldCloses(
  answerMs: number,
  random?: () => number,
): HeldCloses {
  const holds: HeldClose[] = [];
  const waiting = new Map<number, (hold: HeldClose) => void>();
  let made = 0;
  let armed: HeldClose | undefined;
  const record = (hold: HeldClose, wait: number) => {
    armed = undefined;
    hold.wait = wait;
    holds.push(hold);
    waiting.get(holds.length)?.(hold);
    waiting.delete(holds.length);
  };
  const realSetTimeout = globalThis.setTimeout;
  const realRandom = Math.random;
  const source = random ?? realRandom;
  const watched = () => {
    const drawn = source();
    const hold: HeldClose = {
      connect: made,
      wait: NaN,
      drawn,
      at: performance.now(),
    };
    armed = hold;
    // A draw that armed no timer within its turn is recorded as such,
    // not matched with a later timer of someone else's.
    queueMicrotask(() => {
      if (armed === hold) record(hold, NaN);
    });
    return drawn;
  };
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    if (armed !== undefined) record(armed, Number(args[1]));
    return realSetTimeout(...args);
  }) as typeof setTimeout;
  // The socket's default is Math.random as it is when the socket is made.
  if (random === undefined) Math.random = watched;
  const answered = random === undefined
    ? answeredSocketOption(answerMs)
    : answeredSocketOption(answerMs, undefined, watched);
  const socket = Object.assign(
    (options: Parameters<AnsweredSocket>[0]) => {
      made++;
      return answered.socket(options);
    },
    { closed: answered.socket.closed },
  );
  return {
    socket,
    holds,
    hold(n) {
      const held = holds[n - 1];
      if (held !== undefined) return Promise.resolve(held);
      return new Promise((resolve) => waiting.set(n, resolve));
    },
    restore() {
      globalThis.setTimeout = realSetTimeout;
      Math.random = realRandom;
    },
  };
}

/**
 * Two hosts that are down, under `target_session_attrs=primary`, and a
 * socket at the top of its jitter (each held wait whole).
 */
export async function twoHostsDown(): Promise<{
  ports: number[];
  answered: HeldCloses;
  options: {
    host: string[];
    port: number[];
    target_session_attrs: string;
  };
}> {
  const ports = [await downPort(), await downPort()];
  const answered = heldCloses(2_000, () => 1);
  const options = {
    host: ["127.0.0.1", "127.0.0.1"],
    port: ports,
    target_session_attrs: "primary",
  };
  return { ports, answered, options };
}
