/**
 * Which graphile-worker settings are fastest for the claim section's workload on this machine (the
 * bench compares dagbot with the peer at its best): each setting runs the section's graphile-worker
 * round (bench/graphile-child.mjs: own process, no-op jobs added first, concurrency 8, a pool of 10)
 * on a fresh database, settings taking turns within each round (the order rotated every round) so a
 * slow moment of the machine does not favour one.
 * Usage: node bench/graphile-sweep.mjs [--rounds=4] [--jobs=20000] [--only=default,lq50+cbd1,...]
 * A setting is named `default`, `lqN` (localQueue size N), `cbdN` (completeJobBatchDelay N ms) or
 * both joined by `+`.
 */
import process from "node:process";
import { graphileRound, metered } from "./claim-pg.mjs";
import { Scratch } from "./lib/scratch.mjs";
import { fmtSummary, summarize } from "./lib/stats.mjs";

const NAMES = [
  "default",
  "lq8",
  "lq50",
  "lq200",
  "cbd0",
  "cbd1",
  "cbd5",
  "lq50+cbd0",
  "lq50+cbd1",
  "lq50+cbd5",
  "lq200+cbd1",
  "lq200+cbd5",
];

function parseSetting(name) {
  const s = { name, localQueue: -1, completeBatchDelay: -1 };
  if (name === "default") return s;
  for (const part of name.split("+")) {
    const m = /^(lq|cbd)(\d+)$/.exec(part);
    if (m === null) throw new Error(`graphile-sweep: unknown setting ${part} (lqN, cbdN or default)`);
    if (m[1] === "lq") s.localQueue = Number(m[2]);
    else s.completeBatchDelay = Number(m[2]);
  }
  return s;
}

const args = Object.fromEntries(
  process.argv.slice(2).map((a) => {
    const m = /^--(rounds|jobs|only)=(.+)$/.exec(a);
    if (m === null) throw new Error(`graphile-sweep: unknown argument ${a}`);
    return [m[1], m[2]];
  }),
);
const rounds = Number(args.rounds ?? 4);
const jobs = Number(args.jobs ?? 20_000);
const settings = (args.only?.split(",") ?? NAMES).map(parseSetting);

const scratch = new Scratch();
const results = new Map(settings.map((s) => [s.name, { perSecond: [], serverUs: [], clientUs: [] }]));
const log = (m) => process.stdout.write(`${m}\n`);
try {
  for (let round = 0; round < rounds; round++) {
    const order = settings.map((_, i) => settings[(i + round) % settings.length]);
    for (const [i, s] of order.entries()) {
      const url = await scratch.database(`gw${round}_${i}`);
      const side = await metered(url);
      try {
        const g = await graphileRound(url, jobs, side.meter, s);
        const r = results.get(s.name);
        r.perSecond.push(g.perSecond);
        r.serverUs.push(g.cpu.serverUs);
        r.clientUs.push(g.cpu.clientUs);
        log(
          `round ${round + 1} ${s.name}: ${g.perSecond.toFixed(0)}/s ` +
            `(${Math.round(g.cpu.serverUs)}+${Math.round(g.cpu.clientUs)} µs/job)`,
        );
      } finally {
        await side.admin.end();
      }
    }
    // A database per setting and round; dropped as the round ends so they do not pile up.
    await scratch.cleanup();
  }
} finally {
  await scratch.cleanup();
}
log(`\n| setting | jobs/s | server CPU µs/job | its process µs/job |\n| --- | --- | --- | --- |`);
for (const [name, r] of results)
  log(
    `| ${name} | ${fmtSummary(summarize(r.perSecond), "/s")} | ${fmtSummary(summarize(r.serverUs))} | ${fmtSummary(summarize(r.clientUs))} |`,
  );
