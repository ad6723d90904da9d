/**
 * Section 9: a DAG of processes beside the machine's floor. From ONE description of a
 * shape (tasks and their needs, every task running `true`) it writes a build.ninja, a Makefile and a
 * dagbot DAG document, and runs them in alternating rounds with 8 slots each: `ninja -j8`,
 * `make -j8`, `dagbot run --nodes 2` (capacity 4 each, `global_cap` 8, a fresh SQLite store at its
 * default durability) and 3 `dagbot node` processes on PostgreSQL (capacity 3 each, room cap 8, so 8
 * tasks at most at once). Every figure is the wall time the user waits: process start to exit for
 * ninja, make and `dagbot run`; publish to the run's end seen in the store for the PostgreSQL nodes
 * (they are up already, as a fleet is).
 */
import { spawn } from "node:child_process";
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import process from "node:process";
import { setTimeout as sleep } from "node:timers/promises";
import { track } from "./lib/children.mjs";
import { Cluster, publishAndConfirm, waitFor } from "./lib/cluster.mjs";
import { waitForQuietCpu } from "./lib/cpu.mjs";
import { chain, independent, layered } from "./lib/dags.mjs";
import { CLI, cliNodeFlags } from "./lib/dist.mjs";
import { freshStore } from "./lib/stores.mjs";
import { DAG_LEASE } from "./dag-overhead.mjs";

export const SLOTS = 8;
export const FLOOR_SHAPES = [
  { key: "independent", label: "1,000 independent tasks", tasks: 1000, make: (id) => independent(id, 1000) },
  { key: "chain", label: "a chain of 200", tasks: 200, make: (id) => chain(id, 200) },
  {
    key: "layers",
    label: "10 levels × 100, each needing 2 of the level above",
    tasks: 1000,
    make: (id) => layered(id, 10, 100),
  },
];
/**
 * "sqlite-normal" is `dagbot run` with the store at `sqlite_synchronous = "normal"` (no fsync at a
 * commit): an info variant, whose difference to "sqlite" is what the commits' fsyncs cost, the part
 * of a step that durability itself takes (bench/README.md, "Eighth stop").
 * DAGBOT_BENCH_DIST_B names a second build (an experiment's copy of dist/): its `dagbot run` then
 * runs in the same rounds as the variant "sqlite-b", for A/B figures taken side by side.
 */
const DIST_B = process.env.DAGBOT_BENCH_DIST_B;
export const FLOOR_VARIANTS = [
  "ninja",
  "make",
  "node",
  "sqlite",
  "sqlite-normal",
  ...(DIST_B ? ["sqlite-b"] : []),
  "postgres",
];
/** The Node floor: the same DAG, 8 slots, child_process.spawn of `true`, nothing else (floor-spawn.mjs). */
const NODE_FLOOR = fileURLToPath(new URL("./floor-spawn.mjs", import.meta.url));
/**
 * The floor at its best: the Node flags dagbot's action supervisor runs with (no V8 background work,
 * a 1 MB young generation), which make a process that starts processes start them cheaper. The
 * floor gets what dagbot's own spawner gets, so that those flags are not counted as dagbot gaining
 * on the floor (bench/README.md, "Eighth stop").
 */
const NODE_FLOOR_FLAGS = ["--single-threaded", "--max-semi-space-size=1"];
const TERMINAL = new Set(["succeeded", "failed", "canceled", "rejected", "expired"]);

/** build.ninja for a shape: one edge per task, its needs as inputs, the command `true`. */
export function ninjaFile(doc) {
  const lines = ["rule t", "  command = true", ""];
  for (const t of doc.tasks) lines.push(`build ${t.id}: t${(t.needs ?? []).map((n) => ` ${n}`).join("")}`);
  return `${lines.join("\n")}\n`;
}

/** A Makefile for a shape: every task a phony target (no files), its needs as prerequisites. */
export function makeFile(doc) {
  const ids = doc.tasks.map((t) => t.id);
  const lines = [`.PHONY: all ${ids.join(" ")}`, `all: ${ids.join(" ")}`, ""];
  for (const t of doc.tasks) lines.push(`${t.id}:${(t.needs ?? []).map((n) => ` ${n}`).join("")}`, "\ttrue");
  return `${lines.join("\n")}\n`;
}

