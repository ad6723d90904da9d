/**
 * The releases the upgrade test runs side by side, as real processes:
 *
 * - the previous ones (PREVIOUS_RELEASES, the one place they are named), each built once from this
 *   repository's history into a cache folder (`git archive` of its commit, then `npm ci`, which
 *   installs its dependencies and builds its dist/) and run on the Node line it needs: 0.1.0 on
 *   Node 20 (DAGBOT_UPGRADE_OLD_NODE, set by test/upgrade/run.mjs: its better-sqlite3 compiles
 *   against the Node 20 headers), 0.2.0 to 0.8.2 on the test runner's own Node (their
 *   engines say >=22);
 * - today's, this checkout's dist/, run on the test runner's own Node (22 or later).
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = resolve(fileURLToPath(new URL("../..", import.meta.url)));

/** What the upgrade test knows of a previous release (docs/architecture.md §11). */
export interface PreviousReleaseSpec {
  /** Its commit in this repository's history. */
  commit: string;
  /** The Node it runs on: the machine's Node 20, or the test runner's own (22 or later). */
  node: "node20" | "runner";
  /** The store schema it writes and needs, per store. */
  schema: { postgres: number; sqlite: number };
  /** The fleet protocol it speaks. */
  protocol: number;
}

/**
 * The previous releases, by version: what `npm run upgrade-test` runs beside today's (docs/operations.md,
 * "Upgrading", "Checking an upgrade"). From 0.1.0 to 0.4.0, each → today's raises the fleet
 * protocol (a release whose `protocol` is below today's FLEET_PROTOCOL): 0.1.0 (protocol 1) through the upgrade
 * procedure (fleet-upgrade.test.ts); 0.2.0, 0.3.0, 0.3.1 and 0.4.0 (protocol 2, schema 17 or 19:
 * their src/domain/release.ts) through the rolling upgrade (rolling-upgrade.test.ts), where their
 * nodes finish what they run and take no new work once today's migration 20 raised the protocol to
 * 3. 0.5.0, 0.6.0, 0.7.0, 0.8.0, 0.8.1 and 0.8.2 (protocol 3, schema 21) are of today's protocol and schema: their nodes keep working beside
 * today's there, and a restarted one starts again.
 */
export const PREVIOUS_RELEASES = {
  "0.1.0": { commit: "633923a", node: "node20", schema: { postgres: 7, sqlite: 8 }, protocol: 1 },
  "0.2.0": { commit: "d42ffa5", node: "runner", schema: { postgres: 17, sqlite: 17 }, protocol: 2 },
  "0.3.0": { commit: "fd16258", node: "runner", schema: { postgres: 19, sqlite: 19 }, protocol: 2 },
  "0.3.1": { commit: "84b2431", node: "runner", schema: { postgres: 19, sqlite: 19 }, protocol: 2 },
  "0.4.0": { commit: "27adfe1", node: "runner", schema: { postgres: 19, sqlite: 19 }, protocol: 2 },
  "0.5.0": { commit: "5b7b85b", node: "runner", schema: { postgres: 21, sqlite: 21 }, protocol: 3 },
  "0.6.0": { commit: "6e5177e", node: "runner", schema: { postgres: 21, sqlite: 21 }, protocol: 3 },
  "0.7.0": { commit: "9bab0ae", node: "runner", schema: { postgres: 21, sqlite: 21 }, protocol: 3 },
  "0.8.0": { commit: "b90fd64", node: "runner", schema: { postgres: 21, sqlite: 21 }, protocol: 3 },
  "0.8.1": { commit: "e8bfe58", node: "runner", schema: { postgres: 21, sqlite: 21 }, protocol: 3 },
  "0.8.2": { commit: "a310c6b", node: "runner", schema: { postgres: 21, sqlite: 21 }, protocol: 3 },
} as const satisfies Record<string, PreviousReleaseSpec>;

export type PreviousVersion = keyof typeof PREVIOUS_RELEASES;

export interface Release {
  /** What the test calls it in messages: "0.1.0 (633923a)" or "today's (0.2.0)". */
  label: string;
  /** Its package.json version. */
  version: string;
  /**
   * What names it in file names and the actions' records (`a@0.2.0`): a previous release's version,
   * `today` for this checkout (which may carry the version of the release before it until it is
   * released).
   */
  tag: string;
  /** The Node binary it runs on. */
  node: string;
  /** Its dist/cli.js. */
  cli: string;
  /** The folder it runs from (its package). */
  dir: string;
}

