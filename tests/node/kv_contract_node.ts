/**
 * The store contract suite on Node: `KvStore` over `openKv(":memory:")` from
 * the npm package `@deno/kv`, run by `node --test` after
 * `deno task node-check` bundles this file.
 *
 * @module
 */

import "./_deno_test_shim.ts";
import { openKv } from "@deno/kv";
import { storeContract } from "../store/_contract.ts";
import { hookedKvStore } from "../store/_hooked_kv.ts";

storeContract("KvStore on Node (@deno/kv)", async () => {
  const kv = await openKv(":memory:");
  return { ...hookedKvStore(kv), close: () => kv.close() };
}, { commitGap: true });
