/**
 * Section 9's Node floor: the same DAG document run by a plain Node process with 8 slots, each task
 * `true` through child_process.spawn (stdio ignored, no shell), no store, no supervisor, no
 * durability. What any runner written in Node pays to start processes here, beside ninja's floor.
 * Usage: node bench/floor-spawn.mjs DAG.json SLOTS
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import process from "node:process";

const doc = JSON.parse(readFileSync(process.argv[2], "utf8"));
const slots = Number(process.argv[3] ?? 8);
const left = new Map(doc.tasks.map((t) => [t.id, (t.needs ?? []).length]));
const dependents = new Map();
for (const t of doc.tasks)
  for (const n of t.needs ?? []) dependents.set(n, [...(dependents.get(n) ?? []), t.id]);
const ready = doc.tasks.filter((t) => (t.needs ?? []).length === 0).map((t) => t.id);
let running = 0;
let done = 0;

function pump() {
  while (running < slots && ready.length > 0) {
    const id = ready.shift();
    running += 1;
    const child = spawn("true", [], { stdio: "ignore" });
    child.on("exit", (code) => {
      if (code !== 0) throw new Error(`${id} exited ${code}`);
      running -= 1;
      done += 1;
      for (const d of dependents.get(id) ?? []) {
        const n = left.get(d) - 1;
        left.set(d, n);
        if (n === 0) ready.push(d);
      }
      if (done === doc.tasks.length) process.exit(0);
      pump();
    });
  }
}
pump();
