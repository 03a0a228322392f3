/**
 * Prints the Deno KV operations each delivery path costs on `KvStore`, as
 * a markdown table: the numbers `tests/store/kv_ops_test.ts` pins. The
 * "resolution" rows are the poison resolution's share of its delivery:
 * the re-read and the writes after the decision.
 *
 * `deno task kv-ops` (it reads no arguments, and refuses any: exit 2)
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { measurePath, PATHS } from "../support/store_paths.ts";

// `deno task kv-ops --store postgres` printed Deno KV's numbers with the
// flag ignored: any argument is refused, nothing measured. Counted, not
// shown, as the signer stub's are.
if (Deno.args.length > 0) {
  const count = Deno.args.length;
  console.error(
    `kv-ops: it reads no arguments, so it refuses the ${count} argument${
      count === 1 ? "" : "s"
    } given (not shown): it prints KvStore's reads and commits alone (PostgreSQL's costs: docs/stores.md#store-benchmarks, deno task bench:store); nothing was run`,
  );
  Deno.exit(2);
}

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
