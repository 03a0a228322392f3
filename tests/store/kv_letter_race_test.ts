/**
 * Generated races of one job's dead letters on KvStore: written (with and
 * without a claim, on the intent's version, with marks) and redriven by
 * three instances on one KV, whose commits a KV Connect client may send
 * again after a lost answer, and whose redrive record, left by a redrive
 * a day before, may expire between any two steps. Every answer must be
 * true (a letter answered as landed landed; one answered as a race lost
 * never landed, or another letter replaced it, as if it had lost), no
 * letter may land twice, and once the races are over a letter lands.
 *
 * Each call to the KV starts and ends when `fc.scheduler()` says, one at a
 * time, so a failure's seed and path replay it.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { ConflictError, type DeadLetter } from "../../mod.ts";
import { type KvAtomic, type KvLike, KvStore } from "../../store/kv.ts";
import { catchesAsync, runs } from "../_fc.ts";

const JOB = "pi_1/settle";

/** One actor of a race. */
type Step =
  | {
    readonly kind: "put";
    readonly instance: number;
    readonly with: "nothing" | "claim" | "version" | "marks";
  }
  | { readonly kind: "redrive"; readonly instance: number }
  /** The job's redrive record expires (Deno KV deletes it). */
  | { readonly kind: "expire" };

const anyStep: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("put" as const),
      instance: fc.nat(2),
      with: fc.constantFrom(
        "nothing" as const,
        "claim" as const,
        "version" as const,
        "marks" as const,
      ),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("redrive" as const),
      instance: fc.nat(2),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "expire" as const }) },
);

/** What landed on the dead letter's key, by versionstamp. */
interface Landed {
  readonly versionstamp: string;
  /** The letter's reason, or `null` for a redrive's removal. */
  readonly reason: string | null;
}

/**
 * `kv`, each call made when the scheduler says and answered before the
 * next; a commit that landed is sent again, as a KV Connect client does
 * after a lost answer, when `lose()` says, and answered as that second
 * commit is. Every commit that landed on the dead letter's key is added
 * to `landed`. With `careless`, the store behind it is the one before
 * the redrive record kept taken letters: a check of the record is dropped,
 * and the record is written without the letters it took.
 */
function connectKv(
  kv: Deno.Kv,
  s: fc.Scheduler,
  lose: () => boolean,
  landed: Landed[],
  careless: boolean,
): KvLike {
  const step = <T>(label: string, call: () => Promise<T>): Promise<T> =>
    // Started when triggered, so each call runs alone.
    s.schedule(
      { then: (ok, fail) => call().then(ok, fail) } as Promise<T>,
      label,
    );
  return {
    getMany: (keys) => step("read", () => kv.getMany(keys)),
    list: (selector, options) => kv.list(selector, options),
    atomic(): KvAtomic {
      const atomic = kv.atomic();
      let letter: string | null | undefined;
      const set = atomic.set.bind(atomic);
      atomic.set = (key, value, options) => {
        if (key[1] === "dead") letter = (value as DeadLetter).reason;
        if (careless && key[1] === "redriven") {
          const { took: _, ...rest } = value as { took?: unknown };
          return set(key, rest, options);
        }
        return set(key, value, options);
      };
      const check = atomic.check.bind(atomic);
      atomic.check = (...checks) =>
        check(
          ...checks.filter((c) => !careless || c.key[1] !== "redriven"),
        );
      const remove = atomic.delete.bind(atomic);
      atomic.delete = (key) => {
        if (key[1] === "dead") letter = null;
        return remove(key);
      };
      const commit = atomic.commit.bind(atomic);
      const note = (result: Deno.KvCommitResult | Deno.KvCommitError) => {
        if (result.ok && letter !== undefined) {
          landed.push({ versionstamp: result.versionstamp, reason: letter });
        }
        return result;
      };
      atomic.commit = async () => {
        const first = note(await step("commit", commit));
        if (!first.ok || !lose()) return first;
        return note(await step("commit sent again", commit));
      };
      return atomic;
    },
  } as KvLike;
}

