import assert from "node:assert/strict";
import { loadConfig } from "../../webhook/app.ts";

// loadConfig(process.env) on a runtime where the environment is not an
// object (a Worker's `env` not passed on, a bundler that strips
// `process`) threw "Reflect.get called on non-object".

Deno.test("loadConfig() says its argument must be the environment as an object", () => {
  for (const variables of [undefined, null, "WEBHOOK_SECRET=x"]) {
    assert.throws(
      () => loadConfig(variables as never),
      (error) =>
        error instanceof TypeError &&
        /^Cannot load the configuration as its variables must be an object, such as process\.env, Deno\.env\.toObject\(\) or a Worker's env: current value is /
          .test(error.message),
      String(variables),
    );
  }
});
