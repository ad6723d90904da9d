#!/usr/bin/env node
/**
 * `npm run build`'s step after tsc: the stores' migrations are SQL files beside the code
 * (src/adapters/<dialect>/migrations/*.sql, docs/architecture.md §11), which tsc does
 * not emit; each goes to the same place under dist/. A folder's old .sql files in dist/ go first, so
 * a file renamed or removed in src/ is not left behind to be read as a migration.
 */
import { copyFileSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const src = join(root, "src");
const dist = join(root, "dist");

/** The folders under `dir` that hold .sql files, with those files. */
function* sqlFolders(dir) {
  const entries = readdirSync(dir, { withFileTypes: true });
  const files = entries.filter((e) => e.isFile() && e.name.endsWith(".sql")).map((e) => e.name);
  if (files.length > 0) yield [dir, files];
  for (const e of entries) if (e.isDirectory()) yield* sqlFolders(join(dir, e.name));
}

let copied = 0;
for (const [folder, files] of sqlFolders(src)) {
  const to = join(dist, relative(src, folder));
  mkdirSync(to, { recursive: true });
  for (const old of readdirSync(to).filter((f) => f.endsWith(".sql"))) rmSync(join(to, old));
  for (const f of files) copyFileSync(join(folder, f), join(to, f));
  copied += files.length;
}
if (copied === 0) {
  process.stderr.write(`copy-sql: no .sql files under ${src}\n`);
  process.exit(1);
}
