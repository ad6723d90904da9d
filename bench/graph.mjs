/**
 * `npm run bench:graph`: what drawing a run costs. For 20, 200 and 1,000 tasks in three shapes
 * (a wide fan-out, a chain with a failure half way, and layers with random needs, which no fan-out
 * or chain grouping simplifies), each in a fresh child process: the first PNG (worker start and
 * Graphviz's WebAssembly compile included), the median of the next five, and the process's peak
 * RSS (main thread and render worker together) over its baseline. Writes bench/results/graph.json.
 * Needs `npm run build` first (the npm script does it).
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import process from "node:process";
import { dagbotCommit, load, ROOT } from "./lib/dist.mjs";
import { machineInfo } from "./lib/machine.mjs";

const SIZES = [20, 200, 1000];
const SHAPES = ["fan-out", "chain", "layered"];
/**
 * The densest picture a publish can ask for: 141 pending tasks, each needing every task before it (9,870 needs, what a
 * 64 KiB document holds). Drawn once per child after a warm-up render; `--only=dense` runs it alone.
 */
const DENSE_TASKS = 141;
const WARM_RENDERS = 5;
/** The bound the renderer's own time limit (30 s) leaves plenty of room under; judged below. */
const BOUND_MS = 5_000;

function shape(name, n) {
  if (name === "dense") {
    return Array.from({ length: n }, (_, i) => ({
      id: `t${i}`,
      action: "work",
      needs: Array.from({ length: i }, (_, j) => `t${j}`),
      status: "blocked",
    }));
  }
  if (name === "fan-out") {
    const tasks = [{ id: "prepare", action: "fetch", needs: [], status: "succeeded" }];
    const states = ["succeeded", "succeeded", "running", "queued", "failed"];
    for (let i = 0; i < n - 3; i++)
      tasks.push({
        id: `shard_${i}`,
        action: "process",
        needs: ["prepare"],
        status: states[i % states.length],
      });
    tasks.push({ id: "merge", action: "merge", needs: tasks.slice(1).map((t) => t.id), status: "blocked" });
    tasks.push({ id: "publish", action: "upload", needs: ["merge"], status: "blocked" });
    return tasks;
  }
  if (name === "chain") {
    const half = Math.floor(n / 2);
    return Array.from({ length: n }, (_, i) => ({
      id: `step_${i}`,
      action: "echo",
      needs: i === 0 ? [] : [`step_${i - 1}`],
      status: i < half ? "succeeded" : i === half ? "failed" : "skipped",
    }));
  }
  let s = 7;
  const random = () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
  const width = Math.max(4, Math.round(Math.sqrt(n) * 1.6));
  return Array.from({ length: n }, (_, i) => {
    const level = Math.floor(i / width);
    const needs = [];
    if (level > 0)
      for (let k = 0; k < 2; k++) {
        const j = `t${(level - 1) * width + Math.floor(random() * width)}`;
        if (!needs.includes(j)) needs.push(j);
      }
    const status =
      level < 2 ? "succeeded" : level === 2 ? (random() < 0.1 ? "failed" : "running") : "blocked";
    return { id: `t${i}`, action: "work", needs, status };
  });
}

/** One measurement, in this (child) process. */
async function child(shapeName, size) {
  const { buildRunGraph } = await load("domain/run-graph.js");
  const { GraphvizRenderer } = await load("adapters/graph/graphviz-renderer.js");
  const tasks = shape(shapeName, size);
  const baselineRssMb = process.memoryUsage().rss / 2 ** 20;
  const renderer = new GraphvizRenderer();
  const input = { dagId: shapeName, runLabel: "bench000", runStatusWord: "running", tasks };
  let t = performance.now();
  const graph = buildRunGraph(input);
  const buildMs = performance.now() - t;
  t = performance.now();
  const first = await renderer.render(graph, "png");
  const coldMs = performance.now() - t;
  const warm = [];
  for (let i = 0; i < WARM_RENDERS; i++) {
    t = performance.now();
    await renderer.render(buildRunGraph(input), "png");
    warm.push(performance.now() - t);
  }
  await renderer.close();
  warm.sort((a, b) => a - b);
  const peakRssMb = process.resourceUsage().maxRSS / 1024;
  return {
    shape: shapeName,
    tasks: size,
    boxes: graph.boxes.length,
    buildMs: Math.round(buildMs * 10) / 10,
    coldMs: Math.round(coldMs),
    warmMedianMs: Math.round(warm[Math.floor(warm.length / 2)]),
    warmMaxMs: Math.round(warm[warm.length - 1]),
    png: { width: first.width, height: first.height, bytes: first.data.byteLength },
    baselineRssMb: Math.round(baselineRssMb),
    peakRssMb: Math.round(peakRssMb),
  };
}

