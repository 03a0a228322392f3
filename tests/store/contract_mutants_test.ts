/**
 * The store contract catches a store that breaks one rule the relayer
 * relies on: each mutant below is `MemoryStore` with one rule broken (its
 * source edited in a copy), and the contract must fail on it. And it
 * passes a store whose errors come from another copy of the package, as
 * the relayer accepts them.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  BusyError,
  ConflictError,
  MemoryStore,
  ReplayError,
  type Store,
} from "../../mod.ts";
import { type RegisterTest, storeContract } from "./_contract.ts";
import { anotherCopy as other } from "./_another_copy.ts";

/** Runs the contract on `make`'s stores; returns the names of the tests that fail. */
async function failing(make: () => Store): Promise<string[]> {
  const tests: { name: string; fn: Parameters<RegisterTest>[1] }[] = [];
  storeContract(
    "S",
    () => Promise.resolve({ store: make(), close: () => {} }),
    {
      test: ({ name, ignore }, fn) => void (ignore || tests.push({ name, fn })),
    },
  );
  const failed: string[] = [];
  for (const { name, fn } of tests) {
    await fn({ step: async (_, step) => await step() }).catch(() =>
      failed.push(name)
    );
  }
  return failed;
}

/** One rule broken: `find` in `store/<file>` replaced by `replace`. */
interface Mutant {
  readonly file: "_rules.ts" | "memory.ts";
  readonly find: string;
  readonly replace: string;
}

/**
 * MemoryStore with `field`, a `Map` of `type` by id, keyed by `normal(k)`
 * instead of the id `k`: ids it makes one share an entry, as in a
 * database whose collation ignores case, or a key cut short.
 */
function keyedBy(field: string, type: string, normal: string): Mutant {
  const key = `(${normal})`;
  return {
    file: "memory.ts",
    find: `  ${field} = new Map<string, ${type}>();`,
    replace: `  ${field} = new (class extends Map<string, ${type}> {
    override get(k: string) { return super.get${key}; }
    override set(k: string, v: ${type}) { return super.set(${normal}, v); }
    override delete(k: string) { return super.delete${key}; }
    override has(k: string) { return super.has${key}; }
  })();`,
  };
}

const PUT_DEAD_LETTER_LEASE =
  "      if (options.claim) this.#checkClaim(options.claim);\n      this.#setLease(id, lease);";