function letterRace(careless = false) {
  return fc.asyncProperty(
    fc.array(anyStep, { minLength: 2, maxLength: 16 }),
    fc.infiniteStream(fc.boolean()),
    fc.boolean(),
    fc.scheduler(),
    async (steps, losses, redrivenBefore, s) => {
      using kv = await Deno.openKv(":memory:");
      await new KvStore(kv).createIntent({ id: "pi_1" });
      // A redrive of the job a day ago may have left its record.
      let before: Deno.KvEntryMaybe<unknown> | null = null;
      if (redrivenBefore) {
        const key = ["relayer", "redriven", JOB];
        await kv.set(key, { w: "0.1", took: ["0.0"] });
        before = await kv.get(key);
      }
      const landed: Landed[] = [];
      let losing = true;
      const lossy = connectKv(
        kv,
        s,
        () => losing && losses.next().value,
        landed,
        careless,
      );
      const stores = [0, 1, 2].map(() => new KvStore(lossy));
      const answers: { reason: string; landed: boolean }[] = [];
      const act = async (step: Step, i: number) => {
        if (step.kind === "expire") {
          // Only a record from before the race: one a redrive writes
          // lives a day.
          if (before === null) return;
          await s.schedule(
            {
              then: (ok, fail) =>
                kv.atomic().check(before).delete(before.key).commit().then(
                  ok,
                  fail,
                ),
            } as Promise<unknown>,
            "expire",
          );
          return;
        }
        const store = stores[step.instance]!;
        if (step.kind === "redrive") {
          const read = await store.getDeadLetter(JOB);
          if (read === null) return;
          await store.redrive(JOB, read.version).catch((error) => {
            if (!(error instanceof ConflictError)) throw error;
          });
          return;
        }
        const reason = `letter ${i} (${step.with})`;
        const options = step.with === "claim"
          ? { claim: { key: `claim ${i}`, now: 0, expiresAt: 60_000 } }
          : step.with === "version"
          ? { intentVersion: (await store.getIntent("pi_1"))!.version }
          : step.with === "marks"
          ? { marks: { keys: [`qstash/m${i % 2}`], now: 0 } }
          : {};
        try {
          await store.putDeadLetter({
            jobId: JOB,
            intentId: "pi_1",
            deliveries: 1,
            cause: "declared",
            reason,
            resolution: "job dropped, intent still created",
            lastError: "",
            poisonedAt: i,
          }, options);
          answers.push({ reason, landed: true });
        } catch (error) {
          if (!(error instanceof ConflictError)) throw error;
          answers.push({ reason, landed: false });
        }
      };
      await s.waitFor(Promise.all(steps.map(act)));
      const order = landed.toSorted((a, b) =>
        a.versionstamp < b.versionstamp ? -1 : 1
      );
      const trail = `${
        order.map((l) => l.reason ?? "(redriven)").join(" → ")
      }\n${String(s)}`;
      for (const answer of answers) {
        const at = order.flatMap((l, i) =>
          l.reason === answer.reason ? [i] : []
        );
        assert.ok(at.length <= 1, `${answer.reason} landed twice: ${trail}`);
        if (answer.landed) {
          assert.equal(
            at.length,
            1,
            `${answer.reason} answered as landed: ${trail}`,
          );
        } else if (at.length === 1) {
          // Landed, then replaced by another letter: as if it lost.
          const next = order[at[0]! + 1];
          assert.ok(
            next !== undefined && next.reason !== null,
            `${answer.reason} answered as a race lost, ${
              next === undefined ? "kept" : "then redriven"
            }: ${trail}`,
          );
        }
      }
      // Once the races are over, a letter lands.
      losing = false;
      const last = await s.waitFor(
        stores[0]!.putDeadLetter({
          jobId: JOB,
          intentId: "pi_1",
          deliveries: 1,
          cause: "declared",
          reason: "last",
          resolution: "job dropped, intent still created",
          lastError: "",
          poisonedAt: 99,
        }).then(() => stores[1]!.getDeadLetter(JOB)),
      );
      assert.equal(last?.reason, "last");
    },
  );
}

Deno.test("KvStore: a job's dead letters written and redriven by three instances, each commit maybe sent again after a lost answer and an old redrive record expiring at any step, are answered truly, none lands twice, and a letter lands once the races are over", async () => {
  await fc.assert(letterRace(), { numRuns: runs(300) });
});

Deno.test("the letter race catches a KvStore whose redrive record neither keeps the letters it took nor is checked by a letter written without a claim", async () => {
  assert.equal(await catchesAsync(letterRace(true), 1000), true);
});
