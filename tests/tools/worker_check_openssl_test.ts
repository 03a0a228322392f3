/**
 * worker-check's TLS step (workerd to PostgreSQL under
 * `sslmode=verify-full`) makes its certificates with `openssl`: a machine
 * without it is told so, naming what to install, before anything runs,
 * and a certificate that could not be made leaves no folder behind.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { runCheck } from "./_runtime_tool.ts";

const TEST_TLS = fileURLToPath(
  new URL("../../support/test_tls.ts", import.meta.url),
);

/** A folder for PATH holding `programs` (linked from this PATH) alone. */
async function pathOf(...programs: string[]): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_path_" });
  for (const program of programs) {
    const { stdout } = await new Deno.Command("sh", {
      args: ["-c", `command -v ${program}`],
      stdout: "piped",
    }).output();
    await Deno.symlink(
      new TextDecoder().decode(stdout).trim(),
      `${dir}/${program}`,
    );
  }
  return dir;
}

Deno.test({
  name:
    "worker-check without openssl on the PATH stops at once in one line naming what to install, and with it goes on",
  ignore: Deno.build.os === "windows",
  fn: async () => {
    const empty = await pathOf();
    const withOpenssl = await pathOf("openssl");
    try {
      // CI=true: the PostgreSQL part, and so its TLS step, must run.
      const without = await runCheck("worker_check.ts", {
        PATH: empty,
        CI: "true",
      });
      assert.equal(without.code, 1);
      assert.equal(without.stdout, "");
      assert.equal(
        without.stderr,
        "worker-check: no openssl on the PATH, and the PostgreSQL part's TLS step (workerd to a server under sslmode=verify-full) makes its certificates with it: install it (Debian's openssl package: apt-get install openssl) and run again\n",
      );
      // With openssl alone, the next requirement is what stops it.
      const next = await runCheck("worker_check.ts", {
        PATH: withOpenssl,
        CI: "true",
      });
      assert.equal(next.code, 1);
      assert.match(next.stderr, /^worker-check: no Node\.js on PATH/);
    } finally {
      await Deno.remove(empty, { recursive: true });
      await Deno.remove(withOpenssl, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "testCertificates() without openssl on the PATH names the package to install and leaves no folder behind",
  ignore: Deno.build.os === "windows",
  fn: async () => {
    const empty = await pathOf();
    const tmp = await Deno.makeTempDir({ prefix: "relayer_tls_tmp_" });
    try {
      const { code, stderr } = await new Deno.Command(Deno.execPath(), {
        args: [
          "eval",
          `import { testCertificates } from ${JSON.stringify(TEST_TLS)};
try { await testCertificates(); } catch (error) { console.error(error.message); Deno.exit(3); }`,
        ],
        env: { PATH: empty, TMPDIR: tmp, NO_COLOR: "1" },
        stdout: "null",
        stderr: "piped",
      }).output();
      assert.equal(code, 3);
      assert.equal(
        new TextDecoder().decode(stderr),
        "Cannot make test certificates: no openssl on the PATH; install Debian's openssl package\n",
      );
      assert.deepEqual(await Array.fromAsync(Deno.readDir(tmp)), []);
    } finally {
      await Deno.remove(empty, { recursive: true });
      await Deno.remove(tmp, { recursive: true });
    }
  },
});
