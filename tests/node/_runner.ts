/**
 * The test runner of the runtime this bundle runs on, in the shape the
 * store contract takes (`tests/store/_contract.ts`'s `RegisterTest`):
 * `node:test` under `node --test`, `bun:test` under `bun test`. Nothing
 * here sets a global `Deno`, so a store that needs one fails on Node and
 * Bun as it would in production.
 *
 * @module
 */

import process from "node:process";
import * as nodeTest from "node:test";
import type { RegisterTest, StepContext } from "../store/_contract.ts";

/** Registers tests, and a hook run after all of them. */
export interface Runner {
  /** `node:test` or `bun:test`. */
  readonly name: string;
  /** Registers one test, as `Deno.test({ name, ignore }, fn)` does. */
  readonly test: RegisterTest;
  /** Runs `fn` after every test of the file. */
  readonly after: (fn: () => unknown) => void;
}

/** What this uses of `bun:test`. */
interface BunTest {
  test: ((name: string, fn: () => Promise<void>, timeoutMs: number) => void) & {
    skip(name: string, fn: () => Promise<void>): void;
  };
  afterAll(fn: () => unknown): void;
}

/**
 * How long one test may run, on either runner: a contract test may hold
 * several store calls on a real server (Bun's default of 5 s per test is
 * for unit tests), and a test that never ends fails by its name instead of
 * holding the file's run until its deadline (Node's runner has no bound
 * of its own).
 */
export const TEST_TIMEOUT_MS = 60_000;

/** `node:test`: a step is a subtest. */
function fromNode(): Runner {
  const { test, after } = nodeTest;
  return {
    name: "node:test",
    test: ({ name, ignore }, fn) =>
      void test(
        name,
        { skip: ignore, timeout: TEST_TIMEOUT_MS },
        (t) => fn({ step: (step, body) => t.test(step, () => body()) }),
      ),
    after: (fn) => after(async () => void await fn()),
  };
}

/** `bun:test`, which has no subtests: a step runs in its test and names itself when it fails. */
function fromBun({ test, afterAll }: BunTest): Runner {
  const context: StepContext = {
    step: async (step, body) => {
      try {
        await body();
      } catch (error) {
        throw new Error(`step "${step}" failed: ${(error as Error).message}`, {
          cause: error,
        });
      }
    },
  };
  return {
    name: "bun:test",
    test: ({ name, ignore }, fn) =>
      ignore
        ? test.skip(name, () => fn(context))
        : test(name, () => fn(context), TEST_TIMEOUT_MS),
    after: afterAll,
  };
}

/** The runner of the runtime running this file. */
export async function runner(): Promise<Runner> {
  if (process.versions.bun === undefined) return fromNode();
  // Named through a variable, so that neither `deno check` nor the bundler
  // resolves it: Node has no `bun:` scheme, and loads this file too.
  const bunTest = "bun:test";
  return fromBun(await import(bunTest) as BunTest);
}
