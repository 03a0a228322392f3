/**
 * Two instances on one store (or two handles on one KV file, two
 * PostgresStores on one schema), clocks apart by up to their skew, a
 * store that fails writes before and after they land and answers late, a
 * Sender that times out after landing, answers `notSent` late, is slow
 * past the lease or sends a tx that reverts, on a chain where a fresh
 * nonce can pay twice; duplicate deliveries, give-ups, redrives and an
 * operator resolving reviews by the chain: no payment is made twice, none
 * fails or has its hold voided once a tx of it landed, none settles on
 * nothing, and every answer's claim matches the end state
 * (`tests/relayer/_money_harness.ts`). `MONEY_SEEDS=n` runs more.
 *
 * @module
 */

import { runHistory } from "./_money_harness.ts";
import { KvStore } from "../../store/kv.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { MemoryStore, type Store } from "../../mod.ts";
import { connect, openPostgresStore, postgresAvailable } from "../_postgres.ts";

interface Opened {
  readonly stores: Store | readonly [Store, Store];
  close(): unknown;
}

const BACKENDS: readonly {
  name: string;
  seeds: number;
  ignore?: boolean;
  open(): Promise<Opened>;
}[] = [
  {
    name: "MemoryStore",
    seeds: 40,
    open: () => Promise.resolve({ stores: new MemoryStore(), close: () => {} }),
  },
  {
    name: "KvStore (:memory:)",
    seeds: 20,
    async open() {
      const kv = await Deno.openKv(":memory:");
      return { stores: new KvStore(kv), close: () => kv.close() };
    },
  },
  {
    name: "KvStore, two handles on one file",
    seeds: 12,
    async open() {
      const dir = await Deno.makeTempDir();
      const kv1 = await Deno.openKv(`${dir}/relayer.kv`);
      const kv2 = await Deno.openKv(`${dir}/relayer.kv`);
      return {
        stores: [new KvStore(kv1), new KvStore(kv2)],
        async close() {
          kv1.close();
          kv2.close();
          await Deno.remove(dir, { recursive: true });
        },
      };
    },
  },
  {
    name: "PostgresStore, two stores on one schema",
    seeds: 10,
    ignore: !postgresAvailable,
    async open() {
      const opened = await openPostgresStore();
      const sql = await connect(4);
      const other = new PostgresStore(sql, { schema: opened.schema });
      return {
        stores: [opened.store, other],
        async close() {
          await sql.end();
          await opened.close();
        },
      };
    },
  },
];

const SEEDS = Number(Deno.env.get("MONEY_SEEDS") ?? "0");
const FROM = Number(Deno.env.get("MONEY_FROM") ?? "1");

for (const backend of BACKENDS) {
  Deno.test({
    name:
      `two instances with faults, slow sends, give-ups, redrives and an operator pay once and never fail a paid payment [${backend.name}]`,
    ignore: backend.ignore ?? false,
    async fn() {
      const bad: string[] = [];
      const seeds = SEEDS || backend.seeds;
      for (let seed = FROM; seed < FROM + seeds; seed++) {
        for (const faults of [false, true]) {
          const { stores, close } = await backend.open();
          try {
            const world = await runHistory(stores, seed, {
              faults,
              operator: true,
              late: faults &&
                (Deno.env.get("MONEY_LATE") !== undefined || seed % 2 === 0),
            });
            if (world.violations.length > 0) {
              bad.push(
                `seed ${seed} faults ${faults}: ${
                  world.violations.join(" | ")
                }`,
              );
            }
          } finally {
            await close();
          }
        }
      }
      if (bad.length > 0) throw new Error(bad.join("\n"));
    },
  });
}

// The property can fail: a Sender that signs a rescue on a fresh nonce
// pays twice, and the harness says so.
Deno.test("the money harness catches a Sender that rescues on a fresh nonce (a payment made twice)", async () => {
  const found: string[] = [];
  for (let seed = 1; seed <= 40 && found.length === 0; seed++) {
    const world = await runHistory(new MemoryStore(), seed, {
      faults: false,
      operator: true,
      freshRescues: true,
    });
    found.push(...world.violations.filter((v) => /paid \d+ times/.test(v)));
  }
  if (found.length === 0) throw new Error("no payment made twice was found");
});
