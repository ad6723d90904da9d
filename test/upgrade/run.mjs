// `npm run upgrade-test`: the upgrade test (test/upgrade/) on the two Node lines it needs.
//
// The previous release 0.1.0 runs on Node 20: its better-sqlite3 12 is compiled against the
// machine's Node headers (its .npmrc says nodedir=/usr). 0.2.0, 0.3.x and today's release need Node 22 or
// later, and the test runner runs on it, so their nodes and CLI are `process.execPath` in the test
// (the previous releases are named in test/upgrade/releases.ts).
//
//   DAGBOT_UPGRADE_OLD_NODE   a Node 20 binary (default: the first `node` on the PATH, /usr/bin/node
//                             or /usr/local/bin/node that is of line 20)
//   DAGBOT_UPGRADE_NEW_NODE   a Node 22+ binary (default: this one when it is 22 or later, else the
//                             `node@24` package of the npm registry installed once under the cache)
//   DAGBOT_UPGRADE_CACHE      where the built previous release and that Node are kept
//                             (default ~/.cache/dagbot/upgrade)
//
// Arguments are passed to vitest (e.g. `npm run upgrade-test -- -t sqlite`).
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const cache = process.env.DAGBOT_UPGRADE_CACHE || join(homedir(), ".cache", "dagbot", "upgrade");

/** The major version of a Node binary, or null when it does not run. */
function majorOf(bin) {
  try {
    const v = execFileSync(bin, ["-p", "process.versions.node"], { encoding: "utf8" }).trim();
    return Number(v.split(".")[0]);
  } catch {
    return null;
  }
}

function oldNode() {
  const given = process.env.DAGBOT_UPGRADE_OLD_NODE;
  if (given) {
    if (majorOf(given) !== 20) fail(`DAGBOT_UPGRADE_OLD_NODE=${given} is not a Node 20`);
    return given;
  }
  const onPath = (process.env.PATH ?? "").split(delimiter).map((d) => join(d, "node"));
  for (const bin of [process.execPath, ...onPath, "/usr/bin/node", "/usr/local/bin/node"]) {
    if (existsSync(bin) && majorOf(bin) === 20) return bin;
  }
  fail(
    "no Node 20 found (the previous release, 0.1.0, builds its SQLite driver against the machine's " +
      "Node 20 headers and runs on it): set DAGBOT_UPGRADE_OLD_NODE to a Node 20 binary",
  );
}

function newNode() {
  const given = process.env.DAGBOT_UPGRADE_NEW_NODE;
  if (given) {
    if ((majorOf(given) ?? 0) < 22) fail(`DAGBOT_UPGRADE_NEW_NODE=${given} is not Node 22 or later`);
    return given;
  }
  if (Number(process.versions.node.split(".")[0]) >= 22) return process.execPath;
  // As .ci/run does for a Node line the machine lacks: the registry's `node` package (its platform
  // binary), installed once into the cache.
  const prefix = join(cache, "node-24");
  const bin = join(prefix, "node_modules", "node", "bin", "node");
  if (existsSync(bin) && (majorOf(bin) ?? 0) >= 24) return bin;
  console.log(
    `upgrade-test: this Node is ${process.version}; installing node@24 from the npm registry into ${prefix}`,
  );
  mkdirSync(prefix, { recursive: true });
  writeFileSync(join(prefix, "package.json"), '{ "private": true, "allowScripts": { "node": true } }\n');
  execFileSync(
    "npm",
    ["install", "--prefix", prefix, "--no-save", "--no-audit", "--no-fund", "--no-package-lock", "node@24"],
    { stdio: "inherit" },
  );
  if (!existsSync(bin)) fail(`npm installed node@24 but ${bin} is missing`);
  return bin;
}

function fail(message) {
  console.error(`upgrade-test: ${message}`);
  process.exit(2);
}

const previous = oldNode();
const current = newNode();
console.log(
  `upgrade-test: previous release on ${previous} (Node 20), today's on ${current} (${execFileSync(current, ["--version"], { encoding: "utf8" }).trim()})`,
);
const vitest = join(repo, "node_modules", "vitest", "vitest.mjs");
const child = spawn(
  current,
  [vitest, "run", "--config", join(repo, "test/upgrade/vitest.config.ts"), ...process.argv.slice(2)],
  {
    cwd: repo,
    stdio: "inherit",
    env: { ...process.env, DAGBOT_UPGRADE_OLD_NODE: previous, DAGBOT_UPGRADE_CACHE: cache },
  },
);
child.on("exit", (code, signal) => process.exit(code ?? (signal === null ? 1 : 1)));
for (const s of ["SIGINT", "SIGTERM"]) process.on(s, () => child.kill(s));
