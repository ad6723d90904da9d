/**
 * The bundled command's chunks (scripts/bundle-cli.mjs, `npm run build`): the modules every
 * subcommand loads are one chunk, "start", and dist/cli.js itself imports none of it, so that
 * `dagbot --version` loads only the small "entry" chunk.
 */
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const DIST = new URL("../../dist/", import.meta.url);
const staticImports = (file: string): string[] =>
  [
    ...readFileSync(new URL(file, DIST), "utf8").matchAll(/^(?:import|export)\s[^;]*?from\s*"\.\/([^"]+)"/gm),
  ].map((m) => m[1]!);

describe("the bundled command's chunks", () => {
  const chunks = readdirSync(DIST).filter((f) => /^chunk-.*\.js$/.test(f));
  const one = (name: string): string => {
    const found = chunks.filter((f) => f.startsWith(`chunk-${name}-`));
    expect(found, `dist/ holds one chunk-${name}-*.js (npm run build)`).toHaveLength(1);
    return found[0]!;
  };

  it("put the modules every subcommand loads in one chunk, which the table of subcommands re-exports", () => {
    const start = one("start");
    const commands = one("commands");
    expect(staticImports(commands)).toEqual([start]);
  });

  it("keep dist/cli.js to the entry chunk, for --version", () => {
    expect(staticImports("cli.js")).toEqual([one("entry")]);
    expect(staticImports(one("entry"))).toEqual([]);
  });
});
