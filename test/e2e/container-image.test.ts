// The container image without a container engine: the final stage of docker/Dockerfile is read
// (its WORKDIR, COPY lines, ENTRYPOINT and HEALTHCHECK), exactly the files it copies are assembled
// into an empty folder standing for /app, and the entrypoint runs from there with nothing else:
// `--version`, `validate`, the bot's modules loading for `start`, a `node` on SQLite that runs a DAG
// and which the image's HEALTHCHECK command finds healthy (and unhealthy once stopped), and `demo`
// saying it cannot run there. What cannot run without an engine is read: the pinned base and
// Synapse images, and compose publishing ports on 127.0.0.1 only.
//
// Where a COPY takes from the build stage, the build stage's /app is this checkout after
// `npm ci && npm run build && npm prune --omit=dev`: `dist` is the checkout's build, and
// `node_modules` is the checkout's node_modules cut to what `npm prune --omit=dev` keeps, i.e. the
// installed packages (npm's record of them, node_modules/.package-lock.json) not marked `dev` (hard
// links, so it takes well under a second; `npm ci --omit=dev` would need the network). The test
// checks that the build stage does run those commands, so the stand-in cannot silently drift from
// the image.
import { spawn } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, posix } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store-factory.js";
import { DEFAULT_STORE } from "../../src/config/store-location.js";
import type { CliResult } from "../support/engine-cluster.js";
import { REPO, requireBuild } from "../support/engine-cluster.js";
import { decodePng } from "../support/png.js";
import { waitFor } from "../support/store-wait.js";

interface Instruction {
  op: string;
  args: string;
}

/** The Dockerfile's instructions with continuations joined and comments dropped, split into stages. */
function readStages(text: string): Instruction[][] {
  const joined = text.replace(/\\\r?\n/g, " ");
  const stages: Instruction[][] = [];
  for (const raw of joined.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([A-Za-z]+)\s+(.*)$/.exec(line);
    if (m === null) throw new Error(`cannot read Dockerfile line: ${line}`);
    const op = m[1]!.toUpperCase();
    if (op === "FROM") stages.push([]);
    const stage = stages[stages.length - 1];
    if (stage === undefined) throw new Error(`instruction before FROM: ${line}`);
    stage.push({ op, args: m[2]! });
  }
  return stages;
}

interface CopyLine {
  from: string | null;
  sources: string[];
  dest: string;
}

function parseCopy(args: string): CopyLine {
  const words = args.trim().startsWith("[") ? (JSON.parse(args) as string[]) : args.trim().split(/\s+/);
  let from: string | null = null;
  const rest: string[] = [];
  for (const w of words) {
    if (w.startsWith("--from=")) from = w.slice("--from=".length);
    else if (w.startsWith("--chown=") || w.startsWith("--chmod=") || w === "--link") continue;
    else if (w.startsWith("--")) throw new Error(`COPY flag this test does not model: ${w}`);
    else rest.push(w);
  }
  const dest = rest.pop();
  if (dest === undefined || rest.length === 0) throw new Error(`COPY without source or destination: ${args}`);
  if (rest.some((s) => /[*?[]/.test(s))) throw new Error(`COPY wildcard this test does not model: ${args}`);
  return { from, sources: rest, dest };
}

/** `ENTRYPOINT ["node", "/app/dist/cli.js"]` → its argv. */
function parseExecForm(args: string): string[] {
  const argv = JSON.parse(args) as unknown;
  if (!Array.isArray(argv) || argv.some((a) => typeof a !== "string"))
    throw new Error(`not exec form: ${args}`);
  return argv as string[];
}

/** Hard-links (or copies, across file systems) a tree; `skipNodeModules` leaves nested node_modules out. */
function linkTree(src: string, dst: string, skipNodeModules: boolean): void {
  const st = lstatSync(src);
  if (st.isSymbolicLink()) {
    mkdirSync(dirname(dst), { recursive: true });
    symlinkSync(readlinkSync(src), dst);
    return;
  }
  if (st.isDirectory()) {
    mkdirSync(dst, { recursive: true });
    for (const name of readdirSync(src)) {
      if (skipNodeModules && name === "node_modules") continue;
      linkTree(join(src, name), join(dst, name), skipNodeModules);
    }
    return;
  }
  mkdirSync(dirname(dst), { recursive: true });
  try {
    linkSync(src, dst);
  } catch {
    copyFileSync(src, dst);
  }
}

/** What `npm prune --omit=dev` leaves: every installed package not marked dev, each without its nested packages. */
function productionNodeModules(dst: string): number {
  // npm's record of this node_modules (what `npm prune` works from), not package-lock.json: a
  // node_modules installed from an older lock is cut by what it holds.
  const lock = JSON.parse(readFileSync(join(REPO, "node_modules", ".package-lock.json"), "utf8")) as {
    packages: Record<string, { dev?: boolean; link?: boolean; optional?: boolean }>;
  };
  let count = 0;
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (!path.startsWith("node_modules/") || entry.dev === true) continue;
    const src = join(REPO, path);
    if (!existsSync(src) && entry.optional === true) continue; // not installed on this platform
    linkTree(src, join(dst, path.slice("node_modules/".length)), entry.link !== true);
    count += 1;
  }
  return count;
}

