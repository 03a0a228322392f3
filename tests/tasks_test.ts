import assert from "node:assert/strict";
import config from "../deno.json" with { type: "json" };

Deno.test("deno.json gives every task a command and a one-line description, which deno task lists", () => {
  const tasks: Record<string, unknown> = config.tasks;
  for (const [name, task] of Object.entries(tasks)) {
    assert.equal(typeof task, "object", `${name} is a bare command`);
    const { command, description } = task as Record<string, unknown>;
    assert.equal(typeof command, "string", name);
    assert.equal(typeof description, "string", name);
    assert.match(description as string, /^[^\n]{10,80}$/, name);
  }
});
