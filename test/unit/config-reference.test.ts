// The configuration reference of docs/configuration.md is what the config schema says
// (docs/architecture.md §7): the committed page equals what `npm run docs` would write, and every key
// of the schema has a description there.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  REFERENCE_END,
  REFERENCE_START,
  configReference,
  withReference,
} from "../../src/config/config-reference.js";

const PAGE = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "docs", "configuration.md");

/** The table rows of the generated part: `| \`key\` | type | default | description |`. */
function rows(reference: string): string[][] {
  return reference
    .split("\n")
    .filter((line) => line.startsWith("| `"))
    .map((line) =>
      line
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((c) => c.trim()),
    );
}

describe("docs/configuration.md's reference", () => {
  it("is what the config schema generates (run `npm run docs` after changing the schema)", () => {
    const page = readFileSync(PAGE, "utf8");
    expect(withReference(page, configReference())).toBe(page);
  });

  it("a page whose reference says another default is told apart", () => {
    const page = readFileSync(PAGE, "utf8");
    const stale = page.replace(
      '| `stop_grace` | duration | `"8s"` |',
      '| `stop_grace` | duration | `"10s"` |',
    );
    expect(stale).not.toBe(page);
    expect(withReference(stale, configReference())).toBe(page);
  });

  it("describes every key, with its default as the schema has it", () => {
    const table = rows(configReference());
    expect(table.length).toBeGreaterThan(90);
    for (const [key, , , description] of table) expect(description, key).toMatch(/\w/);
    const byKey = new Map(table.map((r) => [r[0], r]));
    expect(byKey.get("`capacity`")?.[2]).toBe("`2`");
    expect(byKey.get("`task_ttl`")?.[2]).toBe('`"60s"`');
    expect(byKey.get("`listen`")?.[2]).toBe("required");
  });

  it("refuses a page without the markers rather than writing the reference nowhere", () => {
    expect(() => withReference("# a page\n", configReference())).toThrow(REFERENCE_START);
    expect(configReference().endsWith(REFERENCE_END)).toBe(true);
  });
});
