/**
 * Chaos 3: the guarantees as side effects. Three `dagbot node` processes run two DAGs of
 * actions that each append their own start and end (wall-clock time, pid) to a file, while a driver
 * kills random nodes with SIGKILL (every other kill the leader) and freezes a worker with SIGSTOP
 * past its task lease, then resumes it. Counted from the actions' own records, never from the store:
 * two attempts of one task never ran at once, at most `cap` actions of the room and `max_parallel`
 * of a run ran at once, never two of one concurrency key, no action started (or kept running) after
 * its claim was lost, and no process of a killed node's actions was alive 2 s after the kill.
 * On SQLite and PostgreSQL.
 */
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import type { StoreKind, Target } from "../support/engine-cluster.js";
import { REPO, ROOM, allEvents, createTarget, requireBuild } from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";
import { ChatStandIn, Fleet, fleetUp, freezeOutsideWriteTransaction } from "../support/chaos-cluster.js";
import { errorLines } from "../support/chaos-checks.js";
import {
  ActionWatch,
  afterClaimLost,
  claimLostAt,
  keyOverlaps,
  maxAtOnce,
  overlappingAttempts,
} from "../support/chaos-records.js";
import type { AttemptInterval } from "../support/chaos-records.js";
import { CHAOS_LONG, Dice, chaosSeed, pause } from "../support/chaos-settings.js";
import { descendantsOf, isRunning } from "../support/process-tree.js";

const SIZE = CHAOS_LONG
  ? { tasksPerRun: 40, runMs: [3_000, 7_000] as const, kills: 10, freezes: 3, timeoutMs: 480_000 }
  : { tasksPerRun: 12, runMs: [2_500, 4_500] as const, kills: 2, freezes: 1, timeoutMs: 120_000 };
const TTL_MS = 2_000;
const CAP = 5;
const MAX_PARALLEL = 3;
const KEYS = ["k1", "k2"];
const RECORD = join(REPO, "test", "support", "engine-fixtures", "record.mjs");

/** Run "wide" is held to max_parallel; run "keyed" has every third task on a concurrency key. */
function dags(dice: Dice): Array<Record<string, unknown>> {
  const task = (prefix: string, i: number, extra: Record<string, unknown> = {}) => ({
    id: `${prefix}${String(i).padStart(2, "0")}`,
    action: "rec",
    args: { ms: dice.int(SIZE.runMs[0], SIZE.runMs[1]) },
    retries: 10,
    retry_backoff: "100ms",
    ...extra,
  });
  const n = SIZE.tasksPerRun;
  return [
    { id: "wide", max_parallel: MAX_PARALLEL, tasks: Array.from({ length: n }, (_, i) => task("w", i)) },
    {
      id: "keyed",
      tasks: Array.from({ length: n }, (_, i) =>
        task("k", i, i % 3 === 0 ? { concurrency_key: KEYS[(i / 3) % KEYS.length] } : {}),
      ),
    },
  ];
}