/** The config of `dagbot run` here: capacity 4 per in-process node, room cap 8, quiet logs. */
export function runConfig(storePath, { synchronous } = {}) {
  return [
    `node_id = "floor"`,
    `labels = ["linux"]`,
    `capacity = 4`,
    `store = "sqlite:${storePath}"`,
    ...(synchronous === undefined ? [] : [`sqlite_synchronous = "${synchronous}"`]),
    `log_level = "warn"`,
    ``,
    `[actions.true]`,
    `argv = ["true"]`,
    `timeout = "1m"`,
    ``,
    `[limits]`,
    `global_cap = ${SLOTS}`,
    ``,
  ].join("\n");
}

/** Runs a program to its end; resolves with its wall time in ms, rejects on a non-zero exit. */
function timed(cmd, args, cwd) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = track(spawn(cmd, args, { cwd, stdio: ["ignore", "ignore", "pipe"] }));
    let err = "";
    child.stderr.on("data", (d) => {
      if (err.length < 2000) err += String(d);
    });
    child.once("error", reject);
    child.once("exit", (code, signal) => {
      const ms = performance.now() - t0;
      if (code === 0) resolve(ms);
      else reject(new Error(`${cmd} ${args.join(" ")} ended with ${signal ?? code}: ${err.slice(0, 400)}`));
    });
  });
}

export async function benchFloor(scratch, { rounds, log, variants = FLOOR_VARIANTS, shapes = FLOOR_SHAPES }) {
  const dir = scratch.dir("floor");
  const files = new Map();
  for (const s of shapes) {
    const doc = s.make(`floor_${s.key}`);
    const ninjaDir = join(dir, `${s.key}-ninja`);
    const makeDir = join(dir, `${s.key}-make`);
    for (const d of [ninjaDir, makeDir]) mkdirSync(d);
    writeFileSync(join(ninjaDir, "build.ninja"), ninjaFile(doc));
    writeFileSync(join(makeDir, "Makefile"), makeFile(doc));
    const dagPath = join(dir, `${s.key}.json`);
    writeFileSync(dagPath, `${JSON.stringify(doc)}\n`);
    files.set(s.key, { doc, ninjaDir, makeDir, dagPath });
  }
  const out = { slots: SLOTS, rounds: {}, loadAverages: [] };
  for (const s of shapes) out.rounds[s.key] = Object.fromEntries(variants.map((v) => [v, []]));

  let cluster = null;
  let pgStore = null;
  try {
    if (variants.includes("postgres")) {
      const fresh = await freshStore(scratch, "postgres", "floor");
      pgStore = fresh.store;
      cluster = new Cluster({
        dir: fresh.dir,
        storeUrl: fresh.location,
        store: pgStore,
        capacity: 3,
        lease: DAG_LEASE,
      });
      for (const id of cluster.nodeIds)
        appendFileSync(cluster.configs.get(id), `[limits]\nglobal_cap = ${SLOTS}\n`);
      await cluster.startAll();
      await cluster.leader();
      // A warm-up run: every node's action supervisor up, the JIT past start-up.
      const warm = independent("floor_warmup", 24);
      await pgRun(pgStore, warm);
      await sleep(500);
    }
    let sqliteN = 0;
    for (let round = 0; round < rounds; round++) {
      out.loadAverages.push(loadavg()[0]);
      for (const s of shapes) {
        const f = files.get(s.key);
        // The variants take turns: each round starts with a different one.
        const order = variants.map((_, i) => variants[(i + round) % variants.length]);
        const got = {};
        for (const v of order) {
          let ms;
          if (v === "ninja") ms = await timed("ninja", [`-j${SLOTS}`], f.ninjaDir);
          else if (v === "make") ms = await timed("make", [`-j${SLOTS}`, "-s"], f.makeDir);
          else if (v === "node")
            ms = await timed(
              process.execPath,
              [...NODE_FLOOR_FLAGS, NODE_FLOOR, f.dagPath, String(SLOTS)],
              f.ninjaDir,
            );
          else if (v === "sqlite" || v === "sqlite-normal" || v === "sqlite-b") {
            // A fresh store each run, as a first `dagbot run` in a folder has it.
            const runDir = scratch.dir(`floor-run-${sqliteN++}`);
            const cfg = join(runDir, "node.toml");
            writeFileSync(
              cfg,
              runConfig(join(runDir, "dagbot.db"), v === "sqlite-normal" ? { synchronous: "normal" } : {}),
            );
            ms = await timed(
              process.execPath,
              [
                ...cliNodeFlags(),
                v === "sqlite-b" ? join(DIST_B, "cli.js") : CLI,
                "run",
                f.dagPath,
                "--nodes",
                "2",
                "--config",
                cfg,
              ],
              runDir,
            );
          } else {
            const doc = s.make(`floor_${s.key}_r${round}`);
            ms = await pgRun(pgStore, doc);
          }
          got[v] = ms;
          out.rounds[s.key][v].push(ms);
        }
        log(
          `  ${s.label} round ${round + 1} (load ${loadavg()[0].toFixed(2)}): ` +
            variants.map((v) => `${v} ${Math.round(got[v])} ms`).join(", "),
        );
      }
    }
    out.loadAverages.push(loadavg()[0]);
  } finally {
    if (cluster !== null) await cluster.stopAll("SIGTERM");
    if (pgStore !== null) await pgStore.close();
  }
  return out;
}

