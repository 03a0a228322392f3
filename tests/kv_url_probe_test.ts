/**
 * `openService()` on a KV Connect database (`KV_URL`) reads it once
 * before it serves (tests/_kv_url_probe.ts). `Deno.openKv(url)` takes the
 * access token from the environment alone, which the files of a parallel
 * run share: the tests run in a process of their own, with
 * `DENO_KV_ACCESS_TOKEN` set there only.
 *
 * @module
 */
import { testInOwnProcess } from "./_own_process.ts";

Deno.test("openService() refuses a KV_URL database whose first read is refused, or that opens late or not at all, and leaves no handle or timer behind (with DENO_KV_ACCESS_TOKEN set in a process of its own)", async () => {
  await testInOwnProcess("tests/_kv_url_probe.ts", {
    DENO_KV_ACCESS_TOKEN: "kv-url-probe-token-0123456789",
  });
});
