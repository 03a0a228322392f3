/**
 * The webhook app's own cost on the read path, without a socket or a load
 * generator: signed generic-route deliveries handed straight to the app's
 * `fetch`, `--in-flight` at a time (50), each signed afresh with its own
 * message id, on settling intents whose receipt stays pending (each
 * delivery looks and answers 503). On `MemoryStore` and on `KvStore` over
 * a SQLite file, the stores alternated run by run; printed: deliveries/s,
 * median (min–max).
 *
 * It is the bench to profile the app with, since nothing else shares the
 * process (on Linux: `perf record -g -- deno run -A bench/app_bench.ts
 * --store kv --runs 1`), and to weigh a change with: run it alternated with
 * the code as it is. `bench:http` measures the service over HTTP.
 *
 * `deno task bench:app [--runs 3] [--deliveries 30000] [--in-flight 50] [--store memory,kv] [--kv-dir DIR]`
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { parseArgs } from "node:util";
import { MemoryStore, type Store } from "../mod.ts";
import { KvStore } from "../store/kv.ts";
import { createApp } from "../webhook/app.ts";
import { hmacSigner } from "../webhook/_auth.ts";
import { listFlag, readArgs, spread, wholeFlag } from "./_measure.ts";
import { ANSWER_TEXT, scriptedSender, seedStore } from "./_scenarios.ts";

const SECRET = "bench-secret-0123456789";
const INTENTS = 20_000;
const STORES = ["memory", "kv"] as const;
type StoreName = typeof STORES[number];

const { runs, deliveries, inFlight, stores, kvDir } = readArgs(
  "bench:app",
  () => {
    const { values } = parseArgs({
      args: Deno.args,
      options: {
        runs: { type: "string", default: "3" },
        deliveries: { type: "string", default: "30000" },
        "in-flight": { type: "string", default: "50" },
        store: { type: "string", default: STORES.join(",") },
        "kv-dir": { type: "string" },
      },
    });
    return {
      runs: wholeFlag("runs", values.runs),
      deliveries: wholeFlag("deliveries", values.deliveries),
      inFlight: wholeFlag("in-flight", values["in-flight"]),
      stores: listFlag("store", values.store, STORES),
      kvDir: values["kv-dir"],
    };
  },
  "[--runs 3] [--deliveries 30000] [--in-flight 50] [--store memory,kv] [--kv-dir DIR]",
);

/** One run on a fresh store: deliveries/s. */
async function run(name: StoreName): Promise<number> {
  let store: Store;
  let close = () => {};
  if (name === "kv") {
    const dir = await Deno.makeTempDir({
      prefix: "relayer_app_bench_",
      ...(kvDir === undefined ? {} : { dir: kvDir }),
    });
    const kv = await Deno.openKv(`${dir}/relayer.kv`);
    store = new KvStore(kv);
    close = () => {
      kv.close();
      Deno.removeSync(dir, { recursive: true });
    };
  } else {
    store = new MemoryStore();
  }
  try {
    await seedStore(store, "read", INTENTS);
    const app = createApp({
      store,
      sender: scriptedSender("read", INTENTS),
      webhookSecret: SECRET,
    });
    const sign = hmacSigner(SECRET);
    const batch = crypto.randomUUID();
    let sent = 0;
    let unexpected = 0;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (sent < deliveries) {
          const i = sent++;
          const body = JSON.stringify({
            job: { intentId: `pi_r_${i % INTENTS}`, kind: "settle" },
            delivery: 1,
            messageId: `${batch}-${i}`,
          });
          const response = await app.fetch(
            new Request("http://relayer.test/v1/deliveries", {
              method: "POST",
              body,
              headers: {
                "content-type": "application/json",
                "content-length": String(body.length),
                "x-signature": sign(body, Math.floor(Date.now() / 1000)),
              },
            }),
          );
          // The read path's answer: a retry while the receipt is pending.
          // The app's own 503 (its store failing) is not one.
          const text = await response.text();
          if (
            response.status !== 503 || !text.includes(ANSWER_TEXT.read)
          ) unexpected++;
        }
      }),
    );
    const rate = deliveries / ((performance.now() - start) / 1000);
    if (unexpected > 0) {
      throw new Error(
        `${unexpected} of ${deliveries} deliveries were not answered 503 "waiting for … to confirm" (the read path's retry): the bench is not measuring the read path`,
      );
    }
    return rate;
  } finally {
    close();
  }
}

if (import.meta.main) {
  const measured = new Map(stores.map((name) => [name, [] as number[]]));
  for (let i = 1; i <= runs; i++) {
    for (const name of stores) {
      const rate = await run(name);
      measured.get(name)!.push(rate);
      console.error(
        `run ${i}/${runs}: ${name}: ${Math.round(rate)} deliveries/s`,
      );
    }
  }
  const int = (v: number) => Math.round(v).toLocaleString("en-US");
  console.log(
    `${runs} runs of ${deliveries} read-path deliveries, ${inFlight} in flight, in process; Deno ${Deno.version.deno}; median (min–max)\n`,
  );
  console.log("| store | deliveries/s |");
  console.log("| --- | ---: |");
  for (const [name, rates] of measured) {
    console.log(
      `| ${name === "kv" ? "KvStore, file" : "MemoryStore"} | ${
        spread(rates, int)
      } |`,
    );
  }
}
