/**
 * `workerConfig`'s `nameUnread` on a Worker's default export whose handlers
 * are methods of its class (`export default new Worker()`), not own
 * properties: each stays callable, runs with the object as `this`, and the
 * first call of any of them names the unread settings, once.
 *
 * @module
 */
import assert from "node:assert/strict";
import { workerConfig } from "../../webhook/app.ts";

const ENV = {
  SENDER_URL: "http://127.0.0.1:9",
  WEBHOOK_SECRET: "a-webhook-secret-16",
  CLOUDFLARE_MAX_RETRIES: "9",
  CLOUDFLARE_DLQ_MAX_RETRIES: "100",
  KV_QUEUE: "1",
};

Deno.test("nameUnread keeps a Worker's handlers that are methods of its class, called on the object itself", async () => {
  class Handlers {
    readonly seen: string[] = [];
    fetch(request: Request): Response {
      this.seen.push(new URL(request.url).pathname);
      return new Response("ok");
    }
    queue(_batch: unknown): Promise<void> {
      this.seen.push("queue");
      return Promise.resolve();
    }
  }
  const logged: string[] = [];
  const original = new Handlers();
  const worker = workerConfig(ENV).nameUnread(
    original,
    (line) => void logged.push(line),
  );
  assert.equal(typeof worker.fetch, "function", "fetch kept");
  assert.equal(typeof worker.queue, "function", "queue kept");
  const answer = worker.fetch(new Request("http://worker.test/healthz"));
  assert.equal(await answer.text(), "ok");
  await worker.queue({});
  assert.deepEqual(original.seen, ["/healthz", "queue"]);
  assert.equal(logged.length, 1, JSON.stringify(logged));
  assert.match(
    logged[0]!,
    /^relayer: KV_QUEUE is set, but only main\.ts reads it/,
  );
});

Deno.test("nameUnread refuses a Worker's class (a WorkerEntrypoint), whose handlers it cannot wrap, where it gave an object with none", () => {
  const { nameUnread } = workerConfig(ENV);
  class Entrypoint {
    fetch(): Response {
      return new Response("ok");
    }
  }
  assert.throws(
    () => nameUnread(Entrypoint, () => {}),
    (error: unknown) =>
      error instanceof TypeError &&
      /^nameUnread takes a Worker's handlers object/.test(error.message) &&
      /workerConfig's `unread`/.test(error.message),
  );
});

Deno.test("nameUnread wraps a Worker's handlers without reading its getters, which run only when read, on the object itself", async () => {
  class Handlers {
    readonly seen: string[] = [];
    get broken(): never {
      throw new Error("a getter that throws");
    }
    get queue(): (batch: unknown) => Promise<void> {
      return (_batch) => {
        this.seen.push("queue");
        return Promise.resolve();
      };
    }
    fetch(): Response {
      this.seen.push("fetch");
      return new Response("ok");
    }
  }
  const original = new Handlers();
  const own = {
    fetch: () => new Response("own"),
    get broken(): never {
      throw new Error("an own getter that throws");
    },
  };
  const logged: string[] = [];
  const log = (line: string) => void logged.push(line);
  const { nameUnread } = workerConfig(ENV);
  const worker = nameUnread(original, log);
  const plain = workerConfig(ENV).nameUnread(own, log);
  assert.throws(() => worker.broken, /^Error: a getter that throws$/);
  assert.throws(() => plain.broken, /^Error: an own getter that throws$/);
  await worker.queue({});
  assert.equal(await worker.fetch().text(), "ok");
  assert.deepEqual(original.seen, ["queue", "fetch"]);
  assert.equal(logged.length, 1, JSON.stringify(logged));
  assert.equal(await plain.fetch().text(), "own");
  assert.equal(logged.length, 2, JSON.stringify(logged));
});

Deno.test("nameUnread names the unread settings on the first call of a handler a getter gives, and keeps the nearest of each name and the object's other values, enumerable, with nothing of Object's", async () => {
  class Handlers {
    readonly seen: string[] = [];
    readonly fetch: () => Response;
    constructor() {
      // An own handler of the name its class also has: the own one.
      this.fetch = () => new Response("own");
    }
    get queue(): (batch: unknown) => Promise<void> {
      return (_batch) => {
        this.seen.push("queue");
        return Promise.resolve();
      };
    }
  }
  Object.defineProperty(Handlers.prototype, "fetch", {
    value: () => new Response("the class's"),
  });
  const original = new Handlers();
  const logged: string[] = [];
  const worker = workerConfig(ENV).nameUnread(
    original,
    (line) => void logged.push(line),
  );
  assert.deepEqual(Object.keys(worker).sort(), ["fetch", "queue", "seen"]);
  assert.equal(worker.seen, original.seen);
  // The getter's handler alone is called: it names them.
  await worker.queue({});
  assert.deepEqual(original.seen, ["queue"]);
  assert.equal(logged.length, 1, JSON.stringify(logged));
  assert.equal(await worker.fetch().text(), "own");
  assert.equal(logged.length, 1, JSON.stringify(logged));
});
