/**
 * `main.ts` run the way Deno Deploy runs an entrypoint: `deno run` (the
 * file you would pass to `deno run`, Deploy's docs say), with its
 * `export default { fetch }` served only where the runtime serves it
 * (`DENO_AUTO_SERVE`, as `deno serve` does), and no file-system
 * permission: a start that reads or writes a file fails here.
 *
 * `main.ts` runs on the Deno that runs this file, or on the one named by
 * {@linkcode MAIN_DENO} in this run's environment: `deno task deploy-check`
 * names Deno 2.5.0, the version Deploy's Runtime page names. So does
 * `googleJwks()`'s failed fetch (`tests/_jwks_unreachable.ts`): Deno
 * 2.5.0's fetch error quotes the URL whole, and the service logs it.
 */
import assert from "node:assert/strict";
import { baseEnv, healthy, listeningOn } from "./_main_process.ts";
import { timeout } from "./_timeout.ts";
import { signGeneric } from "../tools/_sign.ts";
import { signer } from "../examples/signer_stub.ts";
import { MAIN_DENO } from "../tools/deploy_check.ts";
import { MIRROR_KEY } from "./_jwks_unreachable.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const ROOT = new URL("../", import.meta.url).pathname;
const SECRET = "deploy-secret-0123456789abcdef";
const OPS = "deploy-ops-token-0123456789";
/** The Deno that runs main.ts: deploy-check's, or this one. */
const DENO = Deno.env.get(MAIN_DENO) || Deno.execPath();

