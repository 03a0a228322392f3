/**
 * A throwaway certificate authority and a server certificate it signed,
 * made with the `openssl` command line (Debian's `postgresql` package
 * brings it), for tests that run a server over TLS.
 *
 * @module
 */

/** The files and PEM texts of {@linkcode testCertificates}. */
export interface TestCertificates {
  /** The CA's certificate file, to trust (`DENO_CERT`). */
  readonly caFile: string;
  /** The server's certificate, PEM. */
  readonly cert: string;
  /** The server's private key, PEM. */
  readonly key: string;
  /** Deletes the files. */
  remove(): Promise<void>;
}

async function openssl(args: string[], cwd: string): Promise<void> {
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command("openssl", {
      args,
      cwd,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new Error(
        "Cannot make test certificates: no openssl on the PATH; install Debian's openssl package",
      );
    }
    throw error;
  }
  if (!output.success) {
    throw new Error(
      `openssl ${args[0]} failed: ${new TextDecoder().decode(output.stderr)}`,
    );
  }
}

/**
 * Makes a CA and a server certificate for `names` (host names and IP
 * addresses), valid for two days, in a new temp dir.
 *
 * @param names What the server certificate names.
 * @returns The CA's file and the server's certificate and key.
 * @throws {Error} If `openssl` is missing or fails.
 */
export async function testCertificates(
  names: readonly string[] = ["localhost", "127.0.0.1"],
): Promise<TestCertificates> {
  const dir = await Deno.makeTempDir({ prefix: "relayer-tls-" });
  try {
    await writeCertificates(dir, names);
  } catch (error) {
    // No openssl, or a step it refused: the caller has no remove() to call.
    await Deno.remove(dir, { recursive: true });
    throw error;
  }
  return {
    caFile: `${dir}/ca.crt`,
    cert: await Deno.readTextFile(`${dir}/server.crt`),
    key: await Deno.readTextFile(`${dir}/server.key`),
    remove: () => Deno.remove(dir, { recursive: true }),
  };
}

/** Writes the CA's and the server's files of {@linkcode testCertificates} into `dir`. */
async function writeCertificates(
  dir: string,
  names: readonly string[],
): Promise<void> {
  const san = names.map((name) =>
    /^[\d.]+$/.test(name) || name.includes(":") ? `IP:${name}` : `DNS:${name}`
  ).join(",");
  await Deno.writeTextFile(
    `${dir}/server.ext`,
    [
      `subjectAltName=${san}`,
      "basicConstraints=CA:FALSE",
      "keyUsage=digitalSignature,keyEncipherment",
      "extendedKeyUsage=serverAuth",
      "",
    ].join("\n"),
  );
  const days = ["-days", "2"];
  await openssl([
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    "/CN=relayer test CA",
    ...days,
    "-keyout",
    "ca.key",
    "-out",
    "ca.crt",
  ], dir);
  await openssl([
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    `/CN=${names[0] ?? "localhost"}`,
    "-keyout",
    "server.key",
    "-out",
    "server.csr",
  ], dir);
  await openssl([
    "x509",
    "-req",
    "-in",
    "server.csr",
    "-CA",
    "ca.crt",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    ...days,
    "-extfile",
    "server.ext",
    "-out",
    "server.crt",
  ], dir);
}
