/**
 * Draws the example pictures of docs/pictures/ (shown in docs/chat.md) with the built renderer:
 * `npm run build && node scripts/draw-examples.mjs`. The task states are made up; the shapes are
 * the ones bench/graph.mjs measures.
 */
import { writeFileSync } from "node:fs";
import { fileURLToPath, URL } from "node:url";
import { buildRunGraph } from "../dist/domain/run-graph.js";
import { GraphvizRenderer } from "../dist/adapters/graph/graphviz-renderer.js";

const out = (name) => fileURLToPath(new URL(`../docs/pictures/${name}`, import.meta.url));

const release = [
  { id: "checkout", action: "git_fetch", needs: [], status: "succeeded" },
  { id: "build", action: "make", needs: ["checkout"], status: "succeeded" },
  { id: "lint", action: "lint", needs: ["checkout"], status: "succeeded" },
  { id: "unit_tests", action: "npm_test", needs: ["build"], status: "failed" },
  { id: "e2e_tests", action: "npm_test", needs: ["build"], status: "succeeded" },
  { id: "package", action: "tar", needs: ["unit_tests", "e2e_tests", "lint"], status: "skipped" },
  { id: "deploy", action: "deploy", needs: ["package"], status: "skipped" },
  { id: "notify", action: "notify", needs: ["deploy"], status: "skipped" },
];

function fanOut(n) {
  const states = ["succeeded", "succeeded", "succeeded", "running", "queued", "queued"];
  const tasks = [{ id: "prepare", action: "fetch", needs: [], status: "succeeded" }];
  for (let i = 0; i < n; i++) {
    const status = i === 41 || i === 97 ? "failed" : states[i % states.length];
    tasks.push({ id: `shard_${String(i).padStart(3, "0")}`, action: "process", needs: ["prepare"], status });
  }
  tasks.push({ id: "merge", action: "merge", needs: tasks.slice(1).map((t) => t.id), status: "blocked" });
  tasks.push({ id: "publish", action: "upload", needs: ["merge"], status: "blocked" });
  return tasks;
}

function chain(n) {
  return Array.from({ length: n }, (_, i) => ({
    id: `step_${i}`,
    action: "migrate",
    needs: i === 0 ? [] : [`step_${i - 1}`],
    status: i < 612 ? "succeeded" : i === 612 ? "timed_out" : "skipped",
  }));
}

const pictures = [
  ["release-failed.png", { dagId: "release", runLabel: null, runStatusWord: "failed", tasks: release }],
  ["fan-out-200.png", { dagId: "reindex", runLabel: null, runStatusWord: "running", tasks: fanOut(200) }],
  ["chain-1000.png", { dagId: "migrate_all", runLabel: null, runStatusWord: "failed", tasks: chain(1000) }],
];

const renderer = new GraphvizRenderer();
try {
  for (const [name, input] of pictures) {
    const picture = await renderer.render(buildRunGraph(input), "png");
    writeFileSync(out(name), picture.data);
    process.stdout.write(
      `docs/pictures/${name}: ${picture.width}×${picture.height} px, ${picture.data.byteLength} bytes\n`,
    );
  }
} finally {
  await renderer.close();
}
