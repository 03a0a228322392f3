import assert from "node:assert/strict";
import { MemoryStore } from "../../mod.ts";
import { storeContract } from "../../testing/store_contract.ts";

// `storeContract` is what a store of one's own runs first. Called without
// its options it threw "Cannot destructure property 'test' of 'options'
// as it is undefined.", with a `test` that is no function "register is
// not a function", and it took a misspelt `commitGap` in silence, leaving
// the commit-gap test it was asked to run skipped.

const open = () => Promise.resolve({ store: new MemoryStore(), close() {} });

Deno.test("storeContract() refuses options without a test function, saying what to pass", () => {
  for (const options of [undefined, null]) {
    assert.throws(
      () => storeContract("MyStore", open, options as never),
      (error) =>
        error instanceof TypeError &&
        /options must be an object such as \{ test: Deno\.test \}/.test(
          error.message,
        ),
      String(options),
    );
  }
  for (const options of [{}, { test: "Deno.test" }]) {
    assert.throws(
      () => storeContract("MyStore", open, options as never),
      (error) =>
        error instanceof TypeError &&
        /'test' must be the function that registers a test, such as Deno\.test/
          .test(error.message),
      JSON.stringify(options),
    );
  }
});

Deno.test("storeContract() refuses an option it does not read, naming it", () => {
  assert.throws(
    () =>
      storeContract("MyStore", open, {
        test: () => {},
        comitGap: true,
      } as never),
    new TypeError(
      'Cannot run the store contract as "comitGap" is not one of its options (test, commitGap): check its spelling',
    ),
  );
});

Deno.test("storeContract() refuses an open that is not a function", () => {
  assert.throws(
    () => storeContract("MyStore", null as never, { test: () => {} }),
    (error) =>
      error instanceof TypeError &&
      /'open' must be a function/.test(error.message),
  );
});
