#!/usr/bin/env node
/**
 * `npm run docs`: writes the configuration reference of docs/configuration.md (the part between its
 * markers) from the built config schema (dist/config/config-reference.js), so the page says what a
 * node accepts. `--check` writes nothing and exits 1 when the page differs from what it would write.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const { configReference, withReference } = await import(join(root, "dist", "config", "config-reference.js"));
const pagePath = join(root, "docs", "configuration.md");
const page = readFileSync(pagePath, "utf8");
const next = withReference(page, configReference());
if (process.argv.includes("--check")) {
  if (next !== page) {
    console.error("docs/configuration.md differs from the config schema: run `npm run docs`");
    process.exit(1);
  }
  console.log("docs/configuration.md matches the config schema");
} else if (next === page) {
  console.log("docs/configuration.md is up to date");
} else {
  writeFileSync(pagePath, next);
  console.log("docs/configuration.md: reference written from the config schema");
}
