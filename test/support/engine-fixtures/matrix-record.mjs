// Matrix test action: appends one JSON line per attempt to a records file with the task, attempt
// and the arguments it was given, so a test counts the instances that ran from their own records;
// it then fails (exit 1) when the file `<records file>.fail` names its task.
// argv: <records file> <value...>. The attempt comes from the DAGBOT_* variables.
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import process from "node:process";

const [file, ...values] = process.argv.slice(2);
const line = {
  run: process.env.DAGBOT_RUN_ID,
  task: process.env.DAGBOT_TASK_ID,
  attempt: Number(process.env.DAGBOT_ATTEMPT),
  pid: process.pid,
  values,
};
// One write(2) per line on an O_APPEND file: lines of concurrent actions never interleave.
appendFileSync(file, `${JSON.stringify(line)}\n`);
if (existsSync(`${file}.fail`) && readFileSync(`${file}.fail`, "utf8").trim() === line.task) process.exit(1);
