/**
 * A suite's skip line is said once per run through a variable of the
 * run's environment (tests/_skip_said.ts), which the service, started by
 * a tool with that environment, must not name as a misspelt setting.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  unknownSettingLines,
  unreadSettingLines,
} from "../webhook/_settings.ts";
import { skipSaid } from "./_skip_said.ts";

Deno.test("a skip line's variable, set in the run's environment, is one the service started with that environment does not name", () => {
  for (
    const suites of [
      "the PostgresStore suites",
      "the PgBouncer suites",
      "the full-disk suites",
    ]
  ) {
    const name = skipSaid(suites);
    assert.deepEqual(unknownSettingLines([name]), [], name);
    assert.deepEqual(unreadSettingLines({ [name]: "1" }), [], name);
  }
});
