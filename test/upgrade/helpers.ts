/**
 * What the upgrade tests share: steps that say which part of the upgrade failed, reading CLI
 * answers and node logs, and waiting for a run to end (as today's `dagbot status` reports it).
 */
import { rmSync } from "node:fs";
import { dropOrKeep } from "../support/postgres.js";
import type { TestDatabase } from "../support/postgres.js";
import { readSchemaGolden, sha256 } from "../support/schema-dump.js";
import { waitFor } from "../support/store-wait.js";
import type { ActionRecord, Fleet } from "./fleet.js";
import { killAll } from "./releases.js";
import type { CliResult, NodeProcess, Release } from "./releases.js";
import { runCli, said } from "./releases.js";
import type { StoreProbe } from "./store-probe.js";

/** Fails with `what` first, so the message says which part of the upgrade went wrong. */
export async function step<T>(what: string, fn: () => Promise<T> | T): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    const err = new Error(`${what}: ${message}`);
    if (e instanceof Error && e.stack !== undefined)
      err.stack = `${err.message}\n${e.stack.split("\n").slice(1).join("\n")}`;
    throw err;
  }
}

export function check(ok: boolean, message: string): void {
  if (!ok) throw new Error(message);
}

export function parseJson(r: CliResult): Record<string, unknown> {
  try {
    return JSON.parse(r.stdout) as Record<string, unknown>;
  } catch {
    throw new Error(`expected JSON on stdout from ${said(r)}`);
  }
}

export interface NodesView {
  nodes: Array<{ nodeId: string; state: string } & Record<string, unknown>>;
  leaders: Array<{ room: string; nodeId: string }>;
}

/**
 * The test database's URL without its `options` parameter: test/support/postgres.ts makes every
 * connection of a test database speak today's fleet protocol (`-c dagbot.protocol=2`), and the
 * previous release passes a URL's options on to the server, so its nodes would pass the fence.
 * Each release's nodes must connect as an operator's config would have them.
 */
export function plainUrl(url: string): string {
  const u = new URL(url);
  u.searchParams.delete("options");
  return u.toString();
}

/** Waits until `dagbot status RUN --json` of today's release says the run ended, and that it succeeded. */
export async function waitForRun(
  now: Release,
  dir: string,
  config: string,
  run: string,
  timeoutMs: number,
): Promise<void> {
  const ended = await waitFor(
    `run ${run} to end`,
    async () => {
      const r = await runCli(now, ["status", run, "--json", "--config", config], { cwd: dir });
      return { r, status: runStatus(r) };
    },
    (s) =>
      s.status !== null && !["pending", "running", "awaiting", "awaiting_confirmation"].includes(s.status),
    { timeoutMs, intervalMs: 250 },
  );
  check(ended.status === "succeeded", `run ${run} ended ${ended.status}: ${said(ended.r)}`);
}

export function runStatus(r: CliResult): string | null {
  try {
    const o = JSON.parse(r.stdout) as Record<string, unknown>;
    const run = (o["run"] ?? o) as Record<string, unknown>;
    return typeof run["status"] === "string" ? run["status"] : null;
  } catch {
    return null;
  }
}

export interface LogLine {
  level: string;
  time: string;
  msg: string;
  err?: string;
  reason?: string;
}

/** The warnings and errors a node logged since `sinceMs`. */
export function complaints(n: NodeProcess, sinceMs: number): LogLine[] {
  const out: LogLine[] = [];
  for (const text of n.log().split("\n")) {
    if (!text.startsWith("{")) continue;
    try {
      const l = JSON.parse(text) as LogLine;
      if ((l.level === "warn" || l.level === "error" || l.level === "fatal") && Date.parse(l.time) >= sinceMs)
        out.push(l);
    } catch {
      // a line cut short by a kill
    }
  }
  return out;
}

export function lines(rs: readonly ActionRecord[]): string {
  return rs.map((r) => JSON.stringify(r)).join("\n");
}

export function tail(n: NodeProcess, count = 25): string {
  return n.log().trimEnd().split("\n").slice(-count).join("\n");
}

export function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, fail) => {
      timer = setTimeout(() => fail(new Error(message)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Checks that later steps do not depend on, collected (`soft`) so one run names every problem;
 * `withProblems` puts them under the error that ended the test.
 */
export function softChecks(): {
  problems: string[];
  soft: (what: string, fn: () => Promise<unknown>) => Promise<void>;
  withProblems: (e: unknown) => unknown;
} {
  const problems: string[] = [];
  return {
    problems,
    soft: async (what, fn) => {
      try {
        await fn();
      } catch (e) {
        problems.push(`${what}: ${e instanceof Error ? e.message : String(e)}`);
      }
    },
    withProblems: (e) => {
      if (problems.length === 0 || !(e instanceof Error)) return e;
      e.message = `${e.message}\n\nand before that:\n${problems.join("\n\n")}`;
      return e;
    },
  };
}

/**
 * The end of an upgrade test: its nodes stopped, and when it failed their log tails printed and its
 * folder and database kept for a look; else both removed.
 */
export async function endUpgradeTest(o: {
  fleet: Fleet | null;
  db: TestDatabase | null;
  dir: string;
  failed: boolean;
  /** What the folder is, in the line that says it was kept. */
  folder: string;
}): Promise<void> {
  if (o.fleet !== null) {
    await killAll(o.fleet.nodes);
    if (o.failed)
      for (const n of o.fleet.nodes)
        console.warn(`--- ${n.nodeId} (${n.release.label}) log tail:\n${tail(n)}`);
  }
  if (o.db !== null) await dropOrKeep(o.db, o.failed);
  if (o.failed) console.warn(`kept the ${o.folder} ${o.dir} (configs, node logs, records.jsonl)`);
  else rmSync(o.dir, { recursive: true, force: true });
}

/**
 * Checks a live store's schema against the golden dumps of test/adapters/schema-golden/, which were
 * taken from today's migration files on an empty store: a store a previous release made with its own
 * migrations must be the golden schema of its version, and one today's build migrated the whole
 * golden schema of the newest (docs/architecture.md §11, "a released file never changes").
 */
export async function checkSchemaGolden(probe: StoreProbe, version: number, whose: string): Promise<void> {
  const golden = readSchemaGolden(probe.kind);
  const dump = await probe.schemaDump();
  const newest = Math.max(...golden.steps.keys());
  if (version === newest) {
    if (dump === golden.schema) return;
    const have = dump.split("\n");
    const want = golden.schema.split("\n");
    let at = 0;
    while (have[at] === want[at]) at++;
    throw new Error(
      `${whose} ${probe.kind} store at schema ${version} is not the golden schema ` +
        `(test/adapters/schema-golden/${probe.kind}-schema.txt); first difference at line ${at + 1}:\n` +
        `  store:  ${have[at] ?? "(end)"}\n  golden: ${want[at] ?? "(end)"}`,
    );
  }
  const expected = golden.steps.get(version);
  check(
    expected !== undefined && sha256(dump) === expected,
    `${whose} ${probe.kind} store at schema ${version} is not the golden schema of that version ` +
      `(test/adapters/schema-golden/${probe.kind}-steps.txt: ${expected ?? "none recorded"}, the store's: ${sha256(dump)})`,
  );
}
