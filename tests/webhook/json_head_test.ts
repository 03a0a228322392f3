/**
 * The scan of the first bytes of a JSON object too large to read whole:
 * only its top-level fields, only whole tokens.
 *
 * @module
 */

import assert from "node:assert/strict";
import { topLevelFields } from "../../webhook/_json_head.ts";

const fields = (text: string, open?: string) => {
  const { fields, cut } = topLevelFields(text, open);
  return { fields: Object.fromEntries(fields), cut };
};

Deno.test("topLevelFields reads the whole top-level scalars of an object's first bytes, and the string its text ends inside when its key is the open one", () => {
  const whole =
    '{"status":489,"header":{"sourceMessageId":["msg_header"]},"body":"eyJ9","retried":2,"sourceMessageId":"msg_1","ok":true,"sourceBody":"eyJpbnRlbnRJZCI6InBpXzAwMDIi';
  assert.deepEqual(fields(whole, "sourceBody"), {
    fields: {
      status: 489,
      body: "eyJ9",
      retried: 2,
      sourceMessageId: "msg_1",
      ok: true,
    },
    cut: "eyJpbnRlbnRJZCI6InBpXzAwMDIi",
  });
  // Not the open key: no cut.
  assert.equal(fields(whole).cut, undefined);
  // A number the text ends in could go on; a key cut is no key.
  assert.deepEqual(fields('{"a":"x","retried":1').fields, { a: "x" });
  assert.deepEqual(fields('{"a":"x","sourceMess').fields, { a: "x" });
  assert.deepEqual(fields('{"a":"x","b":').fields, { a: "x" });
  // Escapes are read as JSON reads them, and a cut string with one is not given.
  assert.deepEqual(
    fields(
      '{"source\\u004dessageId":"m\\"1","sourceBody":"ab\\/c',
      "sourceBody",
    ),
    { fields: { sourceMessageId: 'm"1' }, cut: undefined },
  );
});

Deno.test("topLevelFields never takes a nested field, nor a string's contents, for a top-level one, and leaves out a key seen with two values", () => {
  // Inside a nested object or array, and inside strings that hold quotes and braces.
  const nested =
    '{"sourceHeader":{"X":["\\"}, \\"sourceMessageId\\":\\"msg_evil\\""],"sourceMessageId":"msg_evil"},"list":[{"sourceMessageId":"msg_evil"}],"note":"\\"sourceMessageId\\":\\"msg_evil\\"","sourceMessageId":"msg_1"}';
  assert.deepEqual(fields(nested).fields, {
    note: '"sourceMessageId":"msg_evil"',
    sourceMessageId: "msg_1",
  });
  // Cut inside a nested object: nothing after it is read.
  assert.deepEqual(
    fields('{"a":1,"sourceHeader":{"sourceMessageId":"msg_evil"').fields,
    { a: 1 },
  );
  // Twice, with values that differ (or once nested): neither is taken.
  assert.deepEqual(
    fields('{"sourceMessageId":"msg_1","sourceMessageId":"msg_2","a":1,"a":1}')
      .fields,
    { a: 1 },
  );
  assert.deepEqual(
    fields('{"sourceMessageId":"msg_1","sourceMessageId":{"x":1}}').fields,
    {},
  );
  assert.deepEqual(
    fields('{"sourceBody":"eyJ9","sourceBody":"eyJp', "sourceBody"),
    { fields: {}, cut: undefined },
  );
  // Not an object, or not JSON: nothing.
  for (const text of ['["sourceMessageId","msg_1"]', "sourceMessageId", ""]) {
    assert.deepEqual(fields(text).fields, {}, text);
  }
  assert.deepEqual(fields('{"a":"x" "b":2}').fields, { a: "x" });
  assert.deepEqual(fields('{"a":1 "b":2}').fields, {}); // where 1 ends is not seen
  assert.deepEqual(fields('{"a":tru,"b":2}').fields, {});
});

Deno.test("topLevelFields reads null as a value, and stops at the object's end and at a key or string JSON.parse refuses, or a key with no colon", () => {
  // null is a whole value: the fields after it are read.
  assert.deepEqual(
    fields('{"header":null,"sourceMessageId":"msg_1","retried":0}').fields,
    { header: null, sourceMessageId: "msg_1", retried: 0 },
  );
  // Past the object's end, nothing is its field.
  assert.deepEqual(fields('{"a":1}"sourceMessageId":"msg_2"').fields, {
    a: 1,
  });
  // An array's strings are no keys, whatever follows them.
  assert.deepEqual(fields('["sourceMessageId":"msg_1"]').fields, {});
  // A key, or a string value, with an escape JSON does not have is not
  // JSON: the scan stops there.
  assert.deepEqual(fields('{"a":1,"b\\x":2,"c":3}').fields, { a: 1 });
  assert.deepEqual(fields('{"a":1,"b":"\\x","c":3}').fields, { a: 1 });
  // JSON's whitespace (tabs, line breaks) anywhere between tokens, and a
  // negative number, are read as JSON reads them.
  assert.deepEqual(
    fields('{\n\t"a" :\r\n-1 ,\n\t"sourceMessageId":\t"msg_1"\n}').fields,
    { a: -1, sourceMessageId: "msg_1" },
  );
  // A key followed by anything but a colon is not JSON either.
  assert.deepEqual(fields('{"a":1,"b"=2,"c":3}').fields, { a: 1 });
});
