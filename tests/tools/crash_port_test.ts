/**
 * The crash test's server process: where it serves. A port the tool found
 * free and handed to the child can be taken by another process before the
 * child binds it (the machine is shared); the tool must then neither fail
 * the run nor talk to that other process as if it were the service.
 *
 * @module
 */

import assert from "node:assert/strict";
import { listeningBase, ServerProcess } from "../../tools/crash.ts";

/** What a child `deno` needs from our environment, and nothing else. */
function childEnv(): Record<string, string> {
  const env: Record<string, string> = { NO_COLOR: "1" };
  for (const name of ["HOME", "PATH", "DENO_DIR", "XDG_CACHE_HOME", "TMPDIR"]) {
    const value = Deno.env.get(name);
    if (value !== undefined) env[name] = value;
  }
  return env;
}

Deno.test("ServerProcess serves where its child bound, not on a port a probe found free that another process took before the child bound it", async () => {
  const root = await Deno.makeTempDir();
  // Another process's server: it answers /healthz too.
  const other = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => new Response("another process"),
  );
  const taken = other.addr.port;
  const listen = Deno.listen;
  const fatal: Error[] = [];
  const server = new ServerProcess(root, root, childEnv(), (error) => {
    fatal.push(error);
  });
  try {
    await Deno.writeTextFile(
      `${root}/main.ts`,
      // As main.ts: it says where it listens.
      `export default {
  onListen(address: Deno.NetAddr) {
    console.log(\`relayer: listening on http://127.0.0.1:\${address.port}/\`);
  },
  fetch: () => new Response("the service"),
};
`,
    );
    // The race lost: a port probed free a moment ago is the other
    // server's by the time the child binds it.
    Object.defineProperty(Deno, "listen", {
      value: () => ({
        addr: { transport: "tcp", hostname: "127.0.0.1", port: taken },
        close() {},
      }),
      configurable: true,
      writable: true,
    });
    try {
      await server.start(performance.now() + 30_000);
    } finally {
      Object.defineProperty(Deno, "listen", {
        value: listen,
        configurable: true,
        writable: true,
      });
    }
    assert.notEqual(new URL(server.base).port, String(taken));
    const res = await fetch(`${server.base}/`);
    assert.equal(await res.text(), "the service");
    assert.deepEqual(fatal, []);
  } finally {
    await server.stop();
    await other.shutdown();
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("listeningBase() reads the address the service, or deno serve, says it listens on, and nothing else", () => {
  assert.equal(
    listeningBase("relayer: listening on http://127.0.0.1:41319/"),
    "http://127.0.0.1:41319",
  );
  assert.equal(
    listeningBase("deno serve: Listening on http://127.0.0.1:36479/"),
    "http://127.0.0.1:36479",
  );
  assert.equal(
    listeningBase(
      "\x1b[32mdeno serve: Listening on http://127.0.0.1:8001/\x1b[39m",
    ),
    "http://127.0.0.1:8001",
  );
  assert.equal(listeningBase("relayer: cannot start: KV_PATH: …"), null);
  assert.equal(listeningBase("Listening on http://127.0.0.1:1/"), null);
});
