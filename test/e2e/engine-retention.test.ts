// Forgetting, as a user sees it with real `dagbot node` processes on a SQLite file and short
// retention: a node killed with kill -9 shows as gone in `dagbot nodes` (and --json) with how long
// ago it was last heard of, and the leader then drops it; a run submitted from the CLI finishes, is
// answered on the CLI, leaves nothing queued for a chat that does not exist, and is pruned with its
// tasks, events and commands once past the retention.
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import {
  ROOM,
  allEvents,
  cli,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  waitForRunStatus,
  writeDag,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";

const RETENTION = `
[retention]
finished = "3s"
node_gone_after = "1500ms"
forget_nodes_after = "5s"
`;

interface NodesJson {
  goneAfterMs: number;
  nodes: Array<{ nodeId: string; state: "alive" | "gone"; heartbeatAgeMs: number }>;
}

let target: Target;
let failed = false;
const nodes: NodeProcess[] = [];

beforeAll(async () => {
  requireBuild();
  target = await createTarget("sqlite", "retention");
});

afterAll(async () => {
  await killAll(nodes);
  await target.cleanup(failed);
});

function track<T>(p: Promise<T>): Promise<T> {
  return p.catch((e: unknown) => {
    failed = true;
    throw e;
  });
}

describe("retention with real nodes", () => {
  it("shows a killed node as gone with its silence, then the leader drops it", async () => {
    await track(
      (async () => {
        const configA = writeNodeConfig(target, { nodeId: "keeper", extra: RETENTION });
        const configB = writeNodeConfig(target, { nodeId: "doomed", extra: RETENTION });
        nodes.push(startNode(target, configA, "keeper"));
        const doomed = startNode(target, configB, "doomed");
        nodes.push(doomed);
        const listed = async (): Promise<NodesJson> => {
          const r = await cli(["nodes", "--json", "--config", configA], { cwd: target.dir });
          expect(r.code, r.stderr).toBe(0);
          return JSON.parse(r.stdout) as NodesJson;
        };
        const stateOf = (j: NodesJson, id: string) => j.nodes.find((n) => n.nodeId === id);
        await waitFor(
          "both nodes alive",
          listed,
          (j) => stateOf(j, "keeper")?.state === "alive" && stateOf(j, "doomed")?.state === "alive",
          { timeoutMs: 20_000, intervalMs: 200 },
        );

        doomed.kill("SIGKILL");
        await doomed.exited;
        const gone = await waitFor(
          "doomed shown as gone",
          listed,
          (j) => stateOf(j, "doomed")?.state === "gone",
          {
            timeoutMs: 20_000,
            intervalMs: 200,
          },
        );
        expect(gone.goneAfterMs).toBe(1_500);
        expect(stateOf(gone, "doomed")?.heartbeatAgeMs).toBeGreaterThan(1_500);
        expect(stateOf(gone, "keeper")?.state).toBe("alive");
        const text = await cli(["nodes", "--config", configA], { cwd: target.dir });
        expect(text.stdout).toMatch(/^doomed\s+gone: last heartbeat \d+(\.\d)?s ago$/m);

        // Silent for forget_nodes_after: the leader (keeper, the only node left) prunes the row.
        const dropped = await waitFor("doomed dropped", listed, (j) => stateOf(j, "doomed") === undefined, {
          timeoutMs: 30_000,
          intervalMs: 250,
        });
        expect(stateOf(dropped, "keeper")?.state).toBe("alive");
      })(),
    );
  });

  it("answers CLI commands without queueing chat messages, and prunes the finished run with its tasks, events and commands", async () => {
    await track(
      (async () => {
        const configA = writeNodeConfig(target, { nodeId: "keeper", extra: RETENTION });
        const dag = writeDag(target, {
          id: "short-lived",
          tasks: [
            { id: "a", action: "echo", args: { message: "one" } },
            { id: "b", action: "echo", args: { message: "two" }, needs: ["a"] },
          ],
        });
        const submitted = await cli(["submit", dag, "--confirm", "--json", "--config", configA], {
          cwd: target.dir,
        });
        expect(submitted.code, submitted.stderr).toBe(0);
        // The answer is rendered from the stored outcome, as the chat reply would read.
        expect(submitted.stderr).toMatch(/short-lived/);
        const { runId } = JSON.parse(submitted.stdout) as { runId: string };
        const store = await target.open();
        try {
          expect(await waitForRunStatus(store, "short-lived", (s) => s === "succeeded")).toBe("succeeded");
          const raw = new Database(target.store.replace(/^sqlite:/, ""), { readonly: true });
          try {
            const count = (sql: string, ...args: unknown[]): number =>
              (raw.prepare(sql).get(...args) as { n: number }).n;
            expect(count("SELECT count(*) AS n FROM processed_events WHERE room_id = ?", ROOM)).toBe(2);
            // Engine-only: nothing would send a chat message, so none was queued.
            expect(count("SELECT count(*) AS n FROM outbox")).toBe(0);

            await waitFor(
              "run pruned",
              () => store.getRunById(runId),
              (r) => r === null,
              {
                timeoutMs: 30_000,
                intervalMs: 250,
              },
            );
            expect(await store.listTasks(runId)).toEqual([]);
            expect((await allEvents(store)).filter((e) => e.runId === runId)).toEqual([]);
            await waitFor(
              "commands pruned",
              () => count("SELECT count(*) AS n FROM processed_events WHERE room_id = ?", ROOM),
              (n) => n === 0,
              { timeoutMs: 30_000, intervalMs: 250 },
            );
            expect((await allEvents(store)).some((e) => e.kind === "retention.pruned")).toBe(true);
          } finally {
            raw.close();
          }
        } finally {
          await store.close();
        }
      })(),
    );
  });
});
