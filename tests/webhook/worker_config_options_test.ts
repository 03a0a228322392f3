/**
 * `workerConfig` refuses an option it does not read, and a `database` that
 * is not a boolean, as every other entry point of the package refuses
 * its options (docs/api.md): a misspelt `{ databse: true }` or a
 * `{ database: "true" }` from a Worker's settings left the Worker's
 * `DATABASE_URL` unread, its store unchecked, with nothing said at start.
 *
 * @module
 */
import assert from "node:assert/strict";
import { workerConfig } from "../../webhook/app.ts";

const ENV = {
  SENDER_URL: "http://127.0.0.1:9",
  WEBHOOK_SECRET: "a-webhook-secret-16",
  CLOUDFLARE_MAX_RETRIES: "9",
  CLOUDFLARE_DLQ_MAX_RETRIES: "100",
  DATABASE_URL: "postgres://relayer:pw@db.internal:5432/payments",
};

Deno.test("workerConfig refuses an option it does not read, naming the one it reads", () => {
  assert.throws(
    () => workerConfig(ENV, { databse: true } as never),
    {
      name: "TypeError",
      message:
        `Cannot read the Worker's settings as "databse" is not one of its options (database, queues): check its spelling`,
    },
  );
});

Deno.test("workerConfig refuses a database option that is not true or false", () => {
  for (const database of ["true", 1, null]) {
    assert.throws(
      () => workerConfig(ENV, { database } as never),
      (error) =>
        error instanceof TypeError &&
        /^Cannot read the Worker's settings as 'database' must be true or false \(true: the Worker reads DATABASE_URL\): current value is /
          .test(error.message),
      String(database),
    );
  }
});

Deno.test("workerConfig refuses a queues option that is not true or false", () => {
  for (const queues of ["false", 0, null]) {
    assert.throws(
      () => workerConfig(ENV, { queues } as never),
      (error) =>
        error instanceof TypeError &&
        /^Cannot read the Worker's settings as 'queues' must be true or false \(false: the Worker consumes no Cloudflare queue\): current value is /
          .test(error.message),
      String(queues),
    );
  }
});

Deno.test("workerConfig takes its options, or none", () => {
  assert.ok(workerConfig(ENV, { database: true }).config.database);
  assert.equal(
    workerConfig(ENV, { database: false }).config.database,
    undefined,
  );
  assert.equal(workerConfig(ENV, {}).config.database, undefined);
  assert.equal(workerConfig(ENV).config.database, undefined);
});
