/**
 * `npm run bench:params`: what checking a parameter value costs the leader.
 * The issue's publish (24 × `(?:.{0,999}){0,1}`, a 1,500-character default) matched with RE2 as
 * dagbot did before its pattern limits, then, through the limits, adversarial patterns (the ones
 * whose automata blow up: `.*a.{k}`, nested optionals, Unicode classes) each checked against a
 * random a/b value as long as one command's budget allows (PATTERN_LIMITS.maxCheckCost), five times
 * per pattern with a fresh compile each time: the first (cold) time and the median of the rest.
 * Writes bench/results/params.json. Needs `npm run build` first (the npm script does it).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { RE2JS } from "re2js";
import { dagbotCommit, load, ROOT } from "./lib/dist.mjs";
import { machineInfo } from "./lib/machine.mjs";

const { compileParamPattern, PATTERN_LIMITS } = await load("domain/param-pattern.js");

const ADVERSARIAL = [
  ".*a.{96}",
  "(?:.*a.{46}){2}",
  "[ab]*a[ab]{99}",
  "[ab]*a[ab]{100}[ab]{100}",
  "(?:a|b)*a(?:a|b){98}",
  "(?:(?:.{0,16}){0,1}){5}",
  "(?:.?){60}(?:a|b)*a(?:a|b){30}",
  "\\pL{0,100}",
  "(?:.?){99}",
  "[a-z0-9-]{1,64}",
  ".*",
];
const TIMES = 5;

let seed = 24;
const random = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
const value = (n) => Array.from({ length: n }, () => (random() < 0.5 ? "a" : "b")).join("");
const ms = (t) => Math.round(t * 100) / 100;

function timed(fn) {
  const start = performance.now();
  fn();
  return performance.now() - start;
}

const issue = "(?:.{0,999}){0,1}".repeat(24);
let issueRe;
const issueCompileMs = timed(() => (issueRe = RE2JS.compile(issue)));
const issueMatchMs = timed(() => issueRe.matches("a".repeat(1500)));
const issueNow = compileParamPattern(issue);

const rows = [];
for (const source of ADVERSARIAL) {
  const times = [];
  let instructions = 0;
  let length = 0;
  for (let k = 0; k < TIMES; k++) {
    // A pattern of its own each time: nothing compiled or cached before.
    const p = compileParamPattern(`${source}(?:x${k}|y)?`);
    if (typeof p === "string") throw new Error(`${source}: ${p}`);
    instructions = p.instructions;
    length = Math.min(4096, Math.floor(PATTERN_LIMITS.maxCheckCost / p.instructions));
    const v = value(length);
    times.push(timed(() => p.matches(v)));
  }
  const rest = times.slice(1).sort((a, b) => a - b);
  rows.push({
    pattern: source,
    instructions,
    valueLength: length,
    firstMs: ms(times[0]),
    medianMs: ms(rest[Math.floor(rest.length / 2)]),
    maxMs: ms(Math.max(...times)),
  });
}

const result = {
  machine: await machineInfo(),
  commit: dagbotCommit(),
  limits: PATTERN_LIMITS,
  issuePublish: {
    instructions: issueRe.programSize(),
    compileMs: ms(issueCompileMs),
    matchMs: ms(issueMatchMs),
    now: issueNow,
  },
  rows,
};
writeFileSync(join(ROOT, "bench", "results", "params.json"), `${JSON.stringify(result, null, 1)}\n`);
console.log(
  `issue's publish before the limits: ${result.issuePublish.instructions} instructions, compile ${ms(issueCompileMs)} ms, one check ${ms(issueMatchMs)} ms; now: ${String(issueNow)}`,
);
console.log("| pattern | instructions | value | first | median (max) |");
for (const r of rows)
  console.log(
    `| \`${r.pattern}\` | ${r.instructions} | ${r.valueLength} | ${r.firstMs} ms | ${r.medianMs} ms (${r.maxMs}) |`,
  );
