/**
 * Every JSON body the webhook answers ends in one newline: an operator who
 * reads a route with `curl` (docs/routes.md runs several in a row) got the
 * shell's next prompt, or the next command's answer, glued to the end of
 * the JSON (`…"resolution":"…"}{"intent":…`). JSON allows the whitespace,
 * so a client that parses the body reads the same value.
 */

import assert from "node:assert/strict";
import { makeApp, OPS } from "./_app.ts";
import { genericRequest } from "./_app.ts";
import { deadLetter } from "../store/_contract.ts";

const ops = { authorization: `Bearer ${OPS}` };

Deno.test("the webhook's JSON answers, its ops routes', its deliveries' and its problems', each end in one newline", async () => {
  const { app } = await makeApp();
  const job = JSON.stringify({ job: { intentId: "pi_0001", kind: "settle" } });
  const asks: [string, RequestInit, number][] = [
    ["/healthz", {}, 200],
    ["/readyz", {}, 200],
    ["/v1/intents", {
      method: "POST",
      headers: ops,
      body: JSON.stringify({ id: "pi_0001", state: "authorized" }),
    }, 201],
    ["/v1/intents/pi_0001", { headers: ops }, 200],
    ["/v1/intents/pi_0404", { headers: ops }, 404],
    ["/v1/intents/pi_0001", {}, 401],
    ["/v1/dead-letters", { headers: ops }, 200],
    ["/v1/deliveries", await genericRequest(job), 503],
    ["/v1/nowhere", {}, 404],
    ["/v1/intents", { headers: ops }, 405], // POST only
  ];
  for (const [path, init, status] of asks) {
    const res = await app.request(path, init);
    const text = await res.text();
    assert.equal(res.status, status, `${path}: ${text}`);
    assert.match(res.headers.get("content-type") ?? "", /json/, path);
    assert.ok(text.endsWith("}\n"), `${path}: ${JSON.stringify(text)}`);
    JSON.parse(text); // still JSON
  }
});

Deno.test("a redrive's and a discard's JSON answers end in one newline too", async () => {
  const published: unknown[] = [];
  const { app, store } = await makeApp({
    intents: [
      { id: "pi_0001", state: "created" },
      { id: "pi_0002", state: "failed", hold: "voided" },
    ],
    deps: {
      redriveTo: {
        publish: (job) => Promise.resolve(void published.push(job)),
      },
    },
  });
  await store.putDeadLetter(deadLetter("pi_0001/settle", 1));
  await store.putDeadLetter(deadLetter("pi_0002/settle", 1));
  const asks: [string, string, number][] = [
    ["/v1/dead-letters/pi_0001/settle/redrive", "POST", 202],
    ["/v1/dead-letters/pi_0002/settle", "DELETE", 200],
  ];
  for (const [path, method, status] of asks) {
    const res = await app.request(path, { method, headers: ops });
    const text = await res.text();
    assert.equal(res.status, status, `${path}: ${text}`);
    assert.match(res.headers.get("content-type") ?? "", /json/, path);
    assert.ok(text.endsWith("}\n"), `${path}: ${JSON.stringify(text)}`);
    JSON.parse(text); // still JSON
  }
  assert.equal(published.length, 1);
});
