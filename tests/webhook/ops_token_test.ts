/**
 * `createApp`'s `opsToken` is matched against what an `Authorization`
 * header carries. A header loses the spaces and line breaks at its ends
 * and carries bytes, not text: a token read from a file with its line
 * break, or one outside printable ASCII, matches no call, and every ops
 * call would be refused with nothing to say why. Refused at construction,
 * as the service refuses such an `OPS_TOKEN` at its start, and never
 * echoed.
 *
 * @module
 */

import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import { MemoryStore, ScriptedSender } from "../../mod.ts";

const build = (opsToken: string) =>
  createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    opsToken,
  });

Deno.test("createApp() refuses an opsToken no Authorization header can carry, naming it without echoing it", () => {
  for (
    const token of [
      "ops-token-0123456789\n", // read from a file
      " ops-token-0123456789",
      "ops-token-0123456789 ",
      "ops-token-0123456789\t",
      "ops-t\u00f6ken-0123456789",
      "ops-token\r\n-0123456789",
      "ops-token-0123456789\x7f", // DEL: no header value takes it
      "ops-token\x7f-0123456789",
    ]
  ) {
    assert.throws(
      () => build(token),
      (error: Error) => {
        assert.ok(error instanceof TypeError, String(error));
        assert.match(
          error.message,
          /^Cannot create app as 'opsToken' is not what an Authorization header carries/,
        );
        assert.ok(!error.message.includes("0123456789"), error.message);
        return true;
      },
      JSON.stringify(token),
    );
  }
});

Deno.test("createApp() takes an opsToken of printable ASCII, with a space inside, and opens the ops routes to it", async () => {
  for (
    const token of [
      "ops-token-0123456789",
      "ops token:0123456789!",
      "AbC+/=._~-0123456789==",
    ]
  ) {
    const app = build(token);
    const res = await app.request("/v1/dead-letters", {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(res.status, 200, token);
    await res.body?.cancel();
  }
});
