/**
 * Preloaded into `main.ts` (`deno run --preload`, served by
 * DENO_AUTO_SERVE): once the file named by `RELAYER_TEST_REJECT` exists
 * (the test makes it after the service answers), a promise no one awaits rejects with the error its
 * first line names (`NotCapable` or `PermissionDenied`), whose message is
 * the rest: a refusal that comes while the service runs, not at its listen.
 *
 * @module
 */

const trigger = Deno.env.get("RELAYER_TEST_REJECT");
if (trigger !== undefined) {
  const poll = setInterval(async () => {
    let text: string;
    try {
      text = await Deno.readTextFile(trigger);
    } catch {
      return;
    }
    clearInterval(poll);
    const [kind, ...message] = text.split("\n");
    const Refusal = kind === "NotCapable"
      ? Deno.errors.NotCapable
      : Deno.errors.PermissionDenied;
    void Promise.reject(new Refusal(message.join("\n")));
  }, 50);
  Deno.unrefTimer(poll);
}
