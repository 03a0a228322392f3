import assert from "node:assert/strict";
import { DEFAULT_POLICY, parseDuration } from "../../mod.ts";
import { cloudflareDeliveryDelay } from "../../webhook/config.ts";

/**
 * The tables of `examples/cloudflare/wrangler.toml`, read as this file
 * writes them (`[name]` and `[[name]]` headers, `key = value` lines with a
 * quoted text or a whole number, `#` comments): enough to check what the
 * queue handler cannot read, not a TOML parser.
 */
function tables(text: string): { name: string; values: Map<string, string> }[] {
  const found: { name: string; values: Map<string, string> }[] = [
    { name: "", values: new Map() },
  ];
  for (const raw of text.split("\n")) {
    const line = raw.replace(/\s+#.*$/, "").replace(/^#.*$/, "").trim();
    if (line === "") continue;
    const header = /^\[\[?([\w.]+)\]\]?$/.exec(line);
    if (header) {
      found.push({ name: header[1]!, values: new Map() });
      continue;
    }
    const pair = /^(\w+)\s*=\s*(?:"([^"]*)"|(\d+))$/.exec(line);
    assert.ok(pair, `wrangler.toml line not read by this test: ${line}`);
    found.at(-1)!.values.set(pair[1]!, pair[2] ?? pair[3]!);
  }
  return found;
}

const toml = tables(
  await Deno.readTextFile(
    new URL("../../examples/cloudflare/wrangler.toml", import.meta.url),
  ),
);
const vars = toml.find((table) => table.name === "vars")!.values;
const consumers = toml.filter((table) => table.name === "queues.consumers")
  .map((table) => table.values);
const producers = toml.filter((table) => table.name === "queues.producers")
  .map((table) => table.values);
const jobs = consumers.find((consumer) => consumer.has("dead_letter_queue"))!;
const dead = consumers.find((consumer) =>
  consumer.get("queue") === jobs.get("dead_letter_queue")
)!;

Deno.test("wrangler.toml passes each consumer's max_retries to the Worker, which checks them", () => {
  // The handler cannot read wrangler.toml: these are the numbers it checks.
  assert.equal(vars.get("CLOUDFLARE_MAX_RETRIES"), jobs.get("max_retries"));
  assert.equal(vars.get("CLOUDFLARE_DLQ_MAX_RETRIES"), dead.get("max_retries"));
});

Deno.test("wrangler.toml's dead-letter consumer retries a batch the handler never settled for 14 days, Cloudflare's longest retention", () => {
  // A failure outside the handler (the Worker throws before it runs, or the
  // invocation runs out of wall or CPU time) makes Cloudflare retry the
  // batch's unsettled messages after the consumer's retry_delay, 0 unless
  // set: none of the handler's waits. Run out of retries on the dead-letter
  // queue, a give-up is deleted and its intent stranded; at the default 0,
  // 101 deliveries last minutes.
  const retries = Number(dead.get("max_retries"));
  const delaySeconds = Number(dead.get("retry_delay") ?? "0");
  assert.ok(
    delaySeconds <= 43_200,
    `retry_delay ${delaySeconds} s is past Cloudflare's 12 h`,
  );
  assert.ok(
    retries * delaySeconds >= 14 * 24 * 60 * 60,
    `the dead-letter queue retries a failed batch for ${
      retries * delaySeconds
    } s (max_retries ${retries} × retry_delay ${delaySeconds}), less than 14 days`,
  );
});

Deno.test("wrangler.toml's jobs consumer retries a batch the handler never settled no sooner than the policy's cap, so such attempts keep the rescue window", () => {
  // Each such retry is an attempt, the delivery number the policy counts.
  // At the default retry_delay of 0 a run of them (a bad deploy, batches out
  // of wall time) spends the policy's deliveries in seconds, and a settling
  // payment is poisoned to review before it could be rescued. No gap
  // shorter than the policy's cap keeps every gap at least the policy's own.
  const capMs = vars.has("CAP")
    ? parseDuration(vars.get("CAP")!)
    : DEFAULT_POLICY.capMs;
  const delaySeconds = Number(jobs.get("retry_delay") ?? "0");
  assert.ok(
    delaySeconds * 1000 >= capMs && delaySeconds <= 43_200,
    `the jobs consumer's retry_delay is ${delaySeconds} s: set it to the policy's cap (${
      capMs / 1000
    } s) or more, and at most 12 h`,
  );
});

Deno.test("a producer's delivery_delay in wrangler.toml is counted in CLOUDFLARE_DELIVERY_DELAY, and the file and docs name it", async () => {
  // Wrangler's schema has a delay per producer binding
  // (`[[queues.producers]]`' `delivery_delay`, seconds), beside the queue's
  // own (`--delivery-delay-secs`) and a send's `delaySeconds`: each message
  // sent through that binding waits it, and its age counts against the
  // retentions the handler checks.
  const delayMs = vars.has("CLOUDFLARE_DELIVERY_DELAY")
    ? cloudflareDeliveryDelay({
      CLOUDFLARE_DELIVERY_DELAY: vars.get("CLOUDFLARE_DELIVERY_DELAY")!,
    }) ?? 0
    : 0;
  for (const producer of producers) {
    const seconds = Number(producer.get("delivery_delay") ?? "0");
    assert.ok(
      seconds * 1000 <= delayMs,
      `the producer ${
        producer.get("binding")
      }'s delivery_delay is ${seconds} s, more than CLOUDFLARE_DELIVERY_DELAY (${
        delayMs / 1000
      } s): give the longest`,
    );
  }
  const text = await Deno.readTextFile(
    new URL("../../examples/cloudflare/wrangler.toml", import.meta.url),
  );
  const docs = await Deno.readTextFile(
    new URL("../../docs/queues.md", import.meta.url),
  );
  const comments = text.split("\n").filter((line) => line.startsWith("#"))
    .join(" ");
  assert.match(comments, /delivery_delay/, "wrangler.toml's comment");
  const paragraph =
    /^Cloudflare does not say that a message's retention[\s\S]*?\n\n/m
      .exec(docs)?.[0];
  assert.match(paragraph ?? "", /delivery_delay/, "docs/queues.md's paragraph");
});
