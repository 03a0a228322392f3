/**
 * The in-memory KV Connect database the Deno Deploy tests attach holds
 * KvStore's contract (tests/_kv_connect_stand_in.ts), in a process of its
 * own with `DENO_KV_ACCESS_TOKEN` set there only.
 *
 * @module
 */
import { testInOwnProcess } from "./_own_process.ts";

Deno.test("the in-memory KV Connect database holds KvStore's contract over Deno's own KV Connect client (with DENO_KV_ACCESS_TOKEN set in a process of its own)", async () => {
  // Deno.openKv(url) takes the access token from the environment only.
  await testInOwnProcess("tests/_kv_connect_stand_in.ts", {
    DENO_KV_ACCESS_TOKEN: "kv-connect-token-0123456789",
  });
});
