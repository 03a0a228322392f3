/**
 * The resend probe's verdict (`tools/_resend_probe.ts`): it passes only a
 * send the signer read once, on the receipt's kept-alive connection, that
 * `HttpSender` kept maybe sent; a copy on another connection, a send on a
 * fresh connection (the scenario did not happen) and an outcome read as
 * not sent each fail, saying which.
 *
 * @module
 */

import assert from "node:assert/strict";
import { probeFailure } from "../../tools/_resend_probe.ts";
import type { Probe, Read } from "../../tools/_resend_main.ts";

const BODY = '{"intentId":"pi_0001","replace":false}';
const warm: Read = {
  connection: 1,
  line: "GET /receipt/0xwarm HTTP/1.1",
  framing: "none",
  body: "",
};
const send = (connection: number): Read => ({
  connection,
  line: "POST /send HTTP/1.1",
  framing: "content-length: 38",
  body: BODY,
});
const probe = (read: Read[], outcome: Probe["outcome"]): Probe => ({
  where: "in process",
  receipt: "pending",
  outcome,
  detail: outcome === "maybe sent"
    ? "signer unreachable: other side closed"
    : "signer answered 503: signer is locked: nothing signed",
  read,
});

Deno.test("the resend probe passes a send read once on the kept-alive connection and kept maybe sent", () => {
  assert.equal(probeFailure(probe([warm, send(1)], "maybe sent")), null);
});

Deno.test("the resend probe fails a send the runtime sent again, as Deno's fetch does a string body", () => {
  assert.equal(
    probeFailure(probe([warm, send(1), send(2)], "not sent")),
    "the signer read POST /send 2 times (connections 1, 2): the runtime's fetch sent the send again, and HttpSender read its outcome from the copy",
  );
});

Deno.test("the resend probe fails a run whose send did not ride the receipt's connection, and one whose outcome is not maybe sent", () => {
  assert.equal(
    probeFailure(probe([warm, send(2)], "not sent")),
    "the send did not ride the receipt's kept-alive connection: the scenario did not happen",
  );
  assert.match(
    probeFailure(probe([warm, send(1)], "not sent"))!,
    /^HttpSender reported the send not sent/,
  );
  assert.match(
    probeFailure({ ...probe([], "maybe sent"), receipt: "threw boom" })!,
    /^the receipt before the send was not read/,
  );
});

Deno.test("the resend probe names the caller of fetch, not HttpSender, in a run of the runtime's own fetch with a body form", () => {
  const raw = { ...probe([warm, send(1), send(2)], "not sent") };
  assert.match(
    probeFailure({ ...raw, where: "in process, fetch with a string body" })!,
    /sent the send again, and the caller of fetch read its outcome from the copy$/,
  );
  assert.match(
    probeFailure({ ...raw, where: "workerd, fetch with a bytes body" })!,
    /and the caller of fetch read its outcome/,
  );
});
