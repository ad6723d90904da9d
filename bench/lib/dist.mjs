/** The built dagbot (dist/, from `npm run build`) as the bench sees it: module paths and the commit. */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL, URL } from "node:url";
import { join } from "node:path";
import process from "node:process";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** The built tree; DAGBOT_BENCH_DIST points at another build (an experiment's copy) for A/B runs. */
export const DIST = process.env.DAGBOT_BENCH_DIST ?? join(ROOT, "dist");
export const CLI = join(DIST, "cli.js");

/**
 * The node flags the CLI's shebang gives (`#!/usr/bin/env -S node --flag`), so that the bench starts
 * `dagbot` processes as the installed command (and the image) does; none for a build without them.
 */
export function cliNodeFlags() {
  try {
    const first = readFileSync(CLI, "utf8").split("\n", 1)[0] ?? "";
    const m = /^#!\/usr\/bin\/env -S node (.*)$/.exec(first);
    return m === null ? [] : m[1].trim().split(/\s+/);
  } catch {
    return [];
  }
}

/** Imports a module of the built tree, with a clear message when the build is missing. */
export async function load(relative) {
  const file = join(DIST, relative);
  if (!existsSync(file)) throw new Error(`bench: ${file} is missing; run \`npm run build\` first`);
  return import(pathToFileURL(file).href);
}

/** The dagbot commit the bench ran against, marked "+dirty" when tracked files differ from it. */
export function dagbotCommit() {
  try {
    const head = execFileSync("git", ["rev-parse", "--short", "HEAD"], {
      cwd: ROOT,
      encoding: "utf8",
    }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no", "--", "src"], {
      cwd: ROOT,
      encoding: "utf8",
    }).trim();
    return dirty === "" ? head : `${head}+dirty`;
  } catch {
    return "unknown";
  }
}