/** `HEALTHCHECK [--option=value ...] CMD ["node", ...]` → its options and the command's argv. */
function parseHealthcheck(args: string): { options: Record<string, string>; argv: string[] } {
  const m = /^((?:--[a-z-]+=\S+\s+)*)CMD\s+(\[.*\])$/.exec(args.trim());
  if (m === null) throw new Error(`HEALTHCHECK this test does not model (exec-form CMD expected): ${args}`);
  const options: Record<string, string> = {};
  for (const opt of m[1]!
    .trim()
    .split(/\s+/)
    .filter((w) => w !== "")) {
    const [key, value] = opt.slice(2).split("=");
    options[key!] = value!;
  }
  return { options, argv: parseExecForm(m[2]!) };
}

/** The init the image runs as PID 1 in front of node (docker/Dockerfile's ENTRYPOINT). */
const INIT = ["/usr/bin/tini", "--"];

interface Image {
  app: string;
  /** What runs under the init: `node /app/dist/cli.js`. */
  entrypoint: string[];
  /** The ENTRYPOINT as written, the init included. */
  fullEntrypoint: string[];
  /** The final stage's RUN lines and its USER. */
  runs: string[];
  user: string | null;
  healthcheck: { options: Record<string, string>; argv: string[] } | null;
  /** Each stage's FROM image (the `AS name` left out). */
  bases: string[];
  copied: string[];
}

