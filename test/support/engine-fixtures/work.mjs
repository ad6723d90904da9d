// Engine test action: records that this attempt started (with its pid), sleeps, records that it ended.
// argv: <sleep ms> <marks dir>. Marker names carry the run, task and attempt from DAGBOT_* variables.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { setTimeout } from "node:timers";

const [ms, marks] = process.argv.slice(2);
const name = `${process.env.DAGBOT_RUN_ID}.${process.env.DAGBOT_TASK_ID}.${process.env.DAGBOT_ATTEMPT}`;
writeFileSync(join(marks, `${name}.start`), String(process.pid));
setTimeout(() => {
  writeFileSync(join(marks, `${name}.end`), String(process.pid));
}, Number(ms));
