import { KvStore } from "../../store/kv.ts";
import { storeContract } from "./_contract.ts";

storeContract("KvStore", async () => {
  const kv = await Deno.openKv(":memory:");
  return { store: new KvStore(kv), close: () => kv.close() };
});
