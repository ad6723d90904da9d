/**
 * `npm run checks`: the type check, eslint and prettier side by side, each on one core (`npm run
 * lint` is the last two, one after the other). `npm test` runs this between the build and the
 * tests. Each check's output is printed whole once it ends; the script fails when any check does.
 */
import { spawn } from "node:child_process";
import process from "node:process";

const CHECKS = [
  ["typecheck", "npm", ["run", "--silent", "typecheck"]],
  ["eslint", "npx", ["eslint", "."]],
  ["prettier", "npx", ["prettier", "--check", "."]],
];

function run([name, command, args]) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
    const out = [];
    child.stdout.on("data", (d) => out.push(d));
    child.stderr.on("data", (d) => out.push(d));
    child.on("error", (e) => resolve({ name, code: 1, text: String(e) }));
    child.on("close", (code) => resolve({ name, code: code ?? 1, text: Buffer.concat(out).toString() }));
  });
}

const results = await Promise.all(CHECKS.map(run));
for (const r of results) {
  process.stdout.write(`> ${r.name}: ${r.code === 0 ? "passed" : `failed (exit ${r.code})`}\n`);
  if (r.text.trim() !== "") process.stdout.write(r.text.endsWith("\n") ? r.text : `${r.text}\n`);
}
process.exitCode = results.some((r) => r.code !== 0) ? 1 : 0;
