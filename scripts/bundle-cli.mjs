#!/usr/bin/env node
/**
 * `npm run build`'s last step: bundles the `dagbot` command (dist/cli.js as tsc wrote it, every
 * module of dagbot's it reaches, and the small pure-JavaScript packages in BUNDLED) into
 * dist/cli.js and a few chunks beside it (dist/chunk-*.js).
 * Loading some 400 modules one by one was the largest part of a short command's start
 * (bench/README.md, "`dagbot run` of a one-task DAG"); the modules every subcommand loads are one
 * chunk ("start"), and the subcommands' dynamic imports stay chunks of their own, loaded when
 * used. Other packages (the drivers, the SDKs, those that start worker threads or carry native
 * code) stay in node_modules. The modules under dist/ stay too:
 * the tests and the bench import them. A module finds the files shipped beside it through
 * src/package-files.ts, which works from the chunks at dist/'s top as from its own folder.
 */
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { rolldown } from "rolldown";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
const entry = join(dist, "cli.js");
const MARK = "// dagbot: bundled by scripts/bundle-cli.mjs";
// Packages bundled with the command: plain JavaScript with no files of their own to find, no
// native code and no worker threads (commander, the one CommonJS one, gets a require of its own).
const BUNDLED = new Set(["zod", "commander", "smol-toml", "croner"]);

if (readFileSync(entry, "utf8").includes(MARK)) {
  throw new Error("bundle-cli: dist/cli.js is already a bundle; run tsc (npm run build) first");
}

/** The modules of dagbot's that `file` (under dist/) imports statically, to the last import, and itself. */
function staticImports(file, found = new Set()) {
  if (found.has(file)) return found;
  found.add(file);
  const text = readFileSync(file, "utf8");
  for (const m of text.matchAll(
    /^(?:import|export)\s(?!type\s)[^;]*?from\s*"(\.[^"]+)"|^import\s*"(\.[^"]+)"/gm,
  ))
    staticImports(join(dirname(file), m[1] ?? m[2]), found);
  return found;
}
/**
 * The modules every subcommand loads: what dist/cli/commands.js (the table of subcommands) imports
 * statically, with the packages bundled beside them, go into one chunk, "start": each chunk is a
 * module Node resolves, reads and links on its own. What dist/cli.js itself imports stays out of
 * it, so that `dagbot --version` still loads none of it.
 */
const ENTRY_ONLY = staticImports(entry);
const START = new Set([...staticImports(join(dist, "cli", "commands.js"))].filter((f) => !ENTRY_ONLY.has(f)));
const BUNDLED_FILE = new RegExp(`[\\\\/]node_modules[\\\\/](${[...BUNDLED].join("|")})[\\\\/]`);
const packageOf = (id) => (id.startsWith("@") ? id.split("/").slice(0, 2).join("/") : id.split("/")[0]);
const bundle = await rolldown({
  input: entry,
  platform: "node",
  external: (id) => {
    if (id.startsWith(".") || id.startsWith("/") || id.startsWith("\0")) return false;
    if (id.startsWith("node:")) return true;
    return !BUNDLED.has(packageOf(id));
  },
});
let written;
try {
  written = await bundle.write({
    dir: dist,
    format: "esm",
    entryFileNames: "cli.js",
    chunkFileNames: "chunk-[name]-[hash].js",
    postBanner: MARK,
    codeSplitting: {
      groups: [
        // First, so that "start" (which takes its modules' imports too) leaves them out.
        { name: "entry", test: (id) => ENTRY_ONLY.has(id) && id !== entry, priority: 2 },
        { name: "start", test: (id) => START.has(id) || BUNDLED_FILE.test(id), priority: 1 },
      ],
    },
  });
} finally {
  await bundle.close();
}
// tsc's map of dist/cli.js describes the file the bundle replaced.
rmSync(`${entry}.map`, { force: true });
const fresh = new Set(written.output.map((o) => o.fileName));
for (const f of readdirSync(dist)) if (f.startsWith("chunk-") && !fresh.has(f)) rmSync(join(dist, f));
console.log(`bundle-cli: dist/cli.js and ${fresh.size - 1} chunks`);
