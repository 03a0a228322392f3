/**
 * A store on a client of one's own behind a network partition: a relay
 * that stops forwarding and reading both ways with its sockets open (the
 * packets dropped, not refused), then is replaced (new connections go
 * through, the caught ones stay silent, as those to a lost primary do).
 * On a plain `postgres(url)` the reads lost in the partition keep the
 * pool's connections busy for good, and no read answers after the heal;
 * with `answeredSocketOption` (`@relayer/poison/postgres-socket`) the
 * pool serves again within the bound.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { answeredSocketOption } from "../../store/postgres_socket.ts";
import {
  connect,
  freshSchema,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";
import { blackHole } from "../_black_hole.ts";

/** The store's bound (`connectionWaitMs`), and the socket's. */
const BOUND_MS = 1_000;
/** How long after the heal a read is tried for. */
const AFTER_MS = 6 * BOUND_MS;

/**
 * Two reads through the whole pool (2 connections), two more once the
 * relay black-holes, then reads one after another once it is replaced.
 *
 * @returns How long each read in the partition took to fail, and how long
 *   after the heal the first read answered (null: none within `AFTER_MS`).
 */
async function acrossPartition(
  extra: Record<string, unknown>,
): Promise<{ failedMs: number[]; servedMs: number | null }> {
  const admin = await connect(1);
  const schema = freshSchema();
  const relay = await blackHole(await postgresUrl());
  const sql = postgres(relay.url, {
    max: 2,
    onnotice: () => {},
    max_lifetime: null,
    ...extra,
  });
  const store = new PostgresStore(sql, { schema, connectionWaitMs: BOUND_MS });
  try {
    await new PostgresStore(admin, { schema }).migrate();
    await store.createIntent({ id: "pi_1", state: "authorized" });
    await Promise.all([store.getIntent("pi_1"), store.getIntent("pi_1")]);
    relay.hole();
    const failedMs = await Promise.all([0, 1].map(async () => {
      const start = performance.now();
      await assert.rejects(store.getIntent("pi_1"));
      return Math.round(performance.now() - start);
    }));
    relay.replace();
    const healed = performance.now();
    let servedMs: number | null = null;
    while (servedMs === null && performance.now() - healed < AFTER_MS) {
      const read = await store.getIntent("pi_1").catch(() => undefined);
      if (read?.state === "authorized") {
        servedMs = Math.round(performance.now() - healed);
      } else await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return { failedMs, servedMs };
  } finally {
    store.close();
    await sql.end({ timeout: 0 });
    await relay.close();
    const socket = extra.socket as
      | { closed?: (ms: number) => Promise<void> }
      | undefined;
    await socket?.closed?.(3 * BOUND_MS);
    await admin.unsafe(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

Deno.test({
  name:
    "a store on a plain postgres(url) client never serves again after a partition that dropped its reads",
  ignore: !postgresAvailable,
  async fn() {
    const { failedMs, servedMs } = await acrossPartition({});
    for (const ms of failedMs) {
      assert.ok(ms < BOUND_MS * 1.5, `a read failed in ${ms}ms`);
    }
    assert.equal(servedMs, null, `served ${servedMs} ms after the heal`);
  },
});

Deno.test({
  name:
    "a store on a client given answeredSocketOption() serves again within the bound after a partition",
  ignore: !postgresAvailable,
  async fn() {
    const { failedMs, servedMs } = await acrossPartition(
      answeredSocketOption(BOUND_MS),
    );
    for (const ms of failedMs) {
      assert.ok(ms < BOUND_MS * 1.5, `a read failed in ${ms}ms`);
    }
    assert.ok(
      servedMs !== null && servedMs < BOUND_MS * 1.5,
      `served ${servedMs} ms after the heal`,
    );
  },
});

Deno.test("answeredSocketOption refuses a bound that is not a whole number of ms from 1 to 2147483647, saying what to give", () => {
  // Past 2147483647 ms a timer fires at once: each write's watch would
  // cut a connection whose server answers in a few ms.
  for (const bad of [0, -1, 1.5, Number.NaN, Infinity, 2 ** 31, 1e12]) {
    assert.throws(
      () => answeredSocketOption(bad),
      (error: unknown) =>
        error instanceof RangeError &&
        /^Cannot make the PostgreSQL socket as 'answerMs' must be a whole number of milliseconds from 1 to 2147483647 \(give it the store's connectionWaitMs, 10000 by default\): current value is /
          .test(error.message),
      String(bad),
    );
  }
  assert.equal(typeof answeredSocketOption().socket, "function");
  assert.equal(typeof answeredSocketOption(2 ** 31 - 1).socket, "function");
});

Deno.test("answeredSocketOption refuses an onCut that is not a function at once, not at the first cut (in a timer, where it would end the process)", () => {
  const bads = [
    [null, "null"],
    ["relayer", "string"],
    [{ log: () => {} }, "object"],
  ] as const;
  for (const [bad, shown] of bads) {
    assert.throws(
      () => answeredSocketOption(10_000, bad as unknown as () => void),
      (error: unknown) =>
        error instanceof TypeError &&
        error.message ===
          `Cannot make the PostgreSQL socket as 'onCut' must be a function taking one line (such as line => console.error(line)), or left out: current value is ${shown}`,
      String(bad),
    );
  }
  assert.equal(
    typeof answeredSocketOption(10_000, undefined).socket,
    "function",
  );
});
