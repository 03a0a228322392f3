/**
 * The in-memory KV Connect database the Deno Deploy tests attach holds
 * KvStore's contract over Deno's own KV Connect client, its commit gap
 * too: a store the service's processes share, as the database Deploy
 * attaches is.
 *
 * @module
 */
import { storeContract } from "../testing/store_contract.ts";
import { hookedKvStore } from "./store/_hooked_kv.ts";
import { memoryKvConnect } from "./_memory_kv_connect.ts";

storeContract("KvStore on KV Connect (memory)", async () => {
  const server = memoryKvConnect();
  // Deno.openKv(url) takes the access token from the environment only.
  Deno.env.set("DENO_KV_ACCESS_TOKEN", "kv-connect-token-0123456789");
  const kv = await Deno.openKv(`http://127.0.0.1:${server.addr.port}/kv`);
  return {
    ...hookedKvStore(kv),
    close: async () => {
      kv.close();
      await server.shutdown();
    },
  };
}, { test: Deno.test, commitGap: true });