/** The DAG of the start-up figure: one task, action `true`. */
export const ONE_TASK_DAG = { id: "one", tasks: [{ id: "t", action: "true" }] };

/**
 * `dagbot run` of a one-task DAG, process start to exit, each run in a fresh folder with a fresh
 * store (as a first `dagbot run` there has it) and the section's config (2 in-process nodes). What
 * it measures is the fixed cost of a run: Node's start, the modules, the store's creation and
 * migrations, the election, publish and confirm, one action and the stop. One run first, not
 * counted, is the first start after a build: Node's compile cache is empty then (its figure is kept
 * as `firstMs`). The runs start once the machine's CPUs are quiet (at most 30 s of waiting): a user's
 * `dagbot run` does not start beside the bench's last section still winding down.
 */
export async function benchOneTaskRun(scratch, { runs, log }) {
  const quiet = await waitForQuietCpu();
  const dir = scratch.dir("one-task");
  const dagPath = join(dir, "one.json");
  writeFileSync(dagPath, `${JSON.stringify(ONE_TASK_DAG)}\n`);
  const once = async (n) => {
    const runDir = scratch.dir(`one-task-${n}`);
    const cfg = join(runDir, "node.toml");
    writeFileSync(cfg, runConfig(join(runDir, "dagbot.db")));
    return timed(
      process.execPath,
      [...cliNodeFlags(), CLI, "run", dagPath, "--nodes", "2", "--config", cfg],
      runDir,
    );
  };
  const firstMs = await once(0);
  const ms = [];
  for (let n = 1; n <= runs; n++) ms.push(await once(n));
  const sorted = [...ms].sort((a, b) => a - b);
  const waited =
    quiet.busy === null
      ? ""
      : `; started after ${(quiet.waitedMs / 1000).toFixed(1)} s, CPUs ${Math.round(quiet.busy * 100)}% busy`;
  log(
    `  dagbot run of a one-task DAG: first ${Math.round(firstMs)} ms, then ${sorted.map((v) => Math.round(v)).join(", ")} ms (load ${loadavg()[0].toFixed(2)}${waited})`,
  );
  return { firstMs, ms, quiet };
}

/** Publishes and confirms on the running PostgreSQL nodes; wall ms until the run is seen ended. */
async function pgRun(store, doc) {
  const t0 = performance.now();
  const runId = await publishAndConfirm(store, doc);
  const run = await waitFor(
    `run ${doc.id} to end`,
    async () => {
      const r = await store.getRunById(runId);
      return r !== null && TERMINAL.has(r.status) ? r : null;
    },
    300_000,
    10,
  );
  const ms = performance.now() - t0;
  if (run.status !== "succeeded") throw new Error(`bench: run ${doc.id} ended ${run.status}`);
  return ms;
}
