/**
 * What `Deno.openKv(url)` of a KV Connect database sends, on the Deno that
 * runs it: a stand-in that refuses every request (500) is opened, and the
 * probe prints one JSON line, {@linkcode KvConnectOpening}. Run by
 * deploy-check on Deno 2.5.0 (`deno run --no-config --unstable-kv
 * --allow-net=127.0.0.1 --allow-env=DENO_KV_ACCESS_TOKEN`, with
 * `DENO_KV_ACCESS_TOKEN` set in its environment), where docs/routes.md
 * says the opening reads none of the database's data.
 *
 * @module
 */

// deno-lint-ignore-file no-console
/** What the probe prints. */
export interface KvConnectOpening {
  /** The Deno that ran it. */
  readonly deno: string;
  /** `"resolved"`, or `"rejected: <message>"`. */
  readonly opened: string;
  /** How many requests the stand-in had when the opening settled. */
  readonly atOpen: number;
  /** Every request within 1.5 s of the opening: `"<method> <path> <body>"`. */
  readonly requests: readonly string[];
}

/** How long the probe listens after the opening settled. */
const LISTEN_MS = 1_500;

if (import.meta.main) {
  const requests: string[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (request) => {
      requests.push(
        `${request.method} ${new URL(request.url).pathname} ${await request
          .text()}`,
      );
      return new Response("refused by the probe", { status: 500 });
    },
  );
  let opened = "resolved";
  let kv: Deno.Kv | undefined;
  try {
    kv = await Deno.openKv(`http://127.0.0.1:${server.addr.port}/kv`);
  } catch (error) {
    opened = `rejected: ${(error as Error).message}`;
  }
  const atOpen = requests.length;
  await new Promise((resolve) => setTimeout(resolve, LISTEN_MS));
  kv?.close();
  await server.shutdown();
  const said: KvConnectOpening = {
    deno: Deno.version.deno,
    opened,
    atOpen,
    requests,
  };
  console.log(JSON.stringify(said));
}
