import assert from "node:assert/strict";
import { Sweep } from "../../store/_sweep.ts";

Deno.test("Sweep passes over a long-lived entry instead of stopping at it", () => {
  const map = new Map<string, { expiresAt: number }>();
  const sweep = new Sweep(map);
  // One record that lives a day, then one write a second, each living a minute.
  map.set("long", { expiresAt: 86_400_000 });
  for (let t = 0; t < 7_200_000; t += 1000) {
    map.set(`k${t}`, { expiresAt: t + 60_000 });
    sweep.run(t);
  }
  // Live: the long one and the last minute's 60; a round's worth more at most.
  assert.ok(map.has("long"));
  assert.ok(map.size <= 61 + 61 / 3, `size ${map.size}`);
});

Deno.test("Sweep goes round the map and deletes every expired entry within a round", () => {
  const map = new Map<string, { expiresAt: number }>();
  const sweep = new Sweep(map);
  for (let i = 0; i < 40; i++) map.set(`k${i}`, { expiresAt: i % 2 ? 10 : 1 });
  for (let i = 0; i < 10; i++) sweep.run(5);
  assert.equal(map.size, 20);
  assert.ok([...map.values()].every((value) => value.expiresAt === 10));
  for (let i = 0; i < 5; i++) sweep.run(10);
  assert.equal(map.size, 0);
  // An empty map: nothing to look at, no endless loop.
  sweep.run(10);
  assert.equal(map.size, 0);
});
