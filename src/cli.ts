#!/usr/bin/env -S node --max-semi-space-size=4
/** The `dagbot` entry point: the only reader of argv, and (with the node's composition root) env and signals. */
// The shebang's flag (also docker/Dockerfile's NODE_OPTIONS): V8's young generation grows to 16 MB
// semi-spaces while a node loads its modules and keeps them, idle; 4 MB ones cost an idle chat node
// 15 MB less RSS (bench/README.md, Memory). V8 reads it only at start, so it cannot be set here.
import { readFileSync } from "node:fs";
import * as nodeModule from "node:module";
import { homedir } from "node:os";
import { privateCacheDir } from "./cli/compile-cache.js";
import { tooOldNode } from "./cli/node-floor.js";
import { releaseLine } from "./domain/release.js";
import { packageFile } from "./package-files.js";

// A reader that went away (`dagbot status | head -1`) has all it wanted: end quietly, not with an
// EPIPE stack trace. Other write errors are real and keep their default (a crash with the cause).
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code !== "EPIPE") throw err;
  process.exit(typeof process.exitCode === "number" ? process.exitCode : 0);
});

/** The package this file was installed from (package.json is shipped beside dist/). */
function packageJson(): { engines?: { node?: unknown } } {
  return JSON.parse(readFileSync(packageFile("package.json"), "utf8")) as {
    engines?: { node?: unknown };
  };
}

// `dagbot --version` answers before the subcommands' modules load (they take most of a start-up:
// 0.5–0.7 s on a loaded 2-core machine against 0.15 s for node alone).
// On a Node older than package.json's engines the SQLite driver crashes as it loads (a segfault,
// no message): say what is needed instead, before anything loads it.
const args = process.argv.slice(2);
const tooOld = tooOldNode(process.versions.node, packageJson().engines?.node);
if (args.length === 1 && (args[0] === "--version" || args[0] === "-V")) {
  process.stdout.write(`${releaseLine()}\n`);
} else if (tooOld !== null) {
  process.stderr.write(`${tooOld}\n`);
  process.exitCode = 2;
} else {
  enableCompileCache();
  await runCommand();
}

/**
 * V8's code cache for the modules loaded after this (Node's compile cache): a later start reads
 * their bytecode instead of compiling them again, 40 ms of a one-task `dagbot run` even with the
 * command bundled (bench/README.md, "`dagbot run` of a one-task DAG"). An entry is keyed by the
 * file's content, so an upgrade only misses. NODE_DISABLE_COMPILE_CACHE=1 turns it off; NODE_COMPILE_CACHE
 * names another folder. Node 22.0 has no such call; it then loads as before.
 */
function enableCompileCache(): void {
  const withCache = nodeModule as unknown as { enableCompileCache?: (dir?: string) => unknown };
  if (withCache.enableCompileCache === undefined) return;
  if (process.env["NODE_COMPILE_CACHE"] !== undefined) {
    withCache.enableCompileCache();
    return;
  }
  const dir = privateCacheDir(process.env, homedir(), process.getuid?.());
  if (dir !== null) withCache.enableCompileCache(dir);
}

async function runCommand(): Promise<void> {
  const { Command, CommanderError } = await import("commander");
  const { registerCommands } = await import("./cli/commands.js");
  const program = new Command()
    .name("dagbot")
    .description("Run DAGs of tasks across a fleet of bots that share a Matrix room and a database.")
    .version(
      releaseLine(),
      "-V, --version",
      "print the release, the store schema it needs and the fleet protocol it speaks, and exit",
    )
    .showHelpAfterError()
    .exitOverride();
  registerCommands(program, args[0]);

  try {
    await program.parseAsync(process.argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // Usage errors exit 2; --help and --version exit 0 (commander already printed them).
      process.exitCode = err.exitCode === 0 ? 0 : 2;
    } else {
      process.stderr.write(`dagbot: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    }
  }
}
