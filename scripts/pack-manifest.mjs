#!/usr/bin/env node
/**
 * `npm pack`'s prepack and postpack (docs/getting-started.md, "Install from the package"): the packed package.json
 * must not carry `prepare`, the build of a checkout (`npm install` in the repository runs it; the
 * tarball already holds dist/). npm would run it for a tarball installed from a file, where the
 * TypeScript it needs is absent, and warns that it is not covered by `allowScripts`. `disable`
 * renames it to `_prepare` before npm reads the manifest to pack; `enable` renames it back. The same
 * move husky's `pinst` makes for a postinstall.
 */
import { readFileSync, writeFileSync } from "node:fs";

const [mode] = process.argv.slice(2);
const file = new URL("../package.json", import.meta.url);
const text = readFileSync(file, "utf8");
const pkg = JSON.parse(text);
const [from, to] =
  mode === "disable" ? ["prepare", "_prepare"] : mode === "enable" ? ["_prepare", "prepare"] : [];
if (from === undefined) {
  process.stderr.write("usage: node scripts/pack-manifest.mjs disable|enable\n");
  process.exit(2);
}
if (pkg.scripts?.[from] !== undefined) {
  // Keep the key's place and the file's formatting: rename in place.
  pkg.scripts = Object.fromEntries(Object.entries(pkg.scripts).map(([k, v]) => [k === from ? to : k, v]));
  writeFileSync(file, `${JSON.stringify(pkg, null, 2)}\n`);
}
