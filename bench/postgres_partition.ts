/**
 * The service through a network partition, with its own settings (the
 * store's bound and the socket's, 10 s): `main.ts`'s `openService` on a
 * server this run starts, through a relay on 127.0.0.1 that drops every
 * byte both ways and keeps its sockets open (`support/partition_proxy.ts`).
 * It opens the whole pool, cuts the network, asks a delivery, `/readyz` and
 * an ops route at once, then keeps 6 signed deliveries and 3 ops reads a
 * second going for `--seconds` more of the partition, and heals it: it prints what each
 * answered and how long it took, how many requests waited at most, the
 * relay's open connections and the heap through it, and how long after the
 * heal `/readyz` and the ops route answer 200.
 *
 * `deno run --allow-read --allow-write --allow-run --allow-net=127.0.0.1
 * --allow-env bench/postgres_partition.ts [--seconds 30]` (about a minute).
 * docs/postgres.md holds a run.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { parseArgs } from "node:util";
import { readArgs, refuseArgs } from "./_measure.ts";
import { openService } from "../main.ts";
import { loadConfig } from "../webhook/config.ts";
import { hmacSignature } from "../webhook/_auth.ts";
import { startPostgres } from "../support/postgres_server.ts";
import { partitionProxy } from "../support/partition_proxy.ts";

const { values } = readArgs("bench/postgres_partition.ts", () =>
  parseArgs({
    args: Deno.args,
    options: { seconds: { type: "string", default: "30" } },
  }));
const SECONDS = Number(values.seconds);
if (!Number.isFinite(SECONDS) || SECONDS < 1) {
  refuseArgs(
    "bench/postgres_partition.ts",
    "--seconds must be a number of at least 1",
  );
}
const SECRET = "a-secret-of-16-chars";
const OPS_TOKEN = "an-ops-token-of-32-characters-xx";

const server = await startPostgres();
const target = new URL(server.url);
const relay = await partitionProxy({
  hostname: target.hostname,
  port: Number(target.port),
});
const lines: string[] = [];
const service = await openService(
  loadConfig({
    SENDER_URL: "http://127.0.0.1:9",
    WEBHOOK_SECRET: SECRET,
    OPS_TOKEN,
    DATABASE_URL: relay.via(server.url),
  }),
  { log: (line) => lines.push(line) },
);
const ops = { authorization: `Bearer ${OPS_TOKEN}` };
let bodies = 0;

/** One request of `kind`: its status, its Retry-After, and how long it took. */
async function ask(kind: "delivery" | "readyz" | "ops") {
  let request: Request;
  if (kind === "delivery") {
    const body = JSON.stringify({
      job: { intentId: "pi_0001", kind: "settle" },
      n: bodies++, // each body, so each signature, its own
    });
    request = new Request("http://127.0.0.1/v1/deliveries", {
      method: "POST",
      body,
      headers: {
        "content-type": "application/json",
        "x-signature": hmacSignature(
          SECRET,
          body,
          Math.floor(Date.now() / 1000),
        ),
      },
    });
  } else if (kind === "readyz") {
    request = new Request("http://127.0.0.1/readyz");
  } else {
    request = new Request("http://127.0.0.1/v1/intents/pi_0001", {
      headers: ops,
    });
  }
  const start = performance.now();
  const response = await service.fetch(request);
  await response.body?.cancel();
  return {
    kind,
    status: response.status,
    retryAfter: response.headers.get("retry-after"),
    ms: Math.round(performance.now() - start),
  };
}

const made = await service.fetch(
  new Request("http://127.0.0.1/v1/intents", {
    method: "POST",
    headers: ops,
    body: JSON.stringify({ id: "pi_0001", state: "created" }),
  }),
);
if (made.status !== 201) throw new Error(`create: ${made.status}`);
await made.body?.cancel();
// The whole pool open: ten reads at once.
await Promise.all(
  Array.from({ length: 10 }, () => service.store.getIntent("pi_0002")),
);
const heap = () => (Deno.memoryUsage().heapUsed / 1e6).toFixed(1);
console.log(`before: heap ${heap()} MB, relay open ${relay.open()}`);
relay.partition();
const cut = performance.now();
const first = await Promise.all(
  (["delivery", "readyz", "ops"] as const).map(ask),
);
console.log(
  "at once in the partition:",
  first.map((a) =>
    `${a.kind} ${a.status} in ${a.ms} ms (Retry-After ${
      a.retryAfter ?? "none"
    })`
  ).join("; "),
);
const answers: Awaited<ReturnType<typeof ask>>[] = [];
const load: Promise<void>[] = [];
let waiting = 0;
let mostWaiting = 0;
let nextReport = 5_000;
const loadStart = performance.now();
while (performance.now() - loadStart < SECONDS * 1000) {
  for (const kind of ["delivery", "delivery", "ops"] as const) {
    waiting++;
    mostWaiting = Math.max(mostWaiting, waiting);
    load.push(
      ask(kind).then((answer) => {
        answers.push(answer);
        waiting--;
      }),
    );
  }
  await new Promise((resolve) => setTimeout(resolve, 333));
  if (performance.now() - loadStart >= nextReport) {
    console.log(
      `${
        Math.round((performance.now() - cut) / 1000)
      }s into the partition: ${waiting} requests waiting, relay open ${relay.open()} (accepted ${relay.accepted()} in all), heap ${heap()} MB`,
    );
    nextReport += 5_000;
  }
}
await Promise.all(load);
const counts = new Map<string, { n: number; most: number }>();
for (const a of answers) {
  const key = `${a.kind} ${a.status} (Retry-After ${a.retryAfter ?? "none"})`;
  const seen = counts.get(key) ?? { n: 0, most: 0 };
  counts.set(key, { n: seen.n + 1, most: Math.max(seen.most, a.ms) });
}
console.log(
  `under load for ${SECONDS}s of the partition: ${
    [...counts].map(([key, { n, most }]) => `${n} × ${key}, slowest ${most} ms`)
      .join("; ")
  }; at most ${mostWaiting} requests waiting at once`,
);
relay.heal();
const healed = performance.now();
const back: Record<string, number> = {};
while (performance.now() - healed < 60_000 && Object.keys(back).length < 2) {
  for (const answer of await Promise.all([ask("readyz"), ask("ops")])) {
    if (answer.status === 200) {
      back[answer.kind] ??= Math.round(performance.now() - healed);
    }
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
}
console.log(
  `after the heal: /readyz 200 after ${
    back.readyz ?? "over 60000"
  } ms, the ops route 200 after ${
    back.ops ?? "over 60000"
  } ms; relay open ${relay.open()}; ${
    lines.filter((line) => /sent nothing for/.test(line)).length
  } lines said a connection was cut`,
);
await Promise.race([
  service.close(),
  new Promise((resolve) => setTimeout(resolve, 5_000)),
]);
await relay.close();
await server.stop();
Deno.exit(0);
