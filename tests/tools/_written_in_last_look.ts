/**
 * Preloaded into `tools/kv_to_postgres.ts` (`deno run --preload`): the
 * Deno KV handle the tool opens writes once its move's last look before
 * the commit is done (the second list of the whole `["relayer"]` prefix,
 * the first being the copy), as an instance of the service still running
 * records a tx sent on intent `pi_0001` then.
 *
 * @module
 */

const open = Deno.openKv;
Object.defineProperty(Deno, "openKv", {
  configurable: true,
  value: async (path?: string): Promise<Deno.Kv> => {
    const kv = await open(path);
    let whole = 0;
    return new Proxy(kv, {
      get(target, name) {
        if (name !== "list") {
          const value = Reflect.get(target, name, target);
          return typeof value === "function" ? value.bind(target) : value;
        }
        return async function* (
          selector: Deno.KvListSelector,
          options?: Deno.KvListOptions,
        ) {
          const last = "prefix" in selector && selector.prefix.length === 1 &&
            options?.limit === undefined && ++whole === 2;
          yield* target.list(selector, options);
          if (!last) return;
          const key = ["relayer", "intent", "pi_0001"];
          const { value } = await target.get<Record<string, unknown>>(key);
          await target.set(key, { ...value, txHashes: ["0xPAID"] });
        };
      },
    });
  },
});