/** Builds the image's /app (and anything else it copies) under `root`; returns what the final stage runs. */
function assembleImage(root: string): Image {
  const stages = readStages(readFileSync(join(REPO, "docker", "Dockerfile"), "utf8"));
  const final = stages[stages.length - 1];
  const build = stages[0];
  if (final === undefined || build === undefined || stages.length < 2)
    throw new Error("expected a build and a final stage");
  const buildRuns = build
    .filter((i) => i.op === "RUN")
    .map((i) => i.args)
    .join("\n");
  // The stand-ins below for the build stage's /app hold only if it builds and prunes like this.
  expect(buildRuns).toContain("npm ci");
  expect(buildRuns).toContain("npm run build");
  expect(buildRuns).toContain("npm prune --omit=dev");
  // `npm run build` runs scripts of the checkout (the copy of the migrations' SQL files, among
  // them): the build stage must have copied each of them in before it runs.
  const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as {
    scripts: Record<string, string>;
  };
  const buildCopies = build.filter((i) => i.op === "COPY").flatMap((i) => parseCopy(i.args).sources);
  for (const script of pkg.scripts["build"]!.match(/scripts\/[\w.-]+/g) ?? [])
    expect(
      buildCopies.some((s) => script === s || script.startsWith(`${s.replace(/\/$/, "")}/`)),
      `the build stage copies ${script} before npm run build`,
    ).toBe(true);
  const buildWorkdir = build
    .filter((i) => i.op === "WORKDIR")
    .pop()
    ?.args.trim();
  expect(buildWorkdir).toBe("/app");

  let workdir = "/";
  let entrypoint: string[] | null = null;
  const runs: string[] = [];
  let user: string | null = null;
  let healthcheck: Image["healthcheck"] = null;
  const bases = stages.map((stage) => stage[0]!.args.trim().split(/\s+/)[0]!);
  const copied: string[] = [];
  const inRoot = (p: string): string => join(root, p);
  for (const ins of final) {
    if (ins.op === "WORKDIR") workdir = posix.resolve(workdir, ins.args.trim());
    if (ins.op === "ENTRYPOINT") entrypoint = parseExecForm(ins.args);
    if (ins.op === "RUN") runs.push(ins.args);
    if (ins.op === "USER") user = ins.args.trim();
    if (ins.op === "HEALTHCHECK") healthcheck = parseHealthcheck(ins.args);
    if (ins.op !== "COPY" && ins.op !== "ADD") continue;
    if (ins.op === "ADD") throw new Error("ADD in the final stage: this test models COPY only");
    const copy = parseCopy(ins.args);
    const dest = posix.resolve(workdir, copy.dest);
    for (const source of copy.sources) {
      const name = posix.basename(source.replace(/\/+$/, ""));
      // `COPY a b ./` puts each source under the folder; `COPY dir ./dir` names the target.
      const target = copy.dest.endsWith("/") ? posix.join(dest, name) : dest;
      if (copy.from === null) {
        linkTree(join(REPO, source), inRoot(target), false);
      } else {
        if (copy.from !== "build") throw new Error(`COPY --from=${copy.from}: unknown stage`);
        const rel = posix.relative("/app", posix.resolve("/app", source));
        if (rel.startsWith(".."))
          throw new Error(`COPY --from=build ${source}: outside the build stage's /app`);
        if (rel === "node_modules") productionNodeModules(inRoot(target));
        else if (rel === "dist") linkTree(join(REPO, "dist"), inRoot(target), false);
        else
          throw new Error(
            `COPY --from=build ${source}: the test does not know what the build stage holds there`,
          );
      }
      copied.push(target);
    }
  }
  if (entrypoint === null) throw new Error("the final stage has no ENTRYPOINT");
  const full: string[] = entrypoint;
  const underInit = full.slice(0, INIT.length).join(" ") === INIT.join(" ") ? full.slice(INIT.length) : full;
  // The folders the final stage makes (`mkdir -p ...`) exist in the assembled image too: the data
  // folder of the default store among them.
  for (const r of runs)
    for (const m of r.matchAll(/mkdir -p ((?:\/\S+\s*)+)/g))
      for (const dir of m[1]!.trim().split(/\s+/))
        mkdirSync(inRoot(dir.replace(/&&$/, "")), { recursive: true });
  return {
    app: inRoot(workdir),
    entrypoint: underInit,
    fullEntrypoint: full,
    runs,
    user,
    healthcheck,
    bases,
    copied,
  };
}

let root: string;
let image: Image;
let failed = false;

beforeAll(() => {
  requireBuild();
  root = mkdtempSync(join(tmpdir(), "dagbot-image-"));
  image = assembleImage(join(root, "image"));
}, 60_000);

afterAll(() => {
  if (failed) console.warn(`kept the assembled image folder ${root}`);
  else rmSync(root, { recursive: true, force: true });
});

/** Only what the image has: its PATH and HOME, no NODE_PATH/NODE_OPTIONS, the working directory /app. */
function imageEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    HOME: join(root, "home"),
    NODE_ENV: "production",
    DAGBOT_LOG_LEVEL: "warn",
    ...extra,
  };
}

