/**
 * `main.ts` names the arguments it was given, which it never reads: `deno
 * task start --port 8001` passes `--port 8001` to `main.ts`, not to `deno
 * serve`, and the service served on 8000 with nothing said. A flag is named
 * up to its `=`; a value, which may be a secret, is only counted.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ignoredArgumentsLine, ignoredPortLine } from "../main.ts";
import { startMain } from "./_main_process.ts";
import { memoryKvConnect } from "./_memory_kv_connect.ts";
import { timeout } from "./_timeout.ts";

const TAIL =
  ": deno task start passes what follows it to main.ts, not to deno serve, and always serves on 127.0.0.1:8000. The settings are environment variables (docs/routes.md#deploy-to-deno-deploy-with-qstash); another port or host is deno serve's: deno serve --host 127.0.0.1 --port 8001 --allow-net --allow-env --allow-read --allow-write=./data main.ts";

Deno.test("ignoredArgumentsLine() names each flag up to its '=', counts the other arguments, and says what to run instead", () => {
  assert.equal(ignoredArgumentsLine([]), undefined);
  assert.equal(
    ignoredArgumentsLine(["--port", "8001"]),
    `relayer: main.ts reads no arguments, so --port and 1 other argument (not shown) are ignored${TAIL}`,
  );
  assert.equal(
    ignoredArgumentsLine(["--host=0.0.0.0"]),
    `relayer: main.ts reads no arguments, so --host is ignored${TAIL}`,
  );
  const line = ignoredArgumentsLine([
    "-p",
    "--token=hunter2-secret",
    "hunter3-secret",
    "x",
  ])!;
  assert.equal(
    line,
    `relayer: main.ts reads no arguments, so -p, --token and 2 other arguments (not shown) are ignored${TAIL}`,
  );
  assert.doesNotMatch(line, /hunter/);
});

Deno.test("ignoredArgumentsLine() names no argument that may be a secret: a short flag with its value attached, or a token that starts with a dash", () => {
  // psql's and mysql's -p<password> habit, and base64url tokens, 1 in 64
  // of which starts with '-' (openssl rand -base64 32 | tr '+/' '-_').
  const secrets = [
    "-pHunter2Secret",
    // A password of letters only: the whole argument, not a run of flags.
    "-pHuntersecret",
    "-Wk3jQ9aZ-bc7Rt2Lx0",
    "--Zk3Jq9aZ-Bc7Rt2Lx0",
    "-x7Tq-9LmZ=",
  ];
  const line = ignoredArgumentsLine(["--port", "-A", ...secrets])!;
  assert.equal(
    line,
    `relayer: main.ts reads no arguments, so --port, -A and 5 other arguments (not shown) are ignored${TAIL}`,
  );
  for (const secret of secrets) {
    assert.ok(!line.includes(secret.slice(2, 8)), `${secret} in ${line}`);
  }
});

Deno.test(
  "main.ts given arguments names them after its start line, and serves",
  timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_args_" });
    const service = startMain({
      SENDER_URL: "http://127.0.0.1:9/",
      WEBHOOK_SECRET: "start-secret-0123456789abcdef",
      KV_PATH: `${dir}/relayer.kv`,
    }, { writeDir: dir, args: ["--port", "8123", "--token=hunter2-secret"] });
    try {
      assert.notEqual(await service.base(), null, "it did not serve");
      service.child.kill("SIGTERM");
      const { code, stdout, stderr } = await service.ended();
      assert.equal(code, 0, `${stdout}\n${stderr}`);
      const lines = stdout.trim().split("\n");
      assert.match(lines[0]!, /^relayer: at most 10 deliveries; /);
      assert.equal(
        lines[1],
        `relayer: main.ts reads no arguments, so --port, --token and 1 other argument (not shown) are ignored${TAIL}`,
      );
      assert.doesNotMatch(stdout + stderr, /hunter2|8123/);
    } finally {
      service.kill();
      await service.ended().catch(() => {});
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test("ignoredArgumentsLine() names a flag of at most 40 characters up to its '=', and only counts a longer one or an argument that is not a flag's shape (a value, which may be a secret)", () => {
  const long = `--${"a".repeat(60)}`;
  const forty = `--${"b".repeat(38)}`;
  const line = ignoredArgumentsLine([
    "--port=8001",
    `${long}=value`,
    `${forty}=value`,
    `--${"c".repeat(39)}`,
    "-p@ssw0rd",
    "--to:ken",
  ])!;
  assert.match(
    line,
    new RegExp(
      `^relayer: main\\.ts reads no arguments, so --port, ${forty} and 4 other arguments \\(not shown\\) are ignored: `,
    ),
  );
  assert.ok(!line.includes("ccc"), line);
  assert.ok(
    !line.includes("aaaa") && !line.includes("ssw0rd") &&
      !line.includes("ken"),
    line,
  );
});

Deno.test("ignoredPortLine() reads a PORT as the port number it names: 08000 is the 8000 it listens on, 08001 is not", () => {
  assert.equal(ignoredPortLine("08000", 8000), undefined);
  assert.equal(ignoredPortLine("0", 0), undefined);
  // Not set: nothing said (set empty, the test below).
  assert.equal(ignoredPortLine(undefined, 8000), undefined);
  assert.match(ignoredPortLine("08001", 8000)!, /^relayer: PORT is 08001, /);
  // Not a port number, whatever it holds: named, never taken for one.
  assert.match(ignoredPortLine("8000 ", 8000)!, /^relayer: PORT is set, /);
  assert.match(ignoredPortLine("8e3", 8000)!, /^relayer: PORT is set, /);
});

Deno.test("ignoredPortLine() says nothing of a PORT set empty, shows a PORT only when it is a port number, and names 8001 in the command where it is not", () => {
  // An .env's `PORT=` is a PORT unset, as loadConfig reads an empty setting.
  assert.equal(ignoredPortLine("", 8000), undefined);
  assert.equal(ignoredPortLine("8000", 8000), undefined);
  const tail =
    "but main.ts does not read it: it listens where deno serve's --port says, 8000 here (deno task start always serves on 127.0.0.1:8000); another port is deno serve's: deno serve --host 127.0.0.1 --port";
  // Digits inside a value are not a port: the value is not shown.
  for (const port of ["tcp://10.0.0.7:8001", "123456", "s3cret-8001"]) {
    assert.equal(
      ignoredPortLine(port, 8000),
      `relayer: PORT is set, ${tail} 8001 --allow-net --allow-env --allow-read --allow-write=./data main.ts`,
    );
  }
  assert.equal(
    ignoredPortLine("9090", 8000),
    `relayer: PORT is 9090, ${tail} 9090 --allow-net --allow-env --allow-read --allow-write=./data main.ts`,
  );
});

Deno.test(
  "main.ts with a PORT it does not listen on says so after its start line, and where another port is set; not with the PORT it listens on",
  timeout(30_000, async () => {
    // `deno task signer` and `qstash-local` take PORT: `PORT=8001 deno task
    // start` served on 8000 with nothing said.
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_port_" });
    const env = {
      SENDER_URL: "http://127.0.0.1:9/",
      WEBHOOK_SECRET: "start-secret-0123456789abcdef",
      KV_PATH: `${dir}/relayer.kv`,
    };
    const run = async (port: string, listenPort = 0) => {
      const service = startMain({ ...env, PORT: port }, {
        writeDir: dir,
        port: listenPort,
      });
      try {
        const base = await service.base();
        assert.notEqual(base, null, "it did not serve");
        service.child.kill("SIGTERM");
        const { code, stdout, stderr } = await service.ended();
        assert.equal(code, 0, `${stdout}\n${stderr}`);
        return { lines: stdout.trim().split("\n"), port: new URL(base!).port };
      } finally {
        service.kill();
        await service.ended().catch(() => {});
      }
    };
    try {
      const { lines, port } = await run("8001");
      assert.match(lines[1]!, /^relayer: listening on /);
      assert.equal(
        lines[2],
        `relayer: PORT is 8001, but main.ts does not read it: it listens where deno serve's --port says, ${port} here (deno task start always serves on 127.0.0.1:8000); another port is deno serve's: deno serve --host 127.0.0.1 --port 8001 --allow-net --allow-env --allow-read --allow-write=./data main.ts`,
      );
      // Not a port: named, its value not shown.
      const odd = await run("http://x");
      assert.match(
        odd.lines[2]!,
        /^relayer: PORT is set, but main\.ts does not read it: it listens where deno serve's --port says, \d+ here /,
      );
      assert.doesNotMatch(odd.lines.join("\n"), /http:\/\/x/);
      // The port it listens on (a platform's PORT passed to --port): nothing.
      const free = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const freePort = (free.addr as Deno.NetAddr).port;
      free.close();
      const same = await run(String(freePort), freePort);
      assert.equal(same.port, String(freePort));
      assert.doesNotMatch(same.lines.join("\n"), /PORT/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test(
  "main.ts on Deno Deploy (DENO_DEPLOYMENT_ID) says nothing of a PORT it does not listen on: the platform's, not one a user set",
  timeout(30_000, async () => {
    // As Deploy attaches a Deno KV database: its URL and token.
    const database = memoryKvConnect();
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_port_" });
    const service = startMain({
      SENDER_URL: "http://127.0.0.1:9/",
      WEBHOOK_SECRET: "start-secret-0123456789abcdef",
      DENO_DEPLOYMENT_ID: "test-deployment",
      DENO_KV_DEFAULT_PATH: `http://127.0.0.1:${database.addr.port}/kv`,
      DENO_KV_ACCESS_TOKEN: "deploy-token-0123456789",
      PORT: "8001",
    }, { writeDir: dir });
    try {
      const base = await service.base();
      assert.notEqual(base, null, "it did not serve");
      assert.notEqual(new URL(base!).port, "8001");
      service.child.kill("SIGTERM");
      const { code, stdout, stderr } = await service.ended();
      assert.equal(code, 0, `${stdout}\n${stderr}`);
      const lines = stdout.trim().split("\n");
      assert.match(lines[1]!, /^relayer: listening on /);
      assert.doesNotMatch(stdout, /PORT/);
    } finally {
      service.kill();
      await service.ended().catch(() => {});
      await database.shutdown();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