// Each of these passed the contract once, and breaks a rule the relayer
// relies on (see docs/stores.md, "What every store refuses").
const MUTANTS: Record<string, Mutant> = {
  "voids a hold while a send is in flight (only mayHaveSent counted)": {
    file: "_rules.ts",
    find:
      "return intent.mayHaveSent !== false || intent.broadcasting !== null;",
    replace: "return intent.mayHaveSent !== false;",
  },
  "fails a settling intent while a send is in flight": {
    file: "_rules.ts",
    find:
      '(mayHaveMoved(current) || current.lastBroadcast?.outcome !== "not_sent")',
    replace:
      '(current.mayHaveSent || current.lastBroadcast?.outcome !== "not_sent")',
  },
  "moves to settling behind a voided hold (I6)": {
    file: "_rules.ts",
    find: 'if (change.to === "settling" && hold !== "pending") {',
    replace: "if (false) {",
  },
  "captures in a move by the ledger only, not the state's rules": {
    file: "_rules.ts",
    find: ": heldBy(read, change.ledger, change.to);",
    replace: ": nextHold(current, change.ledger);",
  },
  "settles behind a send in flight on a tx not on record": {
    file: "_rules.ts",
    find: "current.txHashes.includes(change.confirmed);",
    replace: "true;",
  },
  "keeps the write-ahead of a send in flight when it settles on a confirmed tx":
    {
      file: "_rules.ts",
      find: "    ...read,\n    state: change.to,",
      replace: "    ...current,\n    state: change.to,",
    },
  "voids the hold of a payment in review that may have sent, alone": {
    file: "_rules.ts",
    find: 'op === "void" && state === "needs_review" && to === undefined &&',
    replace: "false &&",
  },
  "voids a review's hold alone while a send is in flight (only mayHaveSent counted)":
    {
      file: "_rules.ts",
      find:
        'op === "void" && state === "needs_review" && to === undefined &&\n    mayHaveMoved(intent)',
      replace:
        'op === "void" && state === "needs_review" && to === undefined &&\n    intent.mayHaveSent !== false',
    },
  "fails an intent whose hold is captured": {
    file: "_rules.ts",
    find:
      'if (change.to === "failed" && (hold === "pending" || hold === "captured")) {',
    replace: 'if (change.to === "failed" && hold === "pending") {',
  },
  "records an unknown outcome as one that cannot have left": {
    file: "_rules.ts",
    find:
      'mayHaveSent: current.mayHaveSent || broadcast.outcome !== "not_sent",',
    replace:
      'mayHaveSent: current.mayHaveSent || broadcast.outcome === "sent",',
  },
  "marks an I6 refusal as a race": {
    file: "_rules.ts",
    find:
      "// I6: nothing is broadcast without reserved funds.\n    throw refusal(",
    replace: "throw new ConflictError(",
  },
  "marks a move from the wrong state as a race": {
    file: "_rules.ts",
    find: "if (current.state !== change.from) {\n    throw refusal(",
    replace:
      "if (current.state !== change.from) {\n    throw new ConflictError(",
  },
  "checks unlessCounted only with a lease": {
    file: "memory.ts",
    find: "for (const key of uncountedKeys(options)) {",
    replace: "if (options.lease) for (const key of uncountedKeys(options)) {",
  },
  "uses the claim of a write a give-up mark refuses": {
    file: "memory.ts",
    find: "for (const key of uncountedKeys(options)) {",
    replace:
      "if (options.claim) this.#claim(options.claim);\n    for (const key of uncountedKeys(options)) {",
  },
  "takes the lease of a write a give-up mark refuses": {
    file: "memory.ts",
    find: "for (const key of uncountedKeys(options)) {",
    replace:
      "this.#setLease(id, lease);\n    for (const key of uncountedKeys(options)) {",
  },
  "resets counts for a poison move it refuses": {
    file: "memory.ts",
    find: "const record = this.#expect(id, version);",
    replace:
      "if (deadLetter) this.#counts.delete(deadLetter.jobId);\n    const record = this.#expect(id, version);",
  },
  "takes the lease of a dead letter it refuses for its version": {
    file: "memory.ts",
    find: "      if (\n        options.intentVersion !== undefined &&",
    replace:
      "      if (options.lease) this.#setLease(id, leaseAfter(id, this.#leases.get(id) ?? null, options.lease));\n      if (\n        options.intentVersion !== undefined &&",
  },
  "lets the lease a dead letter takes lapse before now + ttlMs": {
    file: "memory.ts",
    find: PUT_DEAD_LETTER_LEASE,
    replace: PUT_DEAD_LETTER_LEASE.replace(
      "this.#setLease(id, lease);",
      "this.#setLease(id, lease && { ...lease, expiresAt: lease.expiresAt - 500 });",
    ),
  },
  "uses the claim of a dead letter another's lease refuses": {
    file: "memory.ts",
    find:
      "      const lease = options.lease\n        ? leaseAfter(id, this.#leases.get(id) ?? null, options.lease)\n        : undefined;\n      if (options.claim) this.#checkClaim(options.claim);",
    replace:
      "      if (options.claim) {\n        this.#checkClaim(options.claim);\n        this.#claim(options.claim);\n      }\n      const lease = options.lease\n        ? leaseAfter(id, this.#leases.get(id) ?? null, options.lease)\n        : undefined;",
  },
  "refuses a write by its last unlessCounted key only": {
    file: "memory.ts",
    find: "for (const key of uncountedKeys(options)) {",
    replace: "for (const key of uncountedKeys(options).slice(-1)) {",
  },
  "keeps counts by a case-insensitive key": keyedBy(
    "#counts",
    "CountRecord",
    "k.toLowerCase()",
  ),
  "keeps counts by a key's first 64 characters": keyedBy(
    "#counts",
    "CountRecord",
    "k.slice(0, 64)",
  ),
  "counts a give-up's givingup/ and gaveup/ marks as one": keyedBy(
    "#counts",
    "CountRecord",
    'k.replace(/^givingup\\//, "gaveup/")',
  ),
  "keeps dead letters by a case-insensitive job id": keyedBy(
    "#deadLetters",
    "StoredDeadLetter",
    "k.toLowerCase()",
  ),
  "keeps intents by a case-insensitive id": keyedBy(
    "#intents",
    "{ record: IntentRecord; version: number }",
    "k.toLowerCase()",
  ),
  "resets every count in a redrive, give-up marks too": {
    file: "memory.ts",
    find: "if (options.keepCount !== true) this.#counts.delete(jobId);",
    replace: "if (options.keepCount !== true) this.#counts.clear();",
  },
  "keeps a dead letter without its queue's dlqId": {
    file: "memory.ts",
    find: "...(queue ? { queue: Object.freeze({ ...queue }) } : {}),",
    replace:
      "...(queue ? { queue: Object.freeze({ queue: queue.queue, messageId: queue.messageId! }) } : {}),",
  },
  "keeps a poison move's dead letter without its queue ids": {
    file: "memory.ts",
    find:
      "    if (deadLetter) this.#putDeadLetter(deadLetter, options.resetCount);",
    replace:
      "    if (deadLetter) {\n      const { queue: _, ...rest } = deadLetter;\n      this.#putDeadLetter(rest, options.resetCount);\n    }",
  },
  "reads a replay record, then writes it, in two steps": {
    file: "memory.ts",
    find:
      '  admit(admission: Admission): Promise<number | null> {\n    return attempt(() => {\n      checkMs("now", admission.now);\n      // Before the claim is written: a refused admission writes nothing.\n      if (admission.ttlMs !== undefined) checkCountTtl(admission.ttlMs);\n      checkCount(admission.count);\n      if (admission.claim) this.#checkClaim(admission.claim);\n      if (admission.claim) this.#claim(admission.claim);',
    replace:
      '  async admit(admission: Admission): Promise<number | null> {\n    checkMs("now", admission.now);\n    if (admission.ttlMs !== undefined) checkCountTtl(admission.ttlMs);\n    checkCount(admission.count);\n    if (admission.claim) this.#checkClaim(admission.claim);\n    await Promise.resolve();\n    return await attempt(() => {\n      if (admission.claim) this.#claim(admission.claim);',
  },
  "forgets in the move to review that an unknown send may have left": {
    file: "_rules.ts",
    find: '    ...(change.to === "settling"\n',
    replace:
      '    ...(change.to === "needs_review"\n      ? { mayHaveSent: current.lastBroadcast?.outcome === "sent" }\n      : {}),\n    ...(change.to === "settling"\n',
  },
  "voids the hold of an authorized intent imported with a send on record": {
    file: "_rules.ts",
    find:
      'if (op === "void" && state === "authorized" && mayHaveMoved(intent)) {',
    replace: 'if (op === "void" && state === "authorized" && !intent) {',
  },
  "takes an import told nothing may have left beside a send on record": {
    file: "_rules.ts",
    find: "  if (told !== false) return;",
    replace: "  return;",
  },
  "takes a created intent imported with a send that may have left": {
    file: "_rules.ts",
    find: '    state === "created" &&\n    (record.mayHaveSent',
    replace: "    false &&\n    (record.mayHaveSent",
  },
  "creates an intent with a misspelt field left at its default": {
    file: "_rules.ts",
    find: "  checkNewIntentFields(intent);\n",
    replace: "",
  },
  "releases a lease another owner holds": {
    file: "memory.ts",
    find: "if (this.#leases.get(intentId)?.owner === owner) {",
    replace: "if (this.#leases.has(intentId)) {",
  },
  "releases a lease and leaves the intent's version": {
    file: "memory.ts",
    find: "        if (entry) this.#write(intentId, entry.record);",
    replace: "        void entry;",
  },
  "ignores a dead letter's marks": {
    file: "memory.ts",
    find: "for (const key of keys) this.#count(key, marks!.now, marks!.ttlMs);",
    replace: "void keys;",
  },
  "counts a dead letter's marks before a refusal of the letter": {
    file: "memory.ts",
    find:
      "      const keys = markKeys(marks, deadLetter, options.resetCount);\n",
    replace:
      "      const keys = markKeys(marks, deadLetter, options.resetCount);\n      for (const key of keys) this.#count(key, marks!.now, marks!.ttlMs);\n",
  },
};

