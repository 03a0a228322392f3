/**
 * `deno task signer`, the stand-in signer: a bad `PORT` is one line and
 * exit 1, and the line it prints names the port it listens on. In process,
 * through `HttpSender`: its answers are the protocol's, safe to copy.
 */
import assert from "node:assert/strict";
import { HttpSender, type Intent, isNotSent, isPoison } from "../../mod.ts";
import { signer } from "../../examples/signer_stub.ts";
import { baseEnv } from "../_main_process.ts";

const STUB = new URL("../../examples/signer_stub.ts", import.meta.url).pathname;

/**
 * The stub as `deno task signer` runs it, with `PORT` and what follows the
 * task's name; killed after its first line.
 */
async function run(
  port: string,
  args: string[] = [],
): Promise<{ code: number; out: string }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-net=127.0.0.1", "--allow-env=PORT", STUB, ...args],
    clearEnv: true,
    env: { ...baseEnv(), PORT: port },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const first = await reader.read();
  if (!first.done) child.kill("SIGTERM");
  reader.releaseLock();
  await child.stdout.cancel().catch(() => {});
  const err = await new Response(child.stderr).text();
  const { code } = await child.status;
  return { code, out: (first.value ?? "") + err };
}

Deno.test("the signer stub refuses a PORT that is not a port in one line, and says the port it got", async () => {
  for (const port of ["abc", "70000", "8e3"]) {
    const { code, out } = await run(port);
    assert.equal(code, 1, port);
    assert.equal(
      out,
      `signer stub: PORT must be a port number, 0-65535: current value is ${
        JSON.stringify(port)
      }\n`,
    );
  }
  // PORT=0: the system picks one, and the line names it (not 0).
  const { out } = await run("0");
  assert.match(out, /^signer stub on http:\/\/127\.0\.0\.1:(?!0\b)\d+\n$/);
});

Deno.test("the signer stub refuses arguments in one line that says PORT sets its port, and shows none of them", async () => {
  // `deno task signer --port 9001` passes `--port 9001` to the stub, which
  // served on 9000 with nothing said.
  for (
    const [args, count] of [
      [["--port", "9001"], "2 arguments"],
      [["--port=9001"], "1 argument"],
    ] as const
  ) {
    const { code, out } = await run("", [...args]);
    assert.equal(code, 2, args.join(" "));
    assert.equal(
      out,
      `signer stub: it reads no arguments, so it refuses the ${count} given (not shown): its port is PORT's, 9000 unless set (PORT=9001 deno task signer)\n`,
    );
  }
});

/** `HttpSender` over the stub's handler, in process. */
function stubSender(): HttpSender {
  return new HttpSender({
    url: "http://signer.test",
    fetch: (input, init) =>
      Promise.resolve(signer(new Request(input as string, init))),
  });
}

function intentOf(id: string): Intent {
  return {
    id,
    state: "settling",
    hold: "pending",
    version: "1",
    settlingSince: 0,
    lastBroadcast: null,
    txHashes: [],
    broadcasting: null,
    mayHaveSent: false,
  } as unknown as Intent;
}

Deno.test("the signer stub answers every send of an intent with its one tx, first, late or rescue: at most one tx of a payment, as a signer that keeps the nonce per intent", async () => {
  const sender = stubSender();
  const intent = intentOf("pi_stub_1");
  const first = await sender.send(intent, { replace: false });
  assert.deepEqual(await sender.send(intent, { replace: false }), first);
  assert.deepEqual(await sender.send(intent, { replace: true }), first);
  assert.equal(await sender.receipt(first.txHash), "pending");
  assert.equal(await sender.receipt(first.txHash), "confirmed");
});

Deno.test("the signer stub says notSent only of an intent it never signs, and a 502 is maybe sent", async () => {
  const sender = stubSender();
  for (const replace of [false, true]) {
    await assert.rejects(
      sender.send(intentOf("pi_stub_notsent"), { replace }),
      (error: Error) => isNotSent(error) && isPoison(error),
    );
    await assert.rejects(
      sender.send(intentOf("pi_stub_timeout"), { replace }),
      (error: Error) => !isNotSent(error) && !isPoison(error),
    );
  }
});

Deno.test("the signer stub refuses a send it cannot read before signing: 400, notSent (not poison: a signer deployed anew may read it)", async () => {
  for (const body of ["{", "null", "{}", '{"intentId":7}', '{"intentId":""}']) {
    const answer = await signer(
      new Request("http://signer.test/send", { method: "POST", body }),
    );
    assert.equal(answer.status, 400, body);
    const json = await answer.json();
    assert.equal(json.notSent, true, body);
    assert.equal(json.poison, undefined, body);
    assert.equal(typeof json.error, "string", body);
  }
});

Deno.test("the signer stub answers dropped for a tx it never signed, as the protocol asks of a tx the node does not know, where it read pending then confirmed for any hash", async () => {
  const sender = stubSender();
  // A hash mistyped into the runbook's `curl "$SENDER_URL/receipt/<txHash>"`,
  // or one an imported intent carries that no send of this signer made:
  // confirmed, it would have the payment settled and its hold captured
  // with no tx on the chain.
  for (const txHash of ["0xnope", "0x0123456789abcdef"]) {
    assert.equal(await sender.receipt(txHash), "dropped", txHash);
    assert.equal(await sender.receipt(txHash), "dropped", txHash);
  }
  // A `_pending` hash stays pending, signed here or not (the benches seed
  // intents settling on one).
  assert.equal(await sender.receipt("0xpi_r_1_pending"), "pending");
  // A rescue of an intent whose tx this signer forgot (a restart) signs
  // the same tx again, which then reads as any.
  const { txHash } = await sender.send(intentOf("pi_stub_2"), {
    replace: true,
  });
  assert.equal(await sender.receipt(txHash), "pending");
  assert.equal(await sender.receipt(txHash), "confirmed");
});
