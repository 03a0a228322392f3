/**
 * The crash test's `--alternate`: with several instances, the kills take
 * turns among them, and the next kill does not wait for the last victim's
 * restart (its migration), so that a kill can land on one instance while
 * the other is still starting; and CI runs it so.
 *
 * @module
 */

import assert from "node:assert/strict";
import { killVictim, parseOptions } from "../../tools/crash.ts";

const ROOT = new URL("../../", import.meta.url);

Deno.test("parseOptions() takes --alternate with several instances, off unless given, and refuses it with one", () => {
  assert.equal(parseOptions(["--instances", "2"]).alternate, false);
  assert.equal(
    parseOptions(["--instances", "2", "--alternate"]).alternate,
    true,
  );
  assert.throws(
    () => parseOptions(["--alternate"]),
    /--alternate needs --instances 2 or more: current value is 1/,
  );
});

Deno.test("killVictim() takes the instances in turn with --alternate, and draws one by the seed without", () => {
  const turns = [0, 1, 2, 3, 4].map((k) => killVictim(k, 2, true, () => 0.9));
  assert.deepEqual(turns, [0, 1, 0, 1, 0]);
  assert.deepEqual(
    [0, 1, 2].map((k) => killVictim(k, 3, false, () => 0.9)),
    [2, 2, 2],
  );
  assert.equal(killVictim(3, 1, false, () => 0.9), 0);
});

Deno.test(".ci/run runs the crash test with --alternate on several instances of PostgreSQL, so a kill lands while another instance is still starting (its migration running)", async () => {
  const ci = await Deno.readTextFile(new URL(".ci/run", ROOT));
  const runs = ci.split("\n").filter((line) =>
    /^\s*"\$\{DENO\[@\]\}" task crash-test /.test(line)
  );
  assert.ok(runs.length > 0, ".ci/run runs the crash test");
  const alternate = runs.filter((line) => / --alternate\b/.test(line));
  assert.equal(
    alternate.length,
    1,
    `.ci/run's crash runs with --alternate:\n${runs.join("\n")}`,
  );
  const options = parseOptions(
    alternate[0]!.trim().replace(/ \|\| (status|lane)=\$\?$/, "").split(/\s+/)
      .slice(3),
  );
  assert.equal(options.alternate, true);
  assert.equal(options.store, "postgres");
  assert.ok(options.instances >= 2 && options.kills >= 3, alternate[0]);
});