/** The entrypoint's argv with the image's paths moved under the assembled folder. */
function entrypointArgv(args: string[]): [string, string[]] {
  const [program, ...rest] = image.entrypoint;
  if (program !== "node") throw new Error(`entrypoint runs ${program ?? "nothing"}, not node`);
  const mapped = rest.map((a) => (a.startsWith("/") ? join(root, "image", a) : a));
  return [process.execPath, [...mapped, ...args]];
}

function run(args: string[], env: Record<string, string> = {}, timeoutMs = 30_000): Promise<CliResult> {
  const [program, argv] = entrypointArgv(args);
  return new Promise((done, fail) => {
    const child = spawn(program, argv, {
      cwd: image.app,
      env: imageEnv(env),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      fail(new Error(`dagbot ${args.join(" ")} did not end within ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on("exit", (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

/**
 * The image's HEALTHCHECK command, run as the container would: the image's paths under the assembled
 * folder, /config/node.toml standing for the mounted node file (here the image's own
 * config/local.toml), the container's environment.
 */
function runHealthcheck(env: Record<string, string>): Promise<CliResult> {
  if (image.healthcheck === null) throw new Error("docker/Dockerfile: the final stage has no HEALTHCHECK");
  const [program, entry, ...args] = image.healthcheck.argv;
  expect([program, entry]).toEqual(image.entrypoint);
  const config = join(root, "config", "node.toml");
  mkdirSync(dirname(config), { recursive: true });
  copyFileSync(join(image.app, "config", "local.toml"), config);
  return run(
    args.map((a) => (a === "/config/node.toml" ? config : a)),
    env,
  );
}

function track<T>(p: Promise<T>): Promise<T> {
  return p.catch((e: unknown) => {
    failed = true;
    throw e;
  });
}

describe("the container image's final stage", () => {
  it("holds the files the entrypoint needs, the crypto stand-in's link target included", () => {
    expect(image.copied).toEqual(expect.arrayContaining(["/app/node_modules", "/app/dist", "/app/stubs"]));
    const link = join(image.app, "node_modules", "@matrix-org", "matrix-sdk-crypto-nodejs");
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(existsSync(join(link, "package.json"))).toBe(true);
    // No devDependency made it in.
    expect(existsSync(join(image.app, "node_modules", "vitest"))).toBe(false);
    expect(existsSync(join(image.app, "node_modules", "typescript"))).toBe(false);
    expect(existsSync(join(image.app, "src"))).toBe(false);
    // No scripts/ (nor Python): `dagbot demo` cannot install its Synapse there, and says so (below).
    expect(existsSync(join(image.app, "scripts"))).toBe(false);
  });

  it("has a HEALTHCHECK of its own that runs `dagbot nodes --check` on the node file CMD starts", () => {
    const final = readStages(readFileSync(join(REPO, "docker", "Dockerfile"), "utf8")).pop()!;
    const cmd = parseExecForm(final.find((i) => i.op === "CMD")!.args);
    expect(image.healthcheck).not.toBeNull();
    const { options, argv } = image.healthcheck!;
    expect(argv).toEqual([...image.entrypoint, "nodes", "--check", "--config", "/config/node.toml"]);
    // The node file the healthcheck reads is the one the default command starts.
    expect(cmd.slice(cmd.indexOf("--config"), cmd.indexOf("--config") + 2)).toEqual([
      "--config",
      "/config/node.toml",
    ]);
    // Every option is a duration, and the check gives up before the next one starts.
    for (const key of ["interval", "timeout", "start-period"]) expect(options[key]).toMatch(/^\d+s$/);
    expect(Number(options["retries"])).toBeGreaterThan(0);
    expect(parseInt(options["timeout"]!, 10)).toBeLessThan(parseInt(options["interval"]!, 10));
    // compose inherits it rather than defining a second, drifting one for the nodes.
    const compose = readFileSync(join(REPO, "docker", "compose.yaml"), "utf8");
    const xNode = compose.slice(compose.indexOf("x-node:"), compose.indexOf("\nservices:"));
    expect(xNode).not.toMatch(/^\s*healthcheck:/m);
  });

  it("runs tini as PID 1 in front of node, installed in the final stage", () => {
    expect(image.fullEntrypoint).toEqual([...INIT, "node", "/app/dist/cli.js"]);
    expect(image.runs.join("\n")).toMatch(/apt-get install -y --no-install-recommends tini\b/);
    // compose adds no second init in front of it (`init: true` would run docker-init, then tini).
    const compose = readFileSync(join(REPO, "docker", "compose.yaml"), "utf8");
    expect(compose).not.toMatch(/^\s*init:\s*true/m);
  });

  it("gives the image's user the data folder of the default store, and nothing else of /app", () => {
    expect(image.user).toBe("node");
    const dataDir = posix.resolve("/app", posix.dirname(DEFAULT_STORE.slice("sqlite:".length)));
    expect(dataDir).toBe("/app/data");
    const chowns = image.runs.flatMap((r) => [...r.matchAll(/chown (\S+) ([^&]+)/g)]);
    const owned = chowns.filter((m) => m[1] === "node:node").flatMap((m) => m[2]!.trim().split(/\s+/));
    expect(owned).toContain(dataDir);
    expect(owned).not.toContain("/app");
    expect(existsSync(join(root, "image", dataDir))).toBe(true);
  });

  it("is built on a pinned Node 24 release, which package.json's engines accept", () => {
    const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as {
      engines: { node: string };
    };
    expect(image.bases.length).toBeGreaterThanOrEqual(2);
    // A digest may follow the tag (`@sha256:…`) once one is read from the registry (docker/Dockerfile).
    for (const base of image.bases)
      expect(base).toMatch(/^node:24\.\d+\.\d+-[a-z]+-slim(@sha256:[0-9a-f]{64})?$/);
    // Both stages the same Node release: what the build stage installs is what the final one runs.
    expect(new Set(image.bases).size).toBe(1);
    const floor = /^>=(\d+)$/.exec(pkg.engines.node);
    expect(floor).not.toBeNull();
    expect(24).toBeGreaterThanOrEqual(Number(floor![1]));
  });

  it("compose pins every image to a version and publishes ports on 127.0.0.1 only", () => {
    const compose = readFileSync(join(REPO, "docker", "compose.yaml"), "utf8");
    const images = [...compose.matchAll(/^\s*image:\s*(\S+)/gm)].map((m) => m[1]!);
    expect(images.length).toBeGreaterThan(0);
    for (const ref of images) {
      const tag = ref.split(":")[1];
      expect(tag, ref).toBeDefined();
      expect(tag, ref).not.toBe("latest");
    }
    // Synapse is the release the chat tests run.
    const pinned = /^SYNAPSE_VERSION="([^"]+)"/m.exec(
      readFileSync(join(REPO, "scripts", "install-synapse.sh"), "utf8"),
    )![1]!;
    expect(images).toContain(`matrixdotorg/synapse:v${pinned}`);
    const ports = [...compose.matchAll(/^\s*ports:\s*(\[.*\])/gm)].flatMap(
      (m) => JSON.parse(m[1]!) as string[],
    );
    expect(ports.length).toBeGreaterThan(0);
    for (const port of ports) expect(port).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
    // Every `ports:` is in the one-line form read above.
    expect(compose.match(/^\s*ports:/gm)?.length).toBe(compose.match(/^\s*ports:\s*\[/gm)?.length);
  });

  it("says `dagbot demo` cannot run in it, before starting anything", async () => {
    const r = await track(run(["demo"]));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("scripts/install-synapse.sh, which this installation does not have");
    expect(r.stderr).toContain("run `dagbot demo` from a checkout of the repository");
    expect(r.stdout).not.toContain("Starting a local Synapse");
  });

  it("prints its version", async () => {
    const r = await track(run(["--version"]));
    const pkg = JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string };
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      new RegExp(
        `^dagbot ${pkg.version.replace(/\./g, "\\.")} \\(store schema \\d+, fleet protocol \\d+\\)\n$`,
      ),
    );
  });

  it("validates the example DAGs it ships", async () => {
    const r = await track(run(["validate", "config/examples/hello.toml", "config/examples/diamond.json"]));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("hello.toml");
  });

  it("draws a run picture with the font it ships (no system fonts needed)", async () => {
    const out = join(root, "diamond.png");
    const r = await track(run(["graph", "config/examples/diamond.json", "--out", out]));
    expect(r.code, r.stderr).toBe(0);
    const png = decodePng(readFileSync(out));
    expect(r.stdout).toContain(`${png.width}×${png.height} px`);
  });

  it("loads the Matrix bot's modules for `start` (the config error comes after every import)", async () => {
    const config = join(root, "no-matrix.toml");
    writeFileSync(config, `node_id = "img"\nstore = "sqlite:${join(root, "unused.db")}"\n`);
    const r = await track(run(["start", "--config", config]));
    expect(r.stderr).not.toContain("Cannot find module");
    expect(r.stderr).toContain("the config has no [matrix] section");
    expect(r.code).toBe(2);
  });

  it("runs `dagbot node` on SQLite, which runs a DAG submitted from the image", async () => {
    const state = join(root, "state");
    mkdirSync(state, { recursive: true });
    // The packaged engine-only config, as a container without a mounted config would use it; the
    // store lives in the state volume.
    const config = "config/local.toml";
    const env = { DAGBOT_STORE: `sqlite:${join(state, "store.db")}`, DAGBOT_NODE_ID: "img-node" };
    const [program, argv] = entrypointArgv(["node", "--config", config]);
    const node = spawn(program, argv, {
      cwd: image.app,
      env: imageEnv(env),
      stdio: ["ignore", "ignore", "pipe"],
    });
    let log = "";
    node.stderr.on("data", (c: Buffer) => (log += c.toString()));
    const exited = new Promise<number | null>((done) => node.once("exit", (code) => done(code)));
    const store = await openStore({ kind: "sqlite", path: join(state, "store.db") });
    try {
      // `submit` says at once when no node of the room is alive: let the node beat first.
      await track(
        waitFor(
          "the node's heartbeat",
          () => store.listNodes(),
          (nodes) => nodes.length > 0,
          {
            timeoutMs: 20_000,
            intervalMs: 50,
          },
        ),
      );
      const submitted = await track(
        run(["submit", "config/examples/hello.toml", "--config", config, "--confirm", "--json"], env),
      );
      expect(submitted.code, submitted.stderr + log).toBe(0);
      const { runId } = JSON.parse(submitted.stdout) as { runId: string };
      const done = await track(
        waitFor(
          "the hello run to end",
          () => store.getRunById(runId),
          (r) => r !== null && r.status !== "running" && r.status !== "pending",
          { timeoutMs: 30_000, intervalMs: 50 },
        ),
      );
      expect(done?.status, log).toBe("succeeded");
      const tasks = await store.listTasks(runId);
      expect(tasks.map((t) => t.executor?.nodeId)).toEqual(tasks.map(() => "img-node"));
      // The image's HEALTHCHECK command, run in the image: healthy while the node beats, not after.
      const health = await track(runHealthcheck(env));
      expect(health.code, health.stdout + health.stderr).toBe(0);
      node.kill("SIGTERM");
      expect(await exited, log).toBe(0);
      const after = await track(runHealthcheck(env));
      expect(after.code).toBe(1);
      expect(after.stdout).toContain("node img-node: no heartbeat");
    } finally {
      await store.close();
      if (node.exitCode === null && node.signalCode === null) node.kill("SIGKILL");
    }
  });
});
