/**
 * `deno task deploy-check` fails where the docs no longer say what it runs
 * (Deno 2.5.0, by deploy-check, beside `tests/deploy_run_test.ts`), or
 * where `Deno.openKv(url)` on that Deno does other than docs/routes.md
 * says. The tool itself runs only on the repository as it is, where both
 * hold, so none of its refusals could be seen to fail; these feed them
 * what a doc or the probe would say.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  DEPLOY_DENO_VERSION,
  docUnsaid,
  openingDiffers,
} from "../../tools/deploy_check.ts";

const TEST = "`tests/deploy_run_test.ts`";

Deno.test("docUnsaid() holds the docs as they are, and a paragraph naming the version across a line break", async () => {
  for (const doc of ["docs/routes.md", "docs/reliability.md"]) {
    const text = await Deno.readTextFile(
      new URL(`../../${doc}`, import.meta.url),
    );
    assert.equal(docUnsaid(doc, text, DEPLOY_DENO_VERSION), undefined, doc);
  }
  assert.equal(
    docUnsaid(
      "d.md",
      `Intro.\n\nmain.ts runs on Deno\n${DEPLOY_DENO_VERSION} (${TEST}, by deno task deploy-check).\n\nAfter.`,
      DEPLOY_DENO_VERSION,
    ),
    undefined,
  );
});

Deno.test("docUnsaid() fails a doc that no longer cites the test, or whose paragraph citing it names another Deno or not deploy-check", () => {
  const v = DEPLOY_DENO_VERSION;
  assert.equal(
    docUnsaid("d.md", `main.ts runs on Deno ${v} (deploy-check).`, v),
    "d.md no longer cites `tests/deploy_run_test.ts`",
  );
  const unsaid =
    "d.md's paragraph citing `tests/deploy_run_test.ts` does not name Deno " +
    `${v} and deploy-check`;
  for (
    const paragraph of [
      `main.ts runs on Deno 2.4.0 (${TEST}, by deploy-check).`,
      `main.ts runs on Deno ${v} (${TEST}).`,
      // The version in another paragraph does not count.
      `Deno ${v}, deploy-check.\n\nmain.ts runs there (${TEST}).`,
    ]
  ) {
    assert.equal(docUnsaid("d.md", paragraph, v), unsaid, paragraph);
  }
});

Deno.test("openingDiffers() holds the opening docs/routes.md describes, and fails another Deno, a rejected opening, a request before it resolved, or a request past the metadata endpoint", () => {
  const v = DEPLOY_DENO_VERSION;
  const said = {
    deno: v,
    opened: "resolved",
    atOpen: 0,
    requests: ['POST /kv {"supportedVersions":[1,2,3]}'],
  };
  assert.equal(openingDiffers(said, v, "probe"), undefined);
  assert.equal(
    openingDiffers({ ...said, requests: [] }, v, "probe"),
    undefined,
  );
  assert.equal(
    openingDiffers({ ...said, deno: "2.9.6" }, v, "probe"),
    "probe ran on Deno 2.9.6",
  );
  for (
    const differs of [
      { ...said, opened: "rejected: KV Connect refused" },
      { ...said, atOpen: 1 },
      { ...said, requests: [...said.requests, "POST /kv/snapshot_read {}"] },
    ]
  ) {
    assert.equal(
      openingDiffers(differs, v, "probe"),
      `probe: ${
        JSON.stringify(differs)
      }, where docs/routes.md says the opening resolves before any request, then asks only the metadata endpoint, and a refusal there does not reject it: say there what Deno ${v} does`,
    );
  }
});
