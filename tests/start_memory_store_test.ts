/**
 * `KV_PATH=:memory:` keeps the store in memory whatever the working folder
 * holds (tests/_memory_store_cwd.ts), seen in a process of its own: the
 * test changes the working folder, which the files of a parallel run
 * share.
 *
 * @module
 */

import { testInOwnProcess } from "./_own_process.ts";

Deno.test("openService() with KV_PATH=:memory: starts in a working folder that holds a folder named :memory: (in a process of its own, whose working folder that is)", async () => {
  await testInOwnProcess("tests/_memory_store_cwd.ts");
});
