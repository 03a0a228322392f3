/**
 * `main.ts` instances with `KV_QUEUE=1` on one Deno KV file, the first
 * holding a delivery mid-send: for the tests of a local-queue message Deno
 * KV puts back while its send may still be out.
 *
 * Deno KV (denokv's SQLite backend) keeps a message being handled in its
 * `queue_running` table under a deadline 5 s after the message was due,
 * and never renews it (its keepalive renews the messages of a set nothing
 * fills). Opening the file, and once a minute, every process puts back
 * each running message whose deadline passed, on the message's redelivery
 * schedule (1 s later for the service's messages): a delivery still
 * running 5 s after its message was due is delivered again, to whichever
 * instance listens, its first process alive or not.
 *
 * @module
 */

import assert from "node:assert/strict";
import { KvStore } from "../store/kv.ts";
import { type MainProcess, startMain } from "./_main_process.ts";

/**
 * Deno KV's deadline on a running message, and a margin: a process that
 * opens the file this long after the held send started (its message was
 * due before) puts the message back.
 */
const PAST_DEADLINE_MS = 5_000 + 200;

/** The intent whose settle job the first instance holds mid-send. */
export const INTENT = "pi_put_back";

/** That job's id, which names its line (`["relayer_line", JOB]`). */
export const JOB = `${INTENT}/settle`;

/** The tx hash every send of the signer answers. */
export const TX_HASH = "0xput_back";

/** A send the signer took: its intent, and whether it was a rescue. */
export interface TakenSend {
  readonly intentId: string;
  readonly replace: boolean;
}

/** The instances, the signer and the file, with the first mid-send. */
export interface PutBackWorld {
  /** The first instance, its delivery's send held by the signer. */
  readonly first: MainProcess;
  /** When (`Date.now()`) the signer took the held send. */
  readonly sendStarted: number;
  /** Starts another instance on the file; resolves once it serves. */
  start(): Promise<MainProcess>;
  /** Every send the signer took, in order. */
  readonly sends: readonly TakenSend[];
  /** Answers the held sends, and every later one at once. */
  release(): void;
  /** The store, on a handle of its own. */
  readonly store: KvStore;
  /** The id of the message the job's line names now. */
  line(): Promise<unknown>;
  /** Stops every instance (SIGTERM) and returns what each wrote, in order. */
  stop(): Promise<{ code: number; stdout: string; stderr: string }[]>;
}

/** Waits `ms`. */
export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `Date.now()` reaches `at`. */
const sleepUntil = (at: number): Promise<void> =>
  sleep(Math.max(0, at - Date.now()));

/** Reads `read` every 100 ms until `done` holds of it, or `ms` passed. */
export async function until<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  ms: number,
): Promise<T> {
  const end = Date.now() + ms;
  let value = await read();
  while (!done(value) && Date.now() < end) {
    await sleep(100);
    value = await read();
  }
  return value;
}

/**
 * Starts the second instance once Deno KV's deadline on the first's
 * message has passed (`PAST_DEADLINE_MS` after its send began), and waits
 * for the copy Deno KV puts back: it answers busy, its retry taking the
 * job's line from `original`, and nothing beside the first send goes out.
 */
export async function assertCopyAnsweredBusy(
  world: PutBackWorld,
  original: unknown,
): Promise<void> {
  await sleepUntil(world.sendStarted + PAST_DEADLINE_MS);
  await world.start();
  // The copy answers busy, and its retry takes the line; or it sends.
  const moved = await until(
    world.line,
    (id) => id !== original || world.sends.length > 1,
    5_000,
  );
  assert.deepEqual(world.sends, [
    { intentId: INTENT, replace: false },
  ], "the copy sent nothing");
  assert.notEqual(moved, original, "the put-back copy was delivered");
}