/** `MemoryStore` with `mutant` applied, from a copy of `store/` in `dir`. */
async function mutated(dir: string, mutant: Mutant): Promise<() => Store> {
  const store = new URL("../../store/", import.meta.url);
  for (const file of ["memory.ts", "_rules.ts", "_sweep.ts", "store.ts"]) {
    let text = await Deno.readTextFile(new URL(file, store));
    if (file === mutant.file) {
      assert.ok(
        text.includes(mutant.find),
        `the mutant no longer applies to store/${file}: update its 'find'`,
      );
      text = text.replace(mutant.find, mutant.replace);
    }
    // Everything else from the real store/: the same errors and table.
    text = text.replaceAll(
      /from "\.\/((?:busy|conflict|replay)_error|transitions)\.ts"/g,
      (_, name) => `from "${new URL(`${name}.ts`, store).href}"`,
    );
    // And what they import from outside store/ (the policy's checks).
    text = text.replaceAll(
      /from "(\.\.\/[^"]+)"/g,
      (_, path) => `from "${new URL(path, store).href}"`,
    );
    await Deno.writeTextFile(`${dir}/${file}`, text);
  }
  const module = await import(`file://${dir}/memory.ts`);
  return () => new module.MemoryStore() as Store;
}

Deno.test("the store contract fails a MemoryStore that breaks any one rule the relayer relies on", async (t) => {
  assert.deepEqual(await failing(() => new MemoryStore()), []);
  for (const [name, mutant] of Object.entries(MUTANTS)) {
    await t.step(name, async () => {
      const dir = await Deno.makeTempDir({ prefix: "contract_mutant_" });
      try {
        const failed = await failing(await mutated(dir, mutant));
        assert.ok(
          failed.length > 0,
          `the contract passes a store that ${name}`,
        );
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    });
  }
});

Deno.test("the store contract passes a store whose errors come from another copy of the package", async () => {
  // Each error MemoryStore throws, thrown again as the other copy's.
  const translate = (error: unknown): never => {
    if (error instanceof ConflictError) {
      throw new other.ConflictError(error.message, { refused: error.refused });
    }
    if (error instanceof BusyError) throw new other.BusyError(error.message);
    if (error instanceof ReplayError) {
      throw new other.ReplayError(error.message);
    }
    throw error;
  };
  const make = (): Store => {
    const inner = new MemoryStore();
    return new Proxy(inner, {
      get: (target, key) => {
        const value = Reflect.get(target, key, target);
        return typeof value === "function"
          ? (...args: unknown[]) =>
            (value as (...a: unknown[]) => Promise<unknown>)
              .apply(target, args).catch(translate)
          : value;
      },
    });
  };
  assert.deepEqual(await failing(make), []);
});
