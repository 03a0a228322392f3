/**
 * The store contract suite on Node: `KvStore` over `openKv(":memory:")` from
 * the npm package `@deno/kv`, run by `node --test` after
 * `deno task node-check` bundles this file; then writes carrying give-up
 * marks against `@deno/kv`'s 10 checks a commit.
 *
 * @module
 */

import { openKv } from "@deno/kv";
import { storeContract } from "../store/_contract.ts";
import { hookedKvStore } from "../store/_hooked_kv.ts";
import { kvMarksTests } from "../store/_kv_marks.ts";
import { runner } from "./_runner.ts";

const { test } = await runner();
storeContract("KvStore on Node (@deno/kv)", async () => {
  const kv = await openKv(":memory:");
  return { ...hookedKvStore(kv), close: () => kv.close() };
}, { test, commitGap: true });
kvMarksTests("KvStore on Node (@deno/kv)", () => openKv(":memory:"), test);
