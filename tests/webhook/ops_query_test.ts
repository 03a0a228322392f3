/**
 * The ops routes that take no query refuse one (400 `bad-query`), as the
 * routes that take one refuse a parameter they do not know: a parameter
 * dropped unsaid leaves out what the operator meant it to ask for (a
 * redrive sent `?version=`, as a discard takes it, redrove whatever letter
 * was there), and nothing is read, written or queued for it.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Job } from "../../mod.ts";
import { deadLetter } from "../store/_contract.ts";
import { makeApp, OPS } from "./_app.ts";

const ops = { authorization: `Bearer ${OPS}` };

Deno.test("createApp() refuses a query on an ops route that takes none with 400 bad-query, naming the parameter, and acts on none of it", async () => {
  const published: Job[] = [];
  const { app, store, writes } = await makeApp({
    intents: [{ id: "pi_0001", state: "created" }],
    deps: {
      redriveTo: {
        publish: (job: Job) => Promise.resolve(void published.push(job)),
      },
      enqueue: (job: Job) => Promise.resolve(void published.push(job)),
    },
  });
  await store.putDeadLetter(deadLetter("pi_0001/settle", 0));
  const before = writes.length;
  const job = JSON.stringify({ job: { intentId: "pi_0001", kind: "settle" } });
  const cases: [string, RequestInit][] = [
    ["/v1/dead-letters/pi_0001/settle/redrive?version=1", { method: "POST" }],
    ["/v1/dead-letters/pi_0001%2Fsettle/redrive?version=1", { method: "POST" }],
    ["/v1/intents/pi_0001?version=1", { method: "GET" }],
    [
      "/v1/intents/pi_0001/resolve?version=1",
      { method: "POST", body: '{"to":"failed","version":"1"}' },
    ],
    ["/v1/intents?state=authorized", { method: "POST", body: '{"id":"pi_2"}' }],
    ["/v1/jobs?delay=5", { method: "POST", body: job }],
  ];
  for (const [path, init] of cases) {
    const res = await app.request(path, { ...init, headers: ops });
    const problem = await res.json();
    assert.equal(res.status, 400, `${path}: ${JSON.stringify(problem)}`);
    assert.equal(problem.type, "urn:relayer:problem:bad-query", path);
    assert.match(
      problem.detail,
      /^"(version|state|delay)" is not a parameter of this route, which takes none: send it without a query\.$/,
      path,
    );
  }
  assert.deepEqual(published, []);
  assert.equal(writes.length, before);
  assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
  // Without the query, the same calls go ahead.
  const read = await app.request("/v1/intents/pi_0001?", { headers: ops });
  assert.equal(read.status, 200);
  await read.body?.cancel();
  const redrive = await app.request(
    "/v1/dead-letters/pi_0001/settle/redrive",
    { method: "POST", headers: ops },
  );
  assert.equal(redrive.status, 202, await redrive.clone().text());
  await redrive.body?.cancel();
  assert.deepEqual(published, [{ intentId: "pi_0001", kind: "settle" }]);
});
