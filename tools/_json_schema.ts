/**
 * A JSON Schema reader for the keywords Wrangler's `config-schema.json`
 * uses (`$ref` into `definitions`, `type`, `properties`,
 * `additionalProperties`, `required`, `items`, `const`, `enum`, `anyOf`,
 * `deprecated`): enough to say where a Wrangler config departs from the
 * schema its pinned package ships, not a general validator.
 *
 * @module
 */

/** A schema, or a part of one, as JSON gives it. */
export type Schema = boolean | { readonly [keyword: string]: unknown };

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") {
    return Number.isInteger(value) ? "integer" : "number";
  }
  return typeof value;
}

function typeMatches(wanted: unknown, value: unknown): boolean {
  const types = Array.isArray(wanted) ? wanted : [wanted];
  const actual = typeOf(value);
  return types.some((type) =>
    type === actual || (type === "number" && actual === "integer")
  );
}

/**
 * Where `value` departs from `schema`: one line for each, naming its path
 * (`queues.consumers[0]`) and what is wrong there; none when it conforms.
 * A key the schema marks `deprecated` counts as a departure.
 *
 * @param schema The whole schema (its `definitions` resolve `$ref`).
 * @param value The config, as JSON.
 * @returns The departures, in the order found.
 *
 * @example A consumer key Wrangler does not know
 * ```ts
 * import { schemaErrors } from "./_json_schema.ts";
 * import assert from "node:assert/strict";
 *
 * const schema = {
 *   type: "object",
 *   properties: { retry_delay: { type: "number" } },
 *   additionalProperties: false,
 * };
 * assert.deepEqual(schemaErrors(schema, { retry_delay: 120 }), []);
 * assert.deepEqual(schemaErrors(schema, { retry_delay_secs: 120 }), [
 *   'retry_delay_secs: not a key the schema has',
 * ]);
 * ```
 */
export function schemaErrors(schema: Schema, value: unknown): string[] {
  const root = typeof schema === "object" ? schema : {};
  const definitions = (root.definitions ?? {}) as Record<string, Schema>;
  const errors: string[] = [];
  check(schema, value, "", definitions, errors);
  return errors;
}

function resolve(
  schema: Schema,
  definitions: Record<string, Schema>,
): Schema {
  let current = schema;
  for (let depth = 0; depth < 32; depth++) {
    if (typeof current !== "object" || typeof current.$ref !== "string") {
      return current;
    }
    const name = /^#\/definitions\/(.+)$/.exec(current.$ref)?.[1];
    const target = name === undefined ? undefined : definitions[name];
    if (target === undefined) {
      throw new Error(
        `the schema refers to ${current.$ref}, which it does not define: check the schema file`,
      );
    }
    current = target;
  }
  throw new Error(
    "the schema's $ref chain does not end: check the schema file",
  );
}

function check(
  given: Schema,
  value: unknown,
  path: string,
  definitions: Record<string, Schema>,
  errors: string[],
): void {
  const schema = resolve(given, definitions);
  const at = path === "" ? "(top level)" : path;
  if (schema === false) {
    errors.push(`${at}: not allowed here`);
    return;
  }
  if (schema === true) return;
  if (Array.isArray(schema.anyOf)) {
    const fits = (schema.anyOf as Schema[]).some((option) => {
      const found: string[] = [];
      check(option, value, path, definitions, found);
      return found.length === 0;
    });
    if (!fits) errors.push(`${at}: fits none of the forms the schema allows`);
  }
  if ("const" in schema && schema.const !== value) {
    errors.push(`${at}: must be ${JSON.stringify(schema.const)}`);
  }
  if (Array.isArray(schema.enum) && !schema.enum.includes(value)) {
    errors.push(
      `${at}: must be one of ${
        schema.enum.map((option) => JSON.stringify(option)).join(", ")
      }`,
    );
  }
  if ("type" in schema && !typeMatches(schema.type, value)) {
    errors.push(
      `${at}: a ${typeOf(value)}, where the schema wants ${
        [schema.type].flat().join(" or ")
      }`,
    );
    return;
  }
  if (Array.isArray(value) && schema.items !== undefined) {
    value.forEach((item, index) => {
      const items = schema.items as Schema | Schema[];
      const part = Array.isArray(items) ? items[index] ?? true : items;
      check(part, item, `${path}[${index}]`, definitions, errors);
    });
  }
  if (typeOf(value) !== "object") return;
  const object = value as Record<string, unknown>;
  const properties = (schema.properties ?? {}) as Record<string, Schema>;
  for (const key of (schema.required ?? []) as string[]) {
    if (!(key in object)) errors.push(`${at}: lacks the required key ${key}`);
  }
  for (const [key, item] of Object.entries(object)) {
    const where = path === "" ? key : `${path}.${key}`;
    const property = properties[key];
    if (property === undefined) {
      const extra = schema.additionalProperties as Schema | undefined;
      if (extra === false) {
        errors.push(`${where}: not a key the schema has`);
      } else if (extra !== undefined) {
        check(extra, item, where, definitions, errors);
      }
      continue;
    }
    const resolved = resolve(property, definitions);
    if (typeof resolved === "object" && resolved.deprecated !== undefined) {
      errors.push(`${where}: deprecated (${String(resolved.deprecated)})`);
    }
    check(property, item, where, definitions, errors);
  }
}
