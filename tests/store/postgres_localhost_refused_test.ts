/**
 * A service whose `DATABASE_URL` names `localhost` where the hosts file
 * gives it two addresses (`::1` and `127.0.0.1`, as most do), with no
 * server up: `node:net` tries both and fails with one `AggregateError`,
 * whose message is empty. Run in a process of its own, in a mount
 * namespace of its own (`unshare`) where such a hosts file stands at
 * `/etc/hosts`; ignored where the system lets no user make one.
 *
 * @module
 */

import assert from "node:assert/strict";
import { downPort } from "./_down_port.ts";

/** Whether `unshare -rm` runs here (a user and mount namespace of one's own). */
function canUnshare(): boolean {
  try {
    return new Deno.Command("unshare", {
      args: ["-rm", "true"],
      stdout: "null",
      stderr: "null",
    }).outputSync().success;
  } catch {
    return false;
  }
}

Deno.test({
  name:
    "PostgresStore and openService() say nothing listens where every address of localhost refused the connect (node:net's AggregateError), not an empty message",
  ignore: !canUnshare(),
}, async () => {
  const port = await downPort();
  const dir = await Deno.makeTempDir({ prefix: "two_address_hosts_" });
  try {
    const hosts = `${dir}/hosts`;
    await Deno.writeTextFile(hosts, "::1 localhost\n127.0.0.1 localhost\n");
    const { code, stdout, stderr } = await new Deno.Command("unshare", {
      args: [
        "-rm",
        "sh",
        "-c",
        'mount --bind "$0" /etc/hosts && exec "$@"',
        hosts,
        Deno.execPath(),
        "run",
        "--no-check",
        "--allow-read",
        "--allow-env",
        "--allow-net=localhost,127.0.0.1,[::1]",
        `${import.meta.dirname}/_localhost_refusal.ts`,
        String(port),
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(code, 0, new TextDecoder().decode(stderr));
    const [read, open] = new TextDecoder().decode(stdout).trim().split("\n")
      .map((line) => JSON.parse(line).message);
    // The order of the two is the resolver's.
    const both =
      `connect ECONNREFUSED (?:::1|127\\.0\\.0\\.1):${port}, connect ECONNREFUSED (?:127\\.0\\.0\\.1|::1):${port}`;
    assert.match(
      read,
      new RegExp(
        `^The store's read failed as nothing listens at PostgreSQL's host and port \\(AggregateError: ${both}\\): start the server, or correct the host and port the client connects to; nothing was read, so try again$`,
      ),
    );
    assert.match(
      open,
      new RegExp(
        `^DATABASE_URL: cannot open PostgreSQL localhost:${port}/payments, no TLS: ${both} \\(nothing listens at that host and port: start the server, or correct the host and port in DATABASE_URL\\)$`,
      ),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
