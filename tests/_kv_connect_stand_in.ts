/**
 * The in-memory KV Connect database the Deno Deploy tests attach holds
 * KvStore's contract over Deno's own KV Connect client, its commit gap
 * too: a store the service's processes share, as the database Deploy
 * attaches is. Run by tests/kv_connect_stand_in_test.ts in a process of its
 * own, with `DENO_KV_ACCESS_TOKEN` set there only: `Deno.openKv(url)` reads
 * it from the environment alone, which the files of a parallel run share.
 *
 * @module
 */
import { storeContract } from "../testing/store_contract.ts";
import { hookedKvStore } from "./store/_hooked_kv.ts";
import { memoryKvConnect } from "./_memory_kv_connect.ts";

if (!Deno.env.get("DENO_KV_ACCESS_TOKEN")) {
  throw new Error(
    "tests/_kv_connect_stand_in.ts runs with DENO_KV_ACCESS_TOKEN set: run tests/kv_connect_stand_in_test.ts",
  );
}

storeContract("KvStore on KV Connect (memory)", async () => {
  const server = memoryKvConnect();
  const kv = await Deno.openKv(`http://127.0.0.1:${server.addr.port}/kv`);
  return {
    ...hookedKvStore(kv),
    close: async () => {
      kv.close();
      await server.shutdown();
    },
  };
}, { test: Deno.test, commitGap: true });
