import { benchDagOverhead } from "./dag-overhead.mjs";
import { Scratch } from "./lib/scratch.mjs";
const kind = process.argv[2] ?? "postgres";
const scratch = new Scratch();
try {
  const r = await benchDagOverhead(scratch, kind, { rounds: 1, log: (l) => console.log(l), scenarios: ["independent", "layers"] });
  console.log(JSON.stringify(Object.fromEntries(Object.entries(r.scenarios).map(([k, v]) => [k, v.map((x) => x.wallMs)]))));
} finally { await scratch.cleanup?.(); }
