/**
 * `tools/schedule.ts`'s command line run once per line of stdin, in one
 * process with the tool's permissions (none): each line is a JSON array
 * of arguments; each answer, one JSON line of the exit code and what it
 * printed, as a process of its own would have. For `_schedule_cli.ts`'s
 * `scheduleSession()`.
 *
 * @module
 */

import { main } from "../../tools/schedule.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();
let buffered = "";
for await (const chunk of Deno.stdin.readable) {
  buffered += decoder.decode(chunk, { stream: true });
  let end;
  while ((end = buffered.indexOf("\n")) >= 0) {
    const args: string[] = JSON.parse(buffered.slice(0, end));
    buffered = buffered.slice(end + 1);
    let stdout = "";
    let stderr = "";
    const code = await main(args, {
      out: (line) => stdout += `${line}\n`,
      err: (line) => stderr += `${line}\n`,
    });
    const answer = JSON.stringify({ code, stdout, stderr });
    await Deno.stdout.write(encoder.encode(`${answer}\n`));
  }
}