function describeSideEffects(kind: StoreKind): void {
  describe(`chaos on ${kind}: side effects under kill -9 and SIGSTOP`, () => {
    let target: Target | null = null;
    let store: Store | null = null;
    let fleet: Fleet | null = null;
    let watch: ActionWatch | null = null;
    const strays: number[] = [];

    beforeAll(() => requireBuild());

    afterEach(async (context) => {
      watch?.stop();
      await fleet?.killAll();
      for (const pid of strays.splice(0)) if (isRunning(pid)) process.kill(pid, "SIGKILL");
      await store?.close();
      await target?.cleanup(context.task.result?.state === "fail");
      fleet = null;
      store = null;
      target = null;
      watch = null;
    });

    it(
      `${SIZE.kills} kill -9 (the leader too) and ${SIZE.freezes} SIGSTOP past the lease: counted from the actions' records, no two attempts of a task at once, caps and keys hold, nothing runs without its claim, no orphan`,
      async () => {
        const dice = new Dice(chaosSeed());
        target = await createTarget(kind, "side-effects");
        store = await target.open();
        const s = store;
        const records = join(target.dir, "records.jsonl");
        fleet = new Fleet(target, ["node-a", "node-b", "node-c"], {
          capacity: 3,
          ttl: `${TTL_MS}ms`,
          renewEvery: "500ms",
          acquireEvery: "250ms",
          extra: `
[actions.rec]
argv = [${JSON.stringify(process.execPath)}, ${JSON.stringify(RECORD)}, "{ms}", ${JSON.stringify(records)}]
args = { ms = { pattern = '[0-9]{1,6}' } }
timeout = "60s"
kill_grace = "300ms"

[limits]
global_cap = ${CAP}
`,
        });
        const f = fleet;
        watch = new ActionWatch(records);
        watch.start();
        const chat = new ChatStandIn(s, f.nodeIds, `side-${kind}`);
        await fleetUp(s, 3);
        for (const dag of dags(dice)) {
          await chat.send(`!dag publish\n\`\`\`json\n${JSON.stringify(dag)}\n\`\`\``);
          await chat.send(`!dag confirm ${String(dag["id"])}`);
        }
        const runs = await waitFor(
          "both runs confirmed",
          async () => Promise.all(["wide", "keyed"].map((id) => s.getRun(ROOM, id))),
          (rs) => rs.every((r) => r !== null && r.status === "running"),
          { timeoutMs: 30_000, intervalMs: 50 },
        );
        const runIds = runs.map((r) => r!.runId);

        /** A node that executes tasks right now, preferring (or avoiding) the leader. */
        const busyNode = async (leader: boolean): Promise<string | null> => {
          const lease = await s.getLease(ROOM);
          const holder = lease?.holder?.nodeId ?? null;
          const tasks = (await Promise.all(runIds.map((id) => s.listTasks(id)))).flat();
          const busy = [
            ...new Set(tasks.filter((t) => t.status === "running").map((t) => t.executor!.nodeId)),
          ];
          const pick = busy.filter((n) => (leader ? n === holder : n !== holder));
          return pick.length > 0 ? dice.pick(pick) : leader ? holder : null;
        };

        const kills: Array<{ victim: string; leader: boolean; below: number; aliveAfter2s: number[] }> = [];
        const freezes: Array<
          { actionsRunningWhenFrozen: number; stoppedWhileFrozen: number } & Record<string, unknown>
        > = [];
        for (let round = 0; round < Math.max(SIZE.kills, SIZE.freezes); round++) {
          if (round < SIZE.kills) {
            // Let actions run for a while, then kill a node that runs some (every other kill the leader).
            await pause(dice.int(1_500, 3_000));
            const leader = round % 2 === 0;
            const victim = (await busyNode(leader)) ?? dice.pick(f.nodeIds);
            const pid = f.pid(victim);
            const below = pid === null ? [] : descendantsOf(pid);
            strays.push(...below);
            const lease = await s.getLease(ROOM);
            await f.kill(victim);
            await pause(2_000);
            kills.push({
              victim,
              leader: lease?.holder?.nodeId === victim,
              below: below.length,
              aliveAfter2s: below.filter(isRunning),
            });
            f.restart(victim);
          }
          if (round < SIZE.freezes) {
            await pause(dice.int(1_000, 2_000));
            const frozen = (await busyNode(false)) ?? (await busyNode(true));
            if (frozen === null) continue;
            const pid = f.pid(frozen);
            const below = new Set(pid === null ? [] : descendantsOf(pid));
            const running = watch.intervals().filter((i) => below.has(i.pid) && !Number.isFinite(i.end));
            const retries = await freezeOutsideWriteTransaction(f, frozen, target);
            // Frozen for well past its task lease: its claims are reaped and taken by other nodes.
            await pause(TTL_MS * 2 + 1_500);
            // Its actions were stopped by their claims' deadlines while it could do nothing.
            const stoppedWhileFrozen = running.filter((r) => !isRunning(r.pid)).length;
            f.signal(frozen, "SIGCONT");
            freezes.push({
              frozen,
              frozenInsideWriteTransaction: retries,
              actionsRunningWhenFrozen: running.length,
              stoppedWhileFrozen,
            });
          }
        }

        const statuses = await waitFor(
          "both runs to end",
          async () => Promise.all(["wide", "keyed"].map((id) => s.getRun(ROOM, id))),
          (rs) => rs.every((r) => r !== null && r.status !== "running"),
          { timeoutMs: SIZE.timeoutMs, intervalMs: 200 },
        ).then((rs) => rs.map((r) => r!.status));
        // Every action that started has ended (or was seen gone) before counting.
        await waitFor(
          "every recorded action to have ended",
          () => watch!.intervals(),
          (is) => is.every((i) => Number.isFinite(i.end)),
          { timeoutMs: 15_000, intervalMs: 50 },
        );
        watch.stop();

        const intervals = watch.intervals();
        const tasks = (await Promise.all(runIds.map((id) => s.listTasks(id)))).flat();
        const keyOf = new Map(tasks.map((t) => [`${t.runId}/${t.taskId}`, t.concurrencyKey]));
        const events = await allEvents(s);
        const lost = afterClaimLost(intervals, claimLostAt(events));
        const ofRun = (runId: string): AttemptInterval[] => intervals.filter((i) => i.run === runId);
        const twoAttempts = overlappingAttempts(intervals);
        const keyClashes = keyOverlaps(intervals, (i) => keyOf.get(`${i.run}/${i.task}`) ?? null);
        const orphans = kills.flatMap((k) => k.aliveAfter2s);
        const counts = {
          seed: dice.seed,
          store: kind,
          actionsStarted: intervals.length,
          retries: tasks.reduce((n, t) => n + t.attempt - 1, 0),
          kills: kills.map(({ victim, leader, below }) => ({ victim, leader, processesBelow: below })),
          freezes,
          twoAttemptsOfOneTaskAtOnce: twoAttempts.length,
          maxActionsAtOnce: maxAtOnce(intervals),
          cap: CAP,
          maxActionsOfRunAtOnce: maxAtOnce(ofRun(runIds[0]!)),
          maxParallel: MAX_PARALLEL,
          overlapsWithinAConcurrencyKey: keyClashes.length,
          startedAfterClaimLost: lost.started.length,
          runningAfterClaimLost: lost.running.length,
          aliveTwoSecondsAfterTheirNodeDied: orphans.length,
        };
        console.log(`[chaos side effects ${kind}] ${JSON.stringify(counts, null, 1)}`);

        expect(statuses).toEqual(["succeeded", "succeeded"]);
        expect(twoAttempts).toEqual([]);
        expect(counts.maxActionsAtOnce).toBeLessThanOrEqual(CAP);
        expect(counts.maxActionsOfRunAtOnce).toBeLessThanOrEqual(MAX_PARALLEL);
        expect(keyClashes).toEqual([]);
        expect(lost.started).toEqual([]);
        expect(lost.running).toEqual([]);
        expect(orphans).toEqual([]);
        // The scenario did what it says: nodes with running actions died, and a frozen one came back.
        expect(kills.filter((k) => k.below > 0).length).toBeGreaterThan(0);
        expect(kills.some((k) => k.leader)).toBe(true);
        expect(freezes.length).toBe(SIZE.freezes);
        expect(freezes.map((z) => z.stoppedWhileFrozen)).toEqual(
          freezes.map((z) => z.actionsRunningWhenFrozen),
        );
        expect(f.crashes).toEqual([]);
        expect(f.logs().flatMap(errorLines)).toEqual([]);
      },
      SIZE.timeoutMs + 120_000,
    );
  });
}

describeSideEffects("sqlite");
describeSideEffects("postgres");
