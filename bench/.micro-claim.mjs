// scratch (not committed): CPU per claim+finish in one process
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
const dist = process.env.DAGBOT_BENCH_DIST;
const { load } = await import("./lib/dist.mjs");
const { leadRoom, queueTasks, claimLoop, offer } = await import("./lib/queue.mjs");
const { openSqliteStore } = await load("adapters/sqlite/index.js");
const dir = mkdtempSync("/dev/shm/micro-");
const store = await openSqliteStore(join(dir, "s.db"), { synchronous: "normal" });
const fence = await leadRoom(store, "bench-claim");
await queueTasks(store, fence, "m", 3000);
const cpu0 = process.cpuUsage(); const t0 = performance.now();
const r = await claimLoop(store, offer("bench-claim", "w1"), { apart: process.argv[2] === "apart" });
const cpu = process.cpuUsage(cpu0); const ms = performance.now() - t0;
console.log(dist.split("/")[2], `done ${r.done}`, `cpu/op ${((cpu.user + cpu.system) / r.done).toFixed(1)} µs`, `wall/op ${(ms * 1000 / r.done).toFixed(1)} µs`);
await store.close();
