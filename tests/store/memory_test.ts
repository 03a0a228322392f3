import { MemoryStore } from "../../mod.ts";
import { storeContract } from "./_contract.ts";

storeContract(
  "MemoryStore",
  () => Promise.resolve({ store: new MemoryStore(), close: () => {} }),
  { test: Deno.test },
);
