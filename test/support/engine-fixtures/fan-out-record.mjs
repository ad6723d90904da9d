// Fan-out test action (docs/dag-format.md "Fan-out"), one script in three modes, each appending
// JSON lines to a records file so a test counts from the actions' own records:
//   discover <records> <n>: publishes the list output hosts, n items (host-0 … host-<n-1>);
//   deploy <records> <host> <index>: a "start" line, a short wait, an "end" line (times from the
//     machine's clock, in ms), then publishes url=u-<host>; it fails its first attempt when the
//     file `<records>.fail` names its task, every attempt when it says "<task> always";
//   report <records> <url...>: one line with the urls it was given, in argv order.
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import process from "node:process";

const [mode, file, ...rest] = process.argv.slice(2);
const base = {
  run: process.env.DAGBOT_RUN_ID,
  task: process.env.DAGBOT_TASK_ID,
  attempt: Number(process.env.DAGBOT_ATTEMPT),
};
const now = () => performance.timeOrigin + performance.now();
// One write(2) per line on an O_APPEND file: lines of concurrent actions never interleave.
const record = (line) => appendFileSync(file, `${JSON.stringify({ ...base, ...line })}\n`);
const publish = (text) => appendFileSync(process.env.DAGBOT_OUTPUT, text);

if (mode === "discover") {
  const n = Number(rest[0]);
  publish(Array.from({ length: n }, (_, i) => `hosts=host-${i}\n`).join(""));
  record({ mode, n });
} else if (mode === "deploy") {
  const [host, index] = rest;
  record({ mode, event: "start", at: now(), host, index });
  await new Promise((done) => setTimeout(done, 60 + (Number(index) % 5) * 20));
  const said = existsSync(`${file}.fail`) ? readFileSync(`${file}.fail`, "utf8").trim() : "";
  record({ mode, event: "end", at: now(), host, index });
  if (said === `${base.task} always` || (said === base.task && base.attempt === 1)) process.exit(1);
  publish(`url=u-${host}\n`);
} else if (mode === "report") {
  record({ mode, urls: rest });
} else {
  process.exit(2);
}