/**
 * The dense DAG once, after a warm-up render of one task (worker up, Graphviz compiled): wall time,
 * the process's CPU time (main thread and render worker), peak RSS, and what was drawn.
 */
async function denseChild(size) {
  const { buildRunGraph } = await load("domain/run-graph.js");
  const { GraphvizRenderer } = await load("adapters/graph/graphviz-renderer.js");
  // A generous limit, so an unbounded build shows its full cost instead of the limit.
  const renderer = new GraphvizRenderer({ timeoutMs: 120_000 });
  const one = [{ id: "warm", action: "work", needs: [], status: "blocked" }];
  await renderer.render(
    buildRunGraph({ dagId: "w", runLabel: null, runStatusWord: null, tasks: one }),
    "png",
  );
  const baselineRssMb = process.memoryUsage().rss / 2 ** 20;
  const cpu = process.cpuUsage();
  const t = performance.now();
  const graph = buildRunGraph({
    dagId: "dense",
    runLabel: "bench000",
    runStatusWord: "pending",
    tasks: shape("dense", size),
  });
  const buildMs = performance.now() - t;
  let picture = null;
  let error = null;
  try {
    picture = await renderer.render(graph, "png");
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
  }
  const ms = performance.now() - t;
  const used = process.cpuUsage(cpu);
  await renderer.close();
  return {
    shape: "dense",
    tasks: size,
    needs: (size * (size - 1)) / 2,
    boxes: graph.boxes.length,
    edges: graph.edges.length,
    reduction: graph.reduction ?? null,
    buildMs: Math.round(buildMs * 10) / 10,
    ms: Math.round(ms),
    cpuMs: Math.round((used.user + used.system) / 1000),
    error,
    png:
      picture === null
        ? null
        : { width: picture.width, height: picture.height, bytes: picture.data.byteLength },
    baselineRssMb: Math.round(baselineRssMb),
    peakRssMb: Math.round(process.resourceUsage().maxRSS / 1024),
  };
}

function runDense() {
  const out = execFileSync(
    process.execPath,
    [join(ROOT, "bench/graph.mjs"), "--dense", String(DENSE_TASKS)],
    {
      encoding: "utf8",
      timeout: 180_000,
    },
  );
  const row = JSON.parse(out);
  process.stdout.write(
    `${row.tasks} tasks dense (${row.needs} needs) ${row.boxes} boxes ${row.edges} edges` +
      ` (reduction ${row.reduction ?? "none"}): ${row.ms} ms, CPU ${row.cpuMs} ms, ` +
      `${row.png === null ? `no picture (${row.error})` : `${row.png.width}×${row.png.height} px ${Math.round(row.png.bytes / 1024)} KiB`}, ` +
      `peak RSS ${row.peakRssMb} MB (baseline ${row.baselineRssMb} MB)\n`,
  );
  return row;
}

async function main() {
  if (process.argv.includes("--only=dense")) {
    runDense();
    return;
  }
  const rows = [];
  for (const size of SIZES) {
    for (const s of SHAPES) {
      const out = execFileSync(
        process.execPath,
        [join(ROOT, "bench/graph.mjs"), "--child", s, String(size)],
        {
          encoding: "utf8",
          timeout: 120_000,
        },
      );
      const row = JSON.parse(out);
      rows.push(row);
      process.stdout.write(
        `${String(size).padStart(5)} tasks ${s.padEnd(8)} ${String(row.boxes).padStart(4)} boxes  ` +
          `first ${String(row.coldMs).padStart(5)} ms  then median ${String(row.warmMedianMs).padStart(5)} ms ` +
          `(max ${row.warmMaxMs})  ${row.png.width}×${row.png.height} px ${Math.round(row.png.bytes / 1024)} KiB  ` +
          `peak RSS ${row.peakRssMb} MB (baseline ${row.baselineRssMb} MB)\n`,
      );
    }
  }
  rows.push(runDense());
  const worst = Math.max(...rows.filter((r) => r.tasks === 1000).map((r) => r.warmMaxMs));
  const verdict = worst <= BOUND_MS ? "pass" : "FAIL";
  process.stdout.write(`1,000 tasks: slowest warm render ${worst} ms, bound ${BOUND_MS} ms: ${verdict}\n`);
  const result = {
    at: new Date().toISOString(),
    commit: dagbotCommit(),
    machine: machineInfo(),
    boundMs: BOUND_MS,
    verdict,
    rows,
  };
  writeFileSync(join(ROOT, "bench/results/graph.json"), `${JSON.stringify(result, null, 2)}\n`);
  if (verdict !== "pass") process.exitCode = 1;
}

if (process.argv[2] === "--dense") {
  process.stdout.write(JSON.stringify(await denseChild(Number(process.argv[3]))));
} else if (process.argv[2] === "--child") {
  process.stdout.write(JSON.stringify(await child(process.argv[3], Number(process.argv[4]))));
} else {
  await main();
}
