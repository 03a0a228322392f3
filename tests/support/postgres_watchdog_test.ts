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
