/**
 * `deno task signer`, the stand-in signer: a bad `PORT` is one line and
 * exit 1, and the line it prints names the port it listens on.
 */
import assert from "node:assert/strict";
import { baseEnv } from "../_main_process.ts";

const STUB = new URL("../../examples/signer_stub.ts", import.meta.url).pathname;

/** The stub as `deno task signer` runs it, with `PORT`; killed after its first line. */
async function run(port: string): Promise<{ code: number; out: string }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-net=127.0.0.1", "--allow-env=PORT", STUB],
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