/** `deno run` of main.ts with network (`net`) and environment only. */
function run(
  env: Record<string, string>,
  net = "--allow-net",
): Deno.ChildProcess {
  return new Deno.Command(DENO, {
    args: ["run", net, "--allow-env", "--unstable-kv", MAIN],
    cwd: ROOT,
    clearEnv: true,
    env: {
      ...baseEnv(),
      WEBHOOK_SECRET: SECRET,
      OPS_TOKEN: OPS,
      KV_PATH: ":memory:",
      ...env,
    },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

async function output(
  child: Deno.ChildProcess,
  onLine: (line: string) => void = () => {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const [status, stdout, stderr] = await Promise.all([
    child.status,
    (async () => {
      let text = "";
      let from = 0;
      for await (
        const chunk of child.stdout.pipeThrough(new TextDecoderStream())
      ) {
        text += chunk;
        for (let end = text.indexOf("\n", from); end !== -1;) {
          onLine(text.slice(from, end));
          from = end + 1;
          end = text.indexOf("\n", from);
        }
      }
      return text;
    })(),
    new Response(child.stderr).text(),
  ]);
  return { code: status.code, stdout, stderr };
}

Deno.test(
  "main.ts under deno run, where nothing serves its default export, exits 1 and says how to serve it, rather than exit 0 after its start line",
  timeout(60_000, async () => {
    const child = run({ SENDER_URL: "http://127.0.0.1:9/" });
    const { code, stderr } = await output(child);
    assert.equal(code, 1, stderr);
    const lines = stderr.trim().split("\n").filter((line) =>
      line.startsWith("relayer:")
    );
    assert.equal(lines.length, 1, stderr);
    assert.match(
      lines[0]!,
      /^relayer: cannot serve: nothing served main\.ts's default export .*deno serve .*DENO_AUTO_SERVE=1/,
    );
    assert.doesNotMatch(stderr, /\n\s+at /, "no stack");
  }),
);

Deno.test(
  "main.ts served by deno run (DENO_AUTO_SERVE) with an --allow-net that leaves out its address refuses in one line naming the --allow-net to give, without a stack",
  timeout(60_000, async () => {
    const child = run({
      SENDER_URL: "http://127.0.0.1:9/",
      DENO_AUTO_SERVE: "1",
      DENO_SERVE_ADDRESS: "tcp:127.0.0.1:0",
    }, "--allow-net=127.0.0.1:1");
    const { code, stderr } = await output(child);
    assert.equal(code, 1, stderr);
    const lines = stderr.trim().split("\n");
    assert.equal(lines.length, 1, stderr);
    assert.match(
      lines[0]!,
      /^relayer: cannot start: this process may not listen on 127\.0\.0\.1:0: .*under deno run add --allow-net=127\.0\.0\.1:0\.$/,
    );
  }),
);

Deno.test(
  "main.ts run as Deno Deploy runs it (deno run, DENO_AUTO_SERVE, network and environment only) serves a signed delivery end to end",
  timeout(60_000, async () => {
    const signerServer = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      signer,
    );
    // Port 0: the runtime binds a port the system picks, and main.ts says
    // which (a port probed free here could be another process's by then).
    const child = run({
      SENDER_URL: `http://127.0.0.1:${signerServer.addr.port}`,
      DENO_AUTO_SERVE: "1",
      DENO_SERVE_ADDRESS: "tcp:127.0.0.1:0",
    });
    let said!: (base: string | null) => void;
    const listening = new Promise<string | null>((resolve) => (said = resolve));
    const ended = output(child, (line) => {
      const at = listeningOn(line);
      if (at !== null) said(at);
    }).finally(() => said(null));
    const stop = new AbortController();
    try {
      const base = await listening;
      if (base === null) assert.fail(JSON.stringify(await ended));
      const outcome = await Promise.race([
        ended.then((out) => out),
        healthy(base, stop.signal).then(() => "served" as const),
      ]);
      assert.equal(outcome, "served", JSON.stringify(outcome));
      const ops = { authorization: `Bearer ${OPS}` };
      const created = await fetch(`${base}/v1/intents`, {
        method: "POST",
        headers: ops,
        body: JSON.stringify({ id: "pi_0001_notsent", state: "authorized" }),
      });
      assert.equal(created.status, 201, await created.text());
      const body = JSON.stringify({
        job: { intentId: "pi_0001_notsent", kind: "settle" },
      });
      const delivered = await fetch(`${base}/v1/deliveries`, {
        method: "POST",
        headers: { "x-signature": await signGeneric(body, SECRET) },
        body,
      });
      const answer = await delivered.json();
      assert.equal(delivered.status, 200, JSON.stringify(answer));
      assert.equal(answer.outcome, "poison", JSON.stringify(answer));
      const intent = await fetch(`${base}/v1/intents/pi_0001_notsent`, {
        headers: ops,
      });
      const read = await intent.json();
      assert.equal(read.intent.state, "failed", JSON.stringify(read));
      assert.equal(read.intent.hold, "voided", JSON.stringify(read));
    } finally {
      stop.abort();
      child.kill("SIGTERM");
      const { stderr } = await ended;
      await signerServer.shutdown();
      assert.doesNotMatch(stderr, /NotCapable|PermissionDenied|--allow-/);
    }
  }),
);

Deno.test(
  "googleJwks() on this Deno, its keys' URL carrying a key in its query and unreachable: the push is answered 503 and the log line says the keys could not be fetched, never the URL's query (Deno 2.5.0's fetch error quotes the URL whole)",
  timeout(60_000, async () => {
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = listener.addr.port;
    listener.close(); // nothing listens there now: the fetch is refused
    const child = new Deno.Command(DENO, {
      args: [
        "run",
        "--allow-net=127.0.0.1",
        "--allow-env",
        new URL("./_jwks_unreachable.ts", import.meta.url).pathname,
        String(port),
      ],
      cwd: ROOT,
      clearEnv: true,
      env: baseEnv(),
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const { code, stdout, stderr } = await output(child);
    assert.equal(code, 0, stderr);
    const { status, lines } = JSON.parse(stdout) as {
      status: number;
      lines: string[];
    };
    assert.equal(status, 503);
    assert.equal(lines.length, 1, stdout);
    assert.match(lines[0]!, /^relayer cannot verify Pub\/Sub pushes now: /);
    assert.ok(!lines[0]!.includes(MIRROR_KEY), lines[0]);
  }),
);