/** Where `service` listens; fails with what it wrote if it ended first. */
async function serving(service: MainProcess): Promise<string> {
  const base = await service.base();
  if (base !== null) return base;
  const { code, stdout, stderr } = await service.ended();
  assert.fail(
    `main.ts ended (code ${code}) before it served: ${stdout}${stderr}`,
  );
}

/**
 * Runs `body` with a first `main.ts` holding the send of `INTENT`'s settle
 * job (queued on the local queue), and stops and removes it all after.
 * The lease (40 s) outlasts every test's wait; `STUCK_AFTER` (5 s) does
 * not, so only the lease and the write-ahead keep a copy from a rescue.
 */
export async function withHeldSend(
  signal: AbortSignal,
  body: (world: PutBackWorld) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_put_back_" });
  const path = `${dir}/relayer.kv`;
  const sends: TakenSend[] = [];
  let started: (at: number) => void = () => {};
  const firstStarted = new Promise<number>((resolve) => (started = resolve));
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const signer = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (request) => {
      if (new URL(request.url).pathname !== "/send") {
        return Response.json({ status: "confirmed" });
      }
      const { intentId, replace } = await request.json() as {
        intentId: string;
        replace?: boolean;
      };
      sends.push({ intentId, replace: replace === true });
      started(Date.now());
      await released;
      return Response.json({ txHash: TX_HASH });
    },
  );
  const ops = "put-back-ops-0123456789";
  const env = {
    SENDER_URL: `http://127.0.0.1:${signer.addr.port}`,
    // Longer than a send is held here (a pause included): answered, not
    // timed out. The lease is at least twice it.
    SENDER_TIMEOUT: "20s",
    LEASE: "40s",
    STUCK_AFTER: "5s",
    BASE: "500ms",
    OPS_TOKEN: ops,
    WEBHOOK_SECRET: "put-back-secret-0123456789",
    KV_PATH: path,
    KV_QUEUE: "1",
  };
  const services: MainProcess[] = [];
  const killAll = () => services.forEach((service) => service.kill());
  signal.addEventListener("abort", killAll);
  const start = async () => {
    const service = startMain(env, { writeDir: dir });
    services.push(service);
    await serving(service);
    return service;
  };
  let kv: Deno.Kv | undefined;
  try {
    const first = await start();
    const base = await first.base();
    const headers = { authorization: `Bearer ${ops}` };
    for (
      const [route, body, status] of [
        ["intents", { id: INTENT, state: "authorized" }, 201],
        ["jobs", { intentId: INTENT, kind: "settle" }, 202],
      ] as const
    ) {
      const res = await fetch(`${base}/v1/${route}`, {
        method: "POST",
        headers,
        body: JSON.stringify(body),
      });
      assert.equal(res.status, status, await res.text());
    }
    const sendStarted = await firstStarted;
    // Opened once the first instance runs its delivery.
    kv = await Deno.openKv(path);
    const handle = kv;
    await body({
      first,
      sendStarted,
      start,
      sends,
      release,
      store: new KvStore(kv),
      line: async () => (await handle.get(["relayer_line", JOB])).value,
      async stop() {
        for (const service of services) {
          // A paused one ends too.
          signalTo(service, "SIGCONT");
          signalTo(service, "SIGTERM");
        }
        return await Promise.all(services.map((s) => s.ended()));
      },
    });
  } finally {
    signal.removeEventListener("abort", killAll);
    killAll();
    await Promise.all(services.map((s) => s.ended().catch(() => {})));
    kv?.close();
    release();
    await signer.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

/** Sends `signal` to `service`, if it still runs. */
export function signalTo(service: MainProcess, signal: Deno.Signal): void {
  try {
    service.child.kill(signal);
  } catch {
    // already gone
  }
}

/** The lines of all `outputs` that match `pattern`. */
export function linesOf(
  outputs: readonly { stdout: string }[],
  pattern: RegExp,
): string[] {
  return outputs.flatMap(({ stdout }) =>
    stdout.split("\n").filter((line) => pattern.test(line))
  );
}
