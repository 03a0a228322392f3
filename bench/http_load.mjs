// The load for `deno task bench:http`, run by Node with the npm autocannon:
// signed generic-route deliveries, cycling through a pool of intents.
// Prints autocannon's result as one JSON line.
//
// node bench/http_load.mjs <autocannon dir> <url> <secret> <intents> <connections> <seconds>
import { createHmac } from "node:crypto";
import { createRequire } from "node:module";

const [dir, url, secret, intents, connections, seconds] = process.argv.slice(2);
const autocannon = createRequire(`${dir}/`)("autocannon");

const bodies = Array.from({ length: Number(intents) }, (_, i) => {
  const body = JSON.stringify({
    job: { intentId: `pi_${i}`, kind: "settle" },
    delivery: 1,
  });
  return {
    body,
    signature: `sha256=${
      createHmac("sha256", secret).update(body).digest("hex")
    }`,
  };
});
let next = 0;

const result = await autocannon({
  url,
  connections: Number(connections),
  duration: Number(seconds),
  requests: [{
    method: "POST",
    path: "/v1/deliveries",
    setupRequest(request) {
      const { body, signature } = bodies[next++ % bodies.length];
      return {
        ...request,
        body,
        headers: {
          ...request.headers,
          "content-type": "application/json",
          "x-signature": signature,
        },
      };
    },
  }],
});
process.stdout.write(
  JSON.stringify({
    requests: result.requests.total,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    statuses: {
      "2xx": result["2xx"],
      "non2xx": result.non2xx,
      errors: result.errors,
      timeouts: result.timeouts,
    },
    statusCodeStats: result.statusCodeStats,
  }) + "\n",
);
