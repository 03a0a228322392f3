/**
 * PostgresStore when the client's host name stands for several addresses
 * (`localhost` for `::1` and `127.0.0.1`) and each refuses the connect:
 * Node's and Deno's `node:net` then fail it as one `AggregateError`, with
 * no words of its own, which the store says as it says one refusal.
 *
 * @module
 */

import assert from "node:assert/strict";
import { downPort } from "./_down_port.ts";

/** What a call met: its error's message, code, cause's name and mark. */
type Met = {
  message: string;
  code?: string;
  cause?: string;
  notWritten?: boolean;
};

/**
 * What a write and a read of `_two_address_refusal.ts` met on `port`, run
 * in a process of its own that may reach 127.0.0.1 and `other` (the run's
 * flags allow 127.0.0.1 alone), its lookup given as `mode` says.
 */
async function refusalsOn(
  port: number,
  other: string,
  mode?: "mixed",
): Promise<[Met, Met]> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-check",
      "--allow-read",
      "--allow-env",
      `--allow-net=127.0.0.1,${other}`,
      `${import.meta.dirname}/_two_address_refusal.ts`,
      String(port),
      ...(mode === undefined ? [] : [mode]),
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(code, 0, new TextDecoder().decode(stderr));
  return new TextDecoder().decode(stdout).trim().split("\n")
    .map((line) => JSON.parse(line)) as [Met, Met];
}

Deno.test("PostgresStore says a refusal by every address of the host's name (an AggregateError) as nothing listening at that host and port, a write marked as not written; a read alike", async () => {
  const port = await downPort();
  const [write, read] = await refusalsOn(port, "[::1]");
  const refused =
    `\\(AggregateError: connect ECONNREFUSED ::1:${port}, connect ECONNREFUSED 127\\.0\\.0\\.1:${port}\\)`;
  assert.match(
    write.message,
    new RegExp(
      `^Cannot create intent pi_0001 as nothing listens at PostgreSQL's host and port ${refused}: start the server, or correct the host and port the client connects to; nothing was written, so try again$`,
    ),
  );
  assert.deepEqual(
    { code: write.code, cause: write.cause, notWritten: write.notWritten },
    { code: "ECONNREFUSED", cause: "AggregateError", notWritten: true },
  );
  assert.match(
    read.message,
    new RegExp(
      `^The store's read failed as nothing listens at PostgreSQL's host and port ${refused}: start the server, or correct the host and port the client connects to; nothing was read, so try again$`,
    ),
  );
  assert.equal(read.code, "ECONNREFUSED");
});

Deno.test("PostgresStore says a connect where one address of the host's name refused and another failed otherwise (an AggregateError) as no address taking it, not as nothing listening, nor with no words; a write marked as not written", async () => {
  const port = await downPort();
  const [write, read] = await refusalsOn(port, "[fe80::1]", "mixed");
  // The link-local address's own failure is the system's: EINVAL on Linux.
  const failed =
    `\\(AggregateError: connect ECONNREFUSED 127\\.0\\.0\\.1:${port}, connect E[A-Z]+ fe80::1:${port}\\)`;
  const toDo =
    "start the server, or correct the host and port, or this machine's route to each address";
  assert.match(
    write.message,
    new RegExp(
      `^Cannot create intent pi_0001 as no address of PostgreSQL's host took the connection ${failed}: ${toDo}; nothing was written, so try again$`,
    ),
  );
  assert.deepEqual(
    { cause: write.cause, notWritten: write.notWritten },
    { cause: "AggregateError", notWritten: true },
  );
  assert.match(
    read.message,
    new RegExp(
      `^The store's read failed as no address of PostgreSQL's host took the connection ${failed}: ${toDo}; nothing was read, so try again$`,
    ),
  );
});
