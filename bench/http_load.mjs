// The load for `deno task bench:http`, run by Node with the npm autocannon:
// generic-route deliveries, each signed afresh when it is sent
// (`X-Signature: t=<unix seconds>,v1=<HMAC-SHA-256 of "<t>.<body>">`), and
// each body carrying a message id no other request of any run carries, so
// no two requests share a signature (a replayed one is a 401, an error).
//
// - `cycle <n>`: deliveries cycle through the intents `pi_r_0` … `pi_r_<n-1>`
//   (the read path: the intents stay settling, a delivery looks);
// - `fresh <n>`: every delivery names the next unused intent `pi_w_<i>`,
//   and the load stops when the n intents are used up or the time is over,
//   whichever comes first (the write path: never an intent twice).
//
// Every answer must have the row's status and a body that holds the row's
// text (a delivery's 503 is the intended retry only when its reason is the
// scenario's, not "intent … not found" or the app's own "Delivery failed").
// Answers with the status but not the text are counted, and the first one's
// body is kept, so a failure says what came back.
//
// Prints autocannon's result, the requests counted by status, the answers
// of the right status but the wrong body, and the measured duration, as one
// JSON line.
//
// node bench/http_load.mjs <autocannon dir> <url> <secret> <cycle|fresh> <n> <connections> <seconds> <status> <text> [<amount>]
//
// With `<amount>` (cycle only), the load sends exactly that many requests
// and ignores `<seconds>` (`bench/cpu_per_request.ts` divides by it).
import { createHmac, randomUUID } from "node:crypto";
import { createRequire } from "node:module";

const [dir, url, secret, mode, n, connections, seconds, status, text, amount] =
  process.argv.slice(2);
const autocannon = createRequire(`${dir}/`)("autocannon");
const pool = Number(n);
const fresh = mode === "fresh";
const run = randomUUID();

/** Answers of the expected status whose body lacks `text`, and the first. */
const wrongBodies = { count: 0, first: "" };
function check(answered, body) {
  if (String(answered) !== status || body.includes(text)) return;
  if (wrongBodies.count++ === 0) wrongBodies.first = body.slice(0, 160);
}

let sent = 0;
function next() {
  const i = sent++;
  if (fresh && i >= pool) return undefined;
  const intentId = fresh ? `pi_w_${i}` : `pi_r_${i % pool}`;
  const body = JSON.stringify({
    job: { intentId, kind: "settle" },
    delivery: 1,
    messageId: `${run}-${i}`,
  });
  const t = Math.floor(Date.now() / 1000);
  const v1 = createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");
  return { body, signature: `t=${t},v1=${v1}` };
}

const instance = autocannon({
  url,
  connections: Number(connections),
  // A fresh pool ends the load when it is used up: `amount` counts the
  // requests, and the timer below keeps the time limit.
  ...(fresh
    ? { amount: pool }
    : amount !== undefined
    ? { amount: Number(amount) }
    : { duration: Number(seconds) }),
  requests: [{
    method: "POST",
    path: "/v1/deliveries",
    onResponse: check,
    setupRequest(request) {
      const signed = next();
      // Past the pool: a request no route answers (a 404, counted as an
      // error) rather than an intent used twice.
      if (signed === undefined) return { ...request, path: "/v1/pool-used-up" };
      return {
        ...request,
        body: signed.body,
        headers: {
          ...request.headers,
          "content-type": "application/json",
          "x-signature": signed.signature,
        },
      };
    },
  }],
});
const timer = fresh
  ? setTimeout(() => instance.stop(), Number(seconds) * 1000)
  : undefined;
const result = await instance;
clearTimeout(timer);
process.stdout.write(
  JSON.stringify({
    requests: result.requests.total,
    duration: result.duration,
    rps: result.requests.total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors,
    statusCodeStats: result.statusCodeStats,
    wrongBodies,
    signed: Math.min(sent, fresh ? pool : sent),
  }) + "\n",
);
