/**
 * The resend probe of the runtime checks: does the runtime's `fetch` send
 * `HttpSender`'s `POST /send` again when the kept-alive connection it rode
 * dies after carrying it whole? And the same send made with the runtime's
 * own `fetch`, its body a string, bytes and a stream
 * (`rawSendOnce()`), as docs/api.md says each is sent once there. A signer that broadcast on the first copy
 * answers the second "nothing signed" (`503 {"notSent":true}`), and a send
 * read from that copy would fail a payment whose tx may land. Deno 2.9.6
 * does that for a string or bytes body (not for `HttpSender`'s `Blob`:
 * `tests/relayer/http_sender_resend_test.ts`); Node 20 to 26, Bun 1.4.5
 * and workerd 1.20260730.1 send each body once. The probe
 * (`tools/_resend_main.ts`, `tools/_resend_worker.ts`) passes when the
 * signer read exactly one `POST /send`, on the connection of the receipt
 * before it (the scenario happened), and `HttpSender` reported it maybe
 * sent (neither sent nor `notSent`). About 1 s per Node or Bun, 3 s on
 * workerd, plus its bundles.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { bundle, run } from "./_npm_cache.ts";
import type { Probe } from "./_resend_main.ts";

/** A runtime the probe runs under. */
export interface ResendRuntime {
  /** Its name in the summary (`"Node v22.23.5"`, `"workerd 1.20260730.1"`). */
  readonly label: string;
  /** The program (`node`, a cached binary). */
  readonly command: string;
  /** Arguments before the script (`["run"]` for Bun). @default [] */
  readonly args?: readonly string[];
  /** Environment variables for the run. @default {} */
  readonly env?: Record<string, string>;
  /**
   * Send from a Worker on workerd through Miniflare (the `command` is the
   * Node that runs Miniflare; `dir` must hold a `node_modules` with
   * `miniflare`), on this compatibility date.
   */
  readonly workerd?: { readonly compatibilityDate: string };
}

/**
 * Why a run of the probe failed, or `null` if it passed.
 *
 * @example
 * ```ts ignore
 * const failure = probeFailure(JSON.parse(line));
 * if (failure !== null) console.log(`FAIL ${failure}`);
 * ```
 */
export function probeFailure(probe: Probe): string | null {
  // rawSendOnce()'s runs are named "…, fetch with a <form> body".
  const reader = /fetch with an? \w+ body/.test(probe.where)
    ? "the caller of fetch"
    : "HttpSender";
  const posts = probe.read.filter((r) => r.line.startsWith("POST /send"));
  const warm = probe.read.find((r) => r.line.startsWith("GET /receipt/"));
  if (probe.receipt !== "pending") {
    return `the receipt before the send was not read (${probe.receipt})`;
  }
  if (posts.length !== 1) {
    return `the signer read POST /send ${posts.length} times (connections ${
      posts.map((p) => p.connection).join(", ")
    }): the runtime's fetch sent the send again, and ${reader} read its outcome from the copy`;
  }
  if (!posts[0]!.body.includes('"intentId":"pi_0001"')) {
    return `the signer read a send without its body (${posts[0]!.framing}): ${
      JSON.stringify(posts[0]!.body)
    }`;
  }
  if (posts[0]!.connection !== warm?.connection) {
    return "the send did not ride the receipt's kept-alive connection: the scenario did not happen";
  }
  if (probe.outcome !== "maybe sent") {
    return `${reader} reported the send ${probe.outcome} (${probe.detail}), not maybe sent`;
  }
  return null;
}

/**
 * Bundles the probe into `dir` and runs it under each runtime, printing a
 * line per run.
 *
 * @param dir The check's temp dir.
 * @param runtimes The runtimes to probe.
 * @returns Whether every run passed.
 * @throws {CheckError} If a bundle fails or a run passes its deadline.
 *
 * @example
 * ```ts ignore
 * ok = await resendProbe(dir, [{ label: "Node v20.20.2", command: "node" }]) && ok;
 * ```
 */
export async function resendProbe(
  dir: string,
  runtimes: readonly ResendRuntime[],
): Promise<boolean> {
  await bundle("tools/_resend_main.ts", `${dir}/resend_main.mjs`, {
    platform: "node",
  });
  if (runtimes.some((runtime) => runtime.workerd)) {
    await bundle("tools/_resend_worker.ts", `${dir}/resend_worker.js`, {
      platform: "browser",
    });
  }
  let ok = true;
  for (const runtime of runtimes) {
    const { code, out } = await run(
      runtime.command,
      [...(runtime.args ?? []), "resend_main.mjs"],
      {
        cwd: dir,
        env: {
          ...runtime.env,
          ...(runtime.workerd
            ? {
              RESEND_WORKER: "resend_worker.js",
              COMPAT_DATE: runtime.workerd.compatibilityDate,
            }
            : {}),
        },
        label: `the resend probe on ${runtime.label}`,
        timeoutMs: 60_000,
      },
    );
    const probes = out.split("\n").filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Probe);
    if (code !== 0 || probes.length === 0) {
      ok = false;
      console.log(`resend probe on ${runtime.label}: FAIL\n${out}`);
      continue;
    }
    for (const probe of probes) {
      const where = probe.where === "in process" ? "" : ` (${probe.where})`;
      const failure = probeFailure(probe);
      if (failure !== null) {
        ok = false;
        console.log(
          `resend probe on ${runtime.label}${where}: FAIL ${failure}: ${
            JSON.stringify(probe)
          }`,
        );
        continue;
      }
      console.log(
        `resend probe on ${runtime.label}${where}: a send whose kept-alive connection died after carrying it was read once and kept maybe sent (${probe.detail})`,
      );
    }
  }
  return ok;
}
