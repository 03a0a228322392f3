/**
 * `deno task qstash-local` refuses a `PORT` that is not a port number, and
 * a port another process holds (a local QStash still running), in one line
 * that says what to do, as `deno task signer` does: it stopped on an
 * uncaught `TypeError: Invalid port: NaN` or `AddrInUse`, with a stack
 * trace.
 *
 * @module
 */

import assert from "node:assert/strict";
import { runTool } from "./_run_tool.ts";

const PERMISSIONS = ["--allow-net=127.0.0.1", "--allow-env=PORT"];

Deno.test("qstash-local refuses a PORT that is not a port number, in one line", async () => {
  for (
    const port of ["abc", "8080x", "70000", "65536", "-1", "1e3", "0x50", " 80"]
  ) {
    const { code, stdout, stderr } = await runTool("qstash_local.ts", [], {
      permissions: PERMISSIONS,
      env: { PORT: port, NO_COLOR: "1" },
    });
    assert.equal(code, 1, stderr);
    assert.equal(stdout, "");
    assert.equal(
      stderr,
      `local QStash: PORT must be a port number, 0-65535: current value is ${
        JSON.stringify(port)
      }\n`,
    );
  }
});

Deno.test("qstash-local on a port another process holds says so, in one line", async () => {
  const held = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = held.addr as Deno.NetAddr;
  try {
    const { code, stdout, stderr } = await runTool("qstash_local.ts", [], {
      permissions: PERMISSIONS,
      env: { PORT: String(port), NO_COLOR: "1" },
    });
    assert.equal(code, 1, stderr);
    assert.equal(stdout, "");
    assert.equal(
      stderr,
      `local QStash: port ${port} is in use (another local QStash still running?): stop it, or set PORT to another port\n`,
    );
  } finally {
    held.close();
  }
});

Deno.test("runTool kills a tool still running after its timeout and fails naming it", async () => {
  // A free port: qstash-local listens on it and never exits by itself.
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = probe.addr as Deno.NetAddr;
  probe.close();
  const started = Date.now();
  await assert.rejects(
    runTool("qstash_local.ts", [], {
      permissions: PERMISSIONS,
      env: { PORT: String(port), NO_COLOR: "1" },
      timeoutMs: 1_000,
    }),
    /^Error: tools\/qstash_local\.ts \[\] was still running after 1000 ms and was killed/,
  );
  assert.ok(Date.now() - started < 10_000, "killed well before the default");
});

Deno.test("qstash-local refuses arguments in one line that says PORT sets its port, and shows none of them", async () => {
  // `deno task qstash-local --port 8081` passes `--port 8081` to the tool,
  // which served on 8080 with nothing said.
  for (
    const [args, count] of [
      [["--port", "8081"], "2 arguments"],
      [["--port=8081"], "1 argument"],
    ] as const
  ) {
    const { code, stdout, stderr } = await runTool("qstash_local.ts", [
      ...args,
    ], {
      permissions: PERMISSIONS,
      env: { PORT: "0", NO_COLOR: "1" },
      timeoutMs: 5_000, // a refusal is at once; listening, it would be killed
    });
    assert.equal(code, 2, stderr);
    assert.equal(stdout, "");
    assert.equal(
      stderr,
      `local QStash: it reads no arguments, so it refuses the ${count} given (not shown): its port is PORT's, 8080 unless set (PORT=8081 deno task qstash-local)\n`,
    );
  }
});

Deno.test("qstash-local takes PORT 65535, and an empty PORT as 8080: on a port held, it says that port is in use, not that PORT is no port number", async () => {
  for (const [given, port] of [["65535", 65535], ["", 8080]] as const) {
    // Held here, or already by another process: either way in use.
    let held: Deno.Listener | undefined;
    try {
      held = Deno.listen({ hostname: "127.0.0.1", port });
    } catch (error) {
      if (!(error instanceof Deno.errors.AddrInUse)) throw error;
    }
    try {
      const { code, stdout, stderr } = await runTool("qstash_local.ts", [], {
        permissions: PERMISSIONS,
        env: { PORT: given, NO_COLOR: "1" },
      });
      assert.equal(code, 1, stderr);
      assert.equal(stdout, "");
      assert.equal(
        stderr,
        `local QStash: port ${port} is in use (another local QStash still running?): stop it, or set PORT to another port\n`,
        JSON.stringify(given),
      );
    } finally {
      held?.close();
    }
  }
});

Deno.test("qstash-local takes PORT 0, listening on a free port it names", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--config",
      new URL("../../deno.json", import.meta.url).pathname,
      ...PERMISSIONS,
      new URL("../../tools/qstash_local.ts", import.meta.url).pathname,
    ],
    env: { PORT: "0", NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  try {
    const reader = child.stdout.pipeThrough(new TextDecoderStream())
      .getReader();
    let out = "";
    while (!out.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      out += value;
    }
    await reader.cancel();
    try {
      child.kill("SIGTERM");
    } catch {
      // It ended by itself (a refusal): its stderr says why.
    }
    const stderr = await new Response(child.stderr).text();
    await child.status;
    assert.match(
      out,
      /^local QStash on http:\/\/127\.0\.0\.1:[1-9]\d*[^\d]/,
      stderr,
    );
  } finally {
    clearTimeout(timer);
  }
});