function nodeMajor(bin: string): number | null {
  try {
    return Number(execFileSync(bin, ["-p", "process.versions.node"], { encoding: "utf8" }).split(".")[0]);
  } catch {
    return null;
  }
}

/** The Node 20 the previous release runs on. */
export function oldNodeBinary(): string {
  const given = process.env.DAGBOT_UPGRADE_OLD_NODE;
  const candidates =
    given !== undefined && given !== ""
      ? [given]
      : [
          ...(process.env.PATH ?? "").split(delimiter).map((d) => join(d, "node")),
          "/usr/bin/node",
          "/usr/local/bin/node",
        ];
  for (const bin of candidates) if (existsSync(bin) && nodeMajor(bin) === 20) return bin;
  throw new Error(
    `no Node 20 for the previous release (tried ${candidates.join(", ")}): run the test with ` +
      "`npm run upgrade-test`, or set DAGBOT_UPGRADE_OLD_NODE to a Node 20 binary",
  );
}

/** Today's release: this checkout's dist/ on the test runner's Node. */
export function currentRelease(): Release {
  const cli = join(REPO, "dist", "cli.js");
  if (!existsSync(cli))
    throw new Error(`${cli} is missing: \`npm run upgrade-test\` builds it (npm run build)`);
  const major = Number(process.versions.node.split(".")[0]);
  if (major < 22)
    throw new Error(
      `the test runs on Node ${process.version}, but today's release needs Node 22 or later: ` +
        "run it with `npm run upgrade-test`, which finds or installs one",
    );
  const version = (JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string })
    .version;
  return { label: `today's (${version})`, version, tag: "today", node: process.execPath, cli, dir: REPO };
}

export function cacheRoot(): string {
  const given = process.env.DAGBOT_UPGRADE_CACHE;
  return given !== undefined && given !== "" ? given : join(homedir(), ".cache", "dagbot", "upgrade");
}

/**
 * A previous release, built into `<cache>/<commit>` the first time (minutes for 0.1.0, whose npm ci
 * compiles better-sqlite3 from source) and found there afterwards. A build that fails leaves its log
 * in `<cache>/<commit>.log` and says so.
 */
export function previousRelease(version: PreviousVersion): Release {
  const spec: PreviousReleaseSpec = PREVIOUS_RELEASES[version];
  const node = spec.node === "node20" ? oldNodeBinary() : process.execPath;
  const full = git(["rev-parse", "--verify", `${spec.commit}^{commit}`], spec.commit).trim();
  const dir = join(cacheRoot(), full);
  const stamp = join(dir, ".dagbot-upgrade-built");
  const cli = join(dir, "dist", "cli.js");
  const release: Release = { label: `${version} (${spec.commit})`, version, tag: version, node, cli, dir };
  if (existsSync(stamp) && existsSync(cli)) return checkEngines(release);

  mkdirSync(cacheRoot(), { recursive: true });
  const building = `${dir}.building`;
  const log = `${dir}.log`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(building, { recursive: true });
  const started = Date.now();
  // git archive: the commit's tree without a worktree entry in this repository.
  const tar = join(cacheRoot(), `${full}.tar`);
  git(["archive", "--format=tar", "-o", tar, full], spec.commit);
  execFileSync("tar", ["-x", "-f", tar, "-C", building]);
  rmSync(tar, { force: true });
  // Built by the Node it runs on (0.1.0: Node 20), checked against its engines first; npm and the
  // scripts it runs (node-gyp, tsc) on that Node: its bin first on the PATH. None of the npm_*
  // variables of an `npm run upgrade-test` around us (its prefix, its package): the build is the old
  // checkout's own `npm ci`, with its own .npmrc (0.1.0's: nodedir=/usr, the Node 20 headers).
  checkEngines({ ...release, dir: building });
  const env: NodeJS.ProcessEnv = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_")),
  );
  env.PATH = `${dirname(node)}${delimiter}${process.env.PATH ?? ""}`;
  const npm = spawnSync("npm", ["ci", "--no-audit", "--no-fund"], {
    cwd: building,
    env,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
    timeout: 900_000,
  });
  writeFileSync(log, `${npm.stdout ?? ""}\n${npm.stderr ?? ""}`);
  if (npm.status !== 0 || !existsSync(join(building, "dist", "cli.js"))) {
    const tail = `${npm.stdout ?? ""}\n${npm.stderr ?? ""}`.split("\n").slice(-30).join("\n");
    throw new Error(
      `building the previous release ${version} (${spec.commit}) failed (npm ci exit ${npm.status}, ${npm.error?.message ?? "no spawn error"}); ` +
        `log: ${log}; folder kept: ${building}\n${tail}`,
    );
  }
  rmSync(dir, { recursive: true, force: true });
  renameSync(building, dir);
  writeFileSync(stamp, `${full} built in ${Math.round((Date.now() - started) / 1000)} s on ${node}\n`);
  return release;
}

