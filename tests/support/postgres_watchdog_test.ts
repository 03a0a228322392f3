import assert from "node:assert/strict";
import { startPostgres } from "../../support/postgres_server.ts";
import { postgresAvailable } from "../_postgres.ts";

/** The command lines of this machine's processes that name `text`. */
async function processesNaming(text: string): Promise<string[]> {
  const { stdout } = await new Deno.Command("ps", {
    args: ["-eo", "args"],
    stdout: "piped",
  }).output();
  return new TextDecoder().decode(stdout).split("\n").filter((line) =>
    line.includes(text)
  );
}

Deno.test({
  name:
    "startPostgres(): the watchdog of a server stopped early ends with it, not with the run",
  ignore: !postgresAvailable,
  async fn() {
    const server = await startPostgres();
    // The watchdog names the server's dir; so does the server while it runs.
    assert.notEqual((await processesNaming(server.dir)).length, 0);
    await server.stop();
    // It polls every half second.
    let left: string[] = [];
    for (let waited = 0; waited <= 3_000; waited += 100) {
      left = await processesNaming(server.dir);
      if (left.length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.deepEqual(left, []);
  },
});

Deno.test({
  name:
    "startPostgres(): the watchdog stops a server and deletes its dir once the process that started it exits without stopping it",
  ignore: !postgresAvailable,
  async fn() {
    // A process that starts a server, prints its dir and exits, its
    // server not stopped (as a test killed mid-run leaves it).
    const module = new URL("../../support/postgres_server.ts", import.meta.url);
    const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
      args: [
        "eval",
        `const { startPostgres } = await import(${
          JSON.stringify(module.href)
        }); console.log((await startPostgres()).dir);`,
      ],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const dir = new TextDecoder().decode(stdout).trim();
    assert.equal(code, 0, new TextDecoder().decode(stderr));
    assert.match(dir, /relayer-pg-/);
    // It polls every half second; `pg_ctl stop -m immediate` is quick.
    let left: string[] = [];
    let kept = true;
    for (let waited = 0; waited <= 5_000; waited += 100) {
      left = await processesNaming(dir);
      kept = await Deno.stat(dir).then(() => true, () => false);
      if (left.length === 0 && !kept) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.deepEqual(left, []);
    assert.equal(kept, false);
  },
});
