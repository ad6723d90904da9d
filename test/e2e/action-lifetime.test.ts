/**
 * An action never outlives its node: a `dagbot node` process killed with SIGKILL takes
 * every process its actions started (their whole process groups: the action and its children) with
 * it, and a node frozen with SIGSTOP past its task lease has its action stopped before another node
 * could claim the task. Real node processes on a SQLite file; counted from the actions' own records
 * and the process table.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import {
  REPO,
  cli,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  waitForRunStatus,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { descendantsOf, isRunning } from "../support/process-tree.js";
import { untilNodeBeats, waitFor } from "../support/store-wait.js";

const RECORD = join(REPO, "test", "support", "engine-fixtures", "record.mjs");

/** The `rec` action: runs for {ms} and appends its start and end to the target's records file. */
function recordAction(target: Target): string {
  return `
[actions.rec]
argv = [${JSON.stringify(process.execPath)}, ${JSON.stringify(RECORD)}, "{ms}", ${JSON.stringify(recordsPath(target))}]
args = { ms = { pattern = '[0-9]{1,6}' } }
timeout = "60s"
kill_grace = "300ms"
`;
}

const recordsPath = (target: Target): string => join(target.dir, "records.jsonl");

interface Rec {
  ev: "start" | "end";
  run: string;
  task: string;
  attempt: number;
  pid: number;
  child: number;
  t: number;
  why?: string;
}

function records(target: Target): Rec[] {
  const path = recordsPath(target);
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Rec);
}

describe("an action never outlives its node", () => {
  let target: Target | null = null;
  let store: Store | null = null;
  const nodes: NodeProcess[] = [];
  const strays: number[] = [];

  beforeAll(() => requireBuild());

  afterEach(async (context) => {
    await killAll(nodes.splice(0));
    for (const pid of strays.splice(0)) if (isRunning(pid)) process.kill(pid, "SIGKILL");
    await store?.close();
    await target?.cleanup(context.task.result?.state === "fail");
    store = null;
    target = null;
  });

  it("kill -9 of a node ends every process its running actions started, children included", async () => {
    target = await createTarget("sqlite", "orphans");
    store = await target.open();
    const config = writeNodeConfig(target, { nodeId: "node-a", capacity: 3, extra: recordAction(target) });
    const node = startNode(target, config, "node-a");
    nodes.push(node);
    const tasks = ["a", "b", "c"].map((id) => ({ id, action: "rec", args: { ms: 30_000 } }));
    // `submit` refuses to wait for a room with no live node (exit 3): let the node beat first.
    const s = store;
    await untilNodeBeats(s);
    const submitted = await cli([
      "submit",
      writeDag(target, { id: "long", tasks }),
      "--config",
      config,
      "--confirm",
    ]);
    expect(submitted.code, submitted.stderr).toBe(0);
    const t = target;
    const started = await waitFor(
      "three actions running",
      () => records(t).filter((r) => r.ev === "start"),
      (rs) => rs.length === 3,
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    const family = descendantsOf(node.child.pid!);
    strays.push(...family);
    // Each action and the child it keeps are below the node.
    for (const r of started) expect(family).toEqual(expect.arrayContaining([r.pid, r.child]));

    const killedAt = Date.now();
    node.kill("SIGKILL");
    await node.exited;
    await waitFor(
      "every process the node's actions started to be gone",
      () => family.filter(isRunning),
      (alive) => alive.length === 0,
      { timeoutMs: 5_000, intervalMs: 20 },
    );
    const goneAfterMs = Date.now() - killedAt;
    // Their ends were recorded: each action was asked to stop (SIGTERM to its group), not left to finish.
    const ended = records(t).filter((r) => r.ev === "end");
    const termAfterMs = Math.max(...ended.map((r) => r.t - killedAt));
    console.log(
      `[action lifetime] ${family.length} processes below the killed node: SIGTERM seen ${termAfterMs} ms and all gone ${goneAfterMs} ms after kill -9`,
    );
    expect(ended.map((r) => r.why).sort()).toEqual(["term", "term", "term"]);
    expect(await waitForRunStatus(store, "long", () => true)).toBe("running");
  });
});
