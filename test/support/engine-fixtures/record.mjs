// Chaos test action: appends its own start and end (wall-clock ms, pid, the pid of a child it keeps in
// its process group) to a records file, one JSON line each, so a test can count from the side effects
// which attempts ran at the same time. A SIGTERM is recorded as the end and ends it at once.
// argv: <run ms> <records file>. The attempt comes from the DAGBOT_* variables.
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import process from "node:process";
import { setTimeout } from "node:timers";

const [ms, file] = process.argv.slice(2);
const who = {
  run: process.env.DAGBOT_RUN_ID,
  task: process.env.DAGBOT_TASK_ID,
  attempt: Number(process.env.DAGBOT_ATTEMPT),
  pid: process.pid,
};
// A grandchild of the node that does nothing but live: it must end with its group.
const child = spawn("sleep", ["600"], { stdio: "ignore" });
// One write(2) per line on an O_APPEND file: lines of concurrent actions never interleave.
const record = (ev, extra = {}) =>
  appendFileSync(file, `${JSON.stringify({ ev, ...who, child: child.pid, t: Date.now(), ...extra })}\n`);
record("start");
const end = (why, code) => {
  record("end", { why });
  child.kill("SIGKILL");
  process.exit(code);
};
process.on("SIGTERM", () => end("term", 143));
setTimeout(() => end("done", 0), Number(ms));
