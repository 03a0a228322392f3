/**
 * `deno task tsc-options-check` fails where docs/api.md#from-node's "but
 * not under …" no longer holds: an option under which the package's
 * sources compile after all, an error of an option found only in the
 * docs' services, or an error no option of the sentence gives. The tool
 * itself runs only on the repository as it is, where the sentence holds,
 * so none of its refusals could be seen to fail; these feed its verdict
 * what `tsc` would say.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  OPTION_ERRORS,
  tscOptionsVerdict,
} from "../../tools/tsc_options_check.ts";

const options = Object.keys(OPTION_ERRORS);
/** One error per option, in the package's sources, as tsc writes them. */
const ownErrors = [
  "webhook/app.ts(12,3): error TS4111: Property 'x' comes from an index signature, so it must be accessed with ['x'].",
  "policy/decide.ts(40,10): error TS7030: Not all code paths return a value.",
  "store/kv.ts(7,1): error TS1294: This syntax is not allowed when 'erasableSyntaxOnly' is enabled.",
];
const service = "docs/service.ts";

Deno.test("tscOptionsVerdict() holds the sentence where each option gives its own error in the package's sources and nothing else fails", () => {
  const verdict = tscOptionsVerdict(options, ownErrors, [service]);
  assert.equal(verdict.ok, true, verdict.lines.join("\n"));
  assert.match(verdict.lines.at(-1)!, /^tsc-options-check: as docs\/api\.md/);
});

Deno.test("tscOptionsVerdict() fails where the sources compile under an option the sentence names", () => {
  for (const [i, option] of options.entries()) {
    const verdict = tscOptionsVerdict(
      options,
      ownErrors.filter((_, j) => j !== i),
      [service],
    );
    assert.equal(verdict.ok, false, option);
    assert.ok(
      verdict.lines.includes(
        `tsc-options-check: FAIL the package's sources compile under ${option} (no ${
          OPTION_ERRORS[option]
        } in them), where docs/api.md#from-node says they do not: move it to the options they compile under`,
      ),
      verdict.lines.join("\n"),
    );
  }
});

Deno.test("tscOptionsVerdict() does not count an option's error that only the docs' services give", () => {
  const [, ...rest] = ownErrors;
  const verdict = tscOptionsVerdict(options, [
    `${service}(3,1): error TS4111: Property 'x' comes from an index signature, so it must be accessed with ['x'].`,
    ...rest,
  ], [service]);
  assert.equal(verdict.ok, false);
  assert.match(
    verdict.lines.join("\n"),
    /FAIL the package's sources compile under noPropertyAccessFromIndexSignature \(no TS4111 in them\)/,
  );
});

Deno.test("tscOptionsVerdict() fails on an error no option of the sentence gives, in the sources or the services", () => {
  for (const file of ["mod.ts", service]) {
    const other =
      `${file}(1,1): error TS2322: Type 'string' is not assignable to type 'number'.`;
    const verdict = tscOptionsVerdict(options, [...ownErrors, other], [
      service,
    ]);
    assert.equal(verdict.ok, false, file);
    assert.ok(
      verdict.lines.includes(
        `tsc-options-check: FAIL 1 error(s) no option of the sentence gives, so the sources fail for another reason too (tests/node/node_types_test.ts shows it alone):\n${other}`,
      ),
      verdict.lines.join("\n"),
    );
  }
});
