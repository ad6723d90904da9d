/**
 * What the fan-out end-to-end tests share (docs/dag-format.md "Fan-out"): the actions of
 * engine-fixtures/fan-out-record.mjs as node config, the DAG that fans `deploy` out over the hosts
 * `discover` lists into the fan-in `report`, and the reading of the actions' own records.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { REPO } from "./engine-cluster.js";

const SCRIPT = resolve(REPO, "test/support/engine-fixtures/fan-out-record.mjs");

/** One line of the records file. */
export interface FanOutLine {
  run: string;
  task: string;
  attempt: number;
  mode: string;
  event?: "start" | "end";
  at?: number;
  host?: string;
  index?: string;
  urls?: string[];
}

/** The node config (TOML) for the three actions, appending to `records`. */
export function fanOutActions(records: string): string {
  const node = JSON.stringify(process.execPath);
  const script = JSON.stringify(SCRIPT);
  const file = JSON.stringify(records);
  return `
[actions.discover]
argv = [${node}, ${script}, "discover", ${file}, "{n}"]
args = { n = { pattern = '[0-9]{1,5}' } }
timeout = "30s"
kill_grace = "300ms"

[actions.deploy]
argv = [${node}, ${script}, "deploy", ${file}, "{host}", "{index}"]
args = { host = { pattern = '[a-z0-9.-]+' }, index = { pattern = '[0-9]+' } }
timeout = "30s"
kill_grace = "300ms"

[actions.report]
argv = [${node}, ${script}, "report", ${file}, "{urls}"]
args = { urls = { pattern = 'u-[a-z0-9.-]+' } }
timeout = "30s"
kill_grace = "300ms"
`;
}

/** discover (n hosts, at most 100) → deploy for each host (max_parallel, one retry) → report. */
export function fleetDag(id: string, n: number, maxParallel: number): Record<string, unknown> {
  return {
    id,
    tasks: [
      {
        id: "discover",
        action: "discover",
        args: { n: String(n) },
        outputs: { hosts: { pattern: "[a-z0-9.-]+", list: true, max_items: 100 } },
      },
      {
        id: "deploy",
        action: "deploy",
        needs: ["discover"],
        args: { host: "{item}", index: "{item.index}" },
        outputs: { url: "u-[a-z0-9.-]+" },
        retries: 1,
        retry_backoff: "100ms",
        for_each: { items: "{tasks.discover.outputs.hosts}", max_parallel: maxParallel },
      },
      { id: "report", action: "report", needs: ["deploy"], args: { urls: "{tasks.deploy.outputs.url}" } },
    ],
  };
}

/** The records of one run. */
export function recordsOf(records: string, runId: string): FanOutLine[] {
  return readFileSync(records, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as FanOutLine)
    .filter((l) => l.run === runId);
}

/** The most actions between their start and end lines at any one time (an end before a start at the same ms). */
export function maxOverlap(lines: readonly FanOutLine[]): number {
  const edges = lines
    .filter((l) => l.event !== undefined)
    .map((l) => ({ at: l.at!, step: l.event === "start" ? 1 : -1 }))
    .sort((a, b) => a.at - b.at || a.step - b.step);
  let now = 0;
  let most = 0;
  for (const e of edges) {
    now += e.step;
    most = Math.max(most, now);
  }
  return most;
}