/** Refuses a Node the release's package.json `engines` exclude (`>=22`), before running it. */
function checkEngines(release: Release): Release {
  const pkg = JSON.parse(readFileSync(join(release.dir, "package.json"), "utf8")) as {
    engines?: { node?: string };
  };
  const min = /^>=\s*(\d+)/.exec(pkg.engines?.node ?? "")?.[1];
  const major = nodeMajor(release.node);
  if (min !== undefined && (major === null || major < Number(min)))
    throw new Error(
      `${release.label} needs Node ${pkg.engines?.node ?? "?"} (its package.json engines), and ${release.node} is Node ${major ?? "?"}`,
    );
  return release;
}

function git(args: string[], commit: string): string {
  const r = spawnSync("git", args, { cwd: REPO, encoding: "utf8" });
  if (r.status !== 0)
    throw new Error(
      `git ${args.join(" ")} failed: ${r.stderr.trim()} (the upgrade test builds the previous release ` +
        `${commit} from this repository's history; a shallow clone lacks it: git fetch --unshallow)`,
    );
  return r.stdout;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The command line, for messages. */
  line: string;
}

/** Runs `dagbot ARGS` of a release to its end (killed after timeoutMs, which fails the test with what it printed). */
export function runCli(
  release: Release,
  args: string[],
  options: { cwd: string; timeoutMs?: number; env?: Record<string, string> },
): Promise<CliResult> {
  const line = `${release.label}: dagbot ${args.join(" ")}`;
  const timeoutMs = options.timeoutMs ?? 60_000;
  return new Promise((done, fail) => {
    const child = spawn(release.node, [release.cli, ...args], {
      cwd: options.cwd,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, DAGBOT_LOG_LEVEL: "warn", NO_COLOR: "1", ...options.env },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      fail(
        new Error(
          `${line} did not end within ${timeoutMs} ms (a command lost?)\nstdout: ${stdout}\nstderr: ${stderr}`,
        ),
      );
    }, timeoutMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr, line });
    });
  });
}

/** What a command printed, for failure messages. */
export function said(r: CliResult): string {
  return `${r.line} (exit ${r.code})\nstdout: ${r.stdout.trim()}\nstderr: ${r.stderr.trim()}`;
}

export interface NodeProcess {
  nodeId: string;
  release: Release;
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  logPath: string;
  /** The node's log so far (its JSON lines on stderr and whatever it printed). */
  log(): string;
  running(): boolean;
}

/** Starts `dagbot node --config FILE` of a release; its output goes to `<dir>/<nodeId>.log`. */
export function startNode(release: Release, dir: string, configPath: string, nodeId: string): NodeProcess {
  const logPath = join(dir, `${nodeId}-${release.tag}.log`);
  const log = createWriteStream(logPath, { flags: "a" });
  const child = spawn(release.node, [release.cli, "node", "--config", configPath], {
    cwd: dir,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, DAGBOT_LOG_LEVEL: "debug", NO_COLOR: "1" },
  });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => {
    child.once("exit", (code, signal) => done({ code, signal }));
  });
  return {
    nodeId,
    release,
    child,
    exited,
    logPath,
    log: () => (existsSync(logPath) ? readFileSync(logPath, "utf8") : ""),
    running: () => child.exitCode === null && child.signalCode === null,
  };
}

/** Kills every node still running (SIGKILL) and waits for the exits: the test's cleanup. */
export async function killAll(nodes: readonly NodeProcess[]): Promise<void> {
  for (const n of nodes) if (n.running()) n.child.kill("SIGKILL");
  await Promise.all(nodes.map((n) => n.exited));
}
