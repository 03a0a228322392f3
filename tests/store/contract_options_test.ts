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

Deno.test("storeContract() refuses a store that open() did not give fresh and empty, saying to open a fresh one each time", async () => {
  // One store for every test, as `new PostgresStore(sql)` on its default
  // schema is: the second test met the first's intents, and failed
  // "Cannot create intent pi_1 as it exists", as did each one after it.
  const shared = new MemoryStore();
  const tests: { name: string; fn: () => Promise<void> }[] = [];
  let opened = 0;
  let closed = 0;
  storeContract(
    "MyStore",
    () => {
      opened++;
      return Promise.resolve({ store: shared, close: () => void closed++ });
    },
    {
      test: ({ name, ignore }, fn) => {
        if (!ignore) {
          tests.push({
            name,
            fn: () => fn({ step: async (_, body) => await body() }),
          });
        }
      },
    },
  );
  const first = tests.find((t) => /create an intent twice/.test(t.name))!;
  await first.fn();
  const errors: string[] = [];
  for (const { fn } of tests.filter((t) => t !== first)) {
    await fn().catch((error) => errors.push((error as Error).message));
  }
  assert.ok(errors.length > 0, "no test failed on a store in use");
  // Each store a refused test opened is closed all the same.
  assert.equal(closed, opened);
  for (const message of errors) {
    assert.match(
      message,
      /^MyStore: open\(\) gave a store that is not empty \(it holds intent pi_1\): give each call a fresh, empty store \(a new schema, database or key prefix\), as every test of the contract writes the same ids$/,
    );
  }
});

Deno.test("storeContract() refuses a store in use for its commit-gap test too, before it reads beforeNextCommit", async () => {
  const shared = new MemoryStore();
  await shared.createIntent({ id: "pi_1", state: "created" });
  let gap: (() => Promise<void>) | undefined;
  let closed = 0;
  storeContract(
    "MyStore",
    () => Promise.resolve({ store: shared, close: () => void closed++ }),
    {
      commitGap: true,
      test: ({ name, ignore }, fn) => {
        if (!ignore && /checks at commit time/.test(name)) {
          gap = () => fn({ step: async (_, body) => await body() });
        }
      },
    },
  );
  assert.ok(gap, "no commit-gap test was registered");
  await assert.rejects(
    gap(),
    new Error(
      "MyStore: open() gave a store that is not empty (it holds intent pi_1): give each call a fresh, empty store (a new schema, database or key prefix), as every test of the contract writes the same ids",
    ),
  );
  assert.equal(closed, 1, "the refused store is closed");
});
