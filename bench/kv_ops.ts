/**
 * Prints the Deno KV operations each delivery path costs on `KvStore`, as
 * a markdown table: the numbers `tests/store/kv_ops_test.ts` pins. The
 * "resolution" rows are the poison resolution's share of its delivery:
 * the re-read and the writes after the decision.
 *
 * `deno task kv-ops`
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { measurePath, PATHS } from "../support/store_paths.ts";

const rows = ["| path | reads | commits |", "| --- | ---: | ---: |"];
for (const path of PATHS) {
  const { total, resolution } = await measurePath(path);
  rows.push(
    `| (${path.id}) ${path.name} | ${total.reads} | ${total.commits} |`,
  );
  if (resolution !== null) {
    rows.push(
      `| (${path.id}) resolution only | ${resolution.reads} | ${resolution.commits} |`,
    );
  }
}
console.log(rows.join("\n"));
