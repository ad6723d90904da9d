/**
 * Chaos 1: a DAG on 3 `dagbot node` processes sharing a PRIVATE PostgreSQL server, while a
 * driver kills a random node (every third kill the leader) with SIGKILL every few seconds and starts
 * it again under the same node_id, a chat stand-in keeps sending commands through the inbox, and the
 * server itself is crash-stopped and restarted once mid-run. The guarantees are read from the event
 * log afterwards: the run succeeds, each task succeeded exactly once, each command was handled and
 * answered once, and leader terms never overlap.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import { ROOM, allEvents, requireBuild } from "../support/engine-cluster.js";
import type { Target } from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";
import type { PgInstance } from "../support/pg-instance.js";
import { startPgInstance } from "../support/pg-instance.js";
import { ChatStandIn, Fleet, fleetUp, STRANGER, targetAt } from "../support/chaos-cluster.js";
import {
  STALE_WRITE_MESSAGES,
  STORE_FAILURE_MESSAGES,
  countMessages,
  errorLines,
  exactlyOnceSuccess,
  inboxOnceViolations,
  leaderTermViolations,
} from "../support/chaos-checks.js";
import { CHAOS_LONG, Dice, chaosSeed, pause } from "../support/chaos-settings.js";
import { ZombieLedger } from "../support/chaos-zombies.js";

const SIZE = CHAOS_LONG
  ? { tasks: 500, napMs: [800, 2400] as const, killGapMs: [2000, 4500] as const, timeoutMs: 420_000 }
  : { tasks: 150, napMs: [400, 1400] as const, killGapMs: [1500, 3000] as const, timeoutMs: 150_000 };
const LAYER = 50;
const DAG_ID = `chaos-${SIZE.tasks}`;

/** Layers of 50 tasks; each needs its twin in the layer before, some a second one too. */
function chaosDag(dice: Dice): Record<string, unknown> {
  const id = (i: number): string => `t${String(i).padStart(3, "0")}`;
  const tasks = Array.from({ length: SIZE.tasks }, (_, i) => {
    const needs =
      i >= LAYER
        ? [id(i - LAYER), ...(i % 7 === 0 && i % LAYER !== LAYER - 1 ? [id(i - LAYER + 1)] : [])]
        : [];
    const s = (dice.int(SIZE.napMs[0], SIZE.napMs[1]) / 1000).toFixed(2);
    return {
      id: id(i),
      action: "nap",
      args: { s },
      retries: 10,
      retry_backoff: "100ms",
      ...(needs.length > 0 ? { needs } : {}),
    };
  });
  return { id: DAG_ID, max_parallel: 32, tasks };
}

describe("chaos: kill -9 and a PostgreSQL restart under a running DAG", () => {
  let pg: PgInstance | null = null;
  let target: Target | null = null;
  let store: Store | null = null;
  let fleet: Fleet | null = null;
  let failed = true;

  beforeAll(() => requireBuild());

  afterAll(async () => {
    await fleet?.killAll();
    await store?.close();
    await target?.cleanup(failed);
    await pg?.destroy(failed);
  });

  it(
    `${SIZE.tasks} tasks on 3 nodes survive kill -9 of any node (the leader too) and a server restart: each task succeeds once, each command is handled once, terms never overlap`,
    async () => {
      const dice = new Dice(chaosSeed());
      const started = Date.now();
      pg = await startPgInstance("kill");
      const url = await pg.createDatabase("dagbot_chaos");
      target = targetAt("postgres", "kill", url);
      store = await target.open();
      const s = store;
      fleet = new Fleet(target, ["node-a", "node-b", "node-c"], {
        capacity: 4,
        ttl: "2s",
        renewEvery: "500ms",
        acquireEvery: "250ms",
      });
      const f = fleet;
      const chat = new ChatStandIn(s, f.nodeIds);
      await fleetUp(s, 3);

      const dag = chaosDag(dice);
      const body = `!dag publish\n\`\`\`json\n${JSON.stringify(dag)}\n\`\`\``;
      expect(Buffer.byteLength(body)).toBeLessThan(64 * 1024);
      const publish = await chat.send(body);
      const confirm = await chat.send(`!dag confirm ${DAG_ID}`);
      const run = await waitFor(
        "the run confirmed",
        () => s.getRun(ROOM, DAG_ID),
        (r) => r !== null && r.status !== "pending",
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      const runId = run!.runId;

      let stop = false;
      let kills = 0;
      let leaderKills = 0;
      let pgRestarts = 0;
      const capCommands: string[] = [];
      const refused: string[] = [];
      const zombies = new ZombieLedger();

      const killer = (async () => {
        while (!stop) {
          await pause(dice.int(SIZE.killGapMs[0], SIZE.killGapMs[1]));
          if (stop) break;
          const lease = await s.getLease(ROOM).catch(() => null);
          const leader = lease?.holder != null && lease.expiresAt > lease.now ? lease.holder.nodeId : null;
          const victim = kills % 3 === 0 && leader !== null ? leader : dice.pick(f.nodeIds);
          await zombies.note(s, victim, runId);
          await f.kill(victim);
          kills += 1;
          if (victim === leader) leaderKills += 1;
          await pause(dice.int(0, 800));
          f.restart(victim);
        }
      })();

      const talker = (async () => {
        const reads = [
          "!dag status",
          `!dag status ${DAG_ID}`,
          "!dag list",
          "!dag nodes",
          "!dag help",
          `!dag logs ${DAG_ID} t001`,
        ];
        while (!stop) {
          const roll = dice.next();
          if (roll < 0.2) {
            const c = await chat.send(`!dag cap ${dice.int(8, 20)}`);
            capCommands.push(c.eventId);
          } else if (roll < 0.27) {
            const c = await chat.send("!dag cap 1", STRANGER);
            refused.push(c.eventId);
          } else {
            await chat.send(dice.pick(reads));
          }
          await pause(dice.int(150, 500));
        }
      })();

      // The server restart, once, when about a third of the tasks are done.
      await waitFor(
        "a third of the tasks succeeded",
        () => s.listTasks(runId),
        (ts) => ts.filter((t) => t.status === "succeeded").length >= SIZE.tasks / 3,
        { timeoutMs: SIZE.timeoutMs, intervalMs: 200 },
      );
      const downAt = Date.now();
      await pg.crash();
      await pause(dice.int(500, 2000));
      await pg.start();
      pgRestarts += 1;
      const downMs = Date.now() - downAt;

      const status = await waitFor(
        "the run to end",
        () => s.getRun(ROOM, DAG_ID),
        (r) => r !== null && r.status !== "running",
        { timeoutMs: SIZE.timeoutMs, intervalMs: 200 },
      ).then((r) => r!.status);
      stop = true;
      await Promise.all([killer, talker]);
      for (const id of f.nodeIds) if (!f.isRunning(id)) f.restart(id);
      const last = await chat.send(`!dag status ${DAG_ID}`);
      await waitFor(
        "every command answered",
        async () => Promise.all(chat.sent.map((c) => s.getInboxEvent(c.eventId))),
        (rows) => rows.every((r) => r?.status === "replied"),
        { timeoutMs: 60_000, intervalMs: 100 },
      );
      const wallMs = Date.now() - started;
      // The dead lives' credentials, replayed now that others have moved on: every write refused.
      const zombie = await zombies.replay(s);

      const events = await allEvents(s);
      const tasks = await s.listTasks(runId);
      const logs = f.logs();
      const stale = countMessages(logs, STALE_WRITE_MESSAGES);
      const storeFailures = countMessages(logs, STORE_FAILURE_MESSAGES);
      const terms = events.filter((e) => e.kind === "lease.acquired");
      const retries = tasks.reduce((n, t) => n + t.attempt - 1, 0);
      const reaperRequeues = events.filter(
        (e) => e.kind === "task.queued" && typeof e.data["reason"] === "string",
      ).length;
      const capSets = events.filter((e) => e.kind === "cap.set" && e.term !== null).length;
      const errors = logs.flatMap(errorLines);
      const counts = {
        seed: dice.seed,
        tasks: SIZE.tasks,
        wallMs,
        kills,
        leaderKills,
        nodeLives: f.lives(),
        pgRestarts,
        pgDownMs: downMs,
        leaderTerms: terms.length,
        takeovers: terms.length - 1,
        retries,
        reaperRequeues,
        zombieWritesRejected: zombie.rejected,
        zombieFences: zombies.fences.length,
        zombieTaskTokens: zombies.tokens.length,
        staleWritesRejectedInNodes: Object.values(stale).reduce((a, b) => a + b, 0),
        staleByKind: stale,
        leadershipLost: countMessages(logs, ["lost leadership"])["lost leadership"],
        refusedStarts: f.refusedStarts.length,
        storeFailuresRiddenOut: storeFailures,
        commands: chat.sent.length,
        duplicateInboxInserts: chat.duplicates,
        inboxInsertRetries: chat.insertFailures,
        capCommands: capCommands.length,
        capSets,
        // setRoomCap is not in the inbox mark's transaction (DESIGN-accepted: setting a cap twice is
        // harmless): a leader killed between the two makes its successor set the same cap again.
        capEffectsRepeated: capSets - capCommands.length,
        refused: refused.length,
        errorLines: errors.length,
        crashes: f.crashes.length,
      };
      console.log(`[chaos kill-restart] ${JSON.stringify(counts, null, 1)}`);

      expect(zombie.accepted).toEqual([]);
      expect(zombie.otherErrors).toEqual([]);
      expect(zombie.rejected).toBe(3 * zombies.fences.length + zombies.tokens.length);
      expect(status).toBe("succeeded");
      expect(await exactlyOnceSuccess(s, events, runId, SIZE.tasks)).toEqual([]);
      expect(
        await inboxOnceViolations(
          s,
          events,
          chat.sent.map((c) => c.eventId),
          // Engine-only nodes queue no chat messages: no reply is due.
          () => true,
        ),
      ).toEqual([]);
      expect(leaderTermViolations(events)).toEqual([]);
      expect(events.filter((e) => e.kind === "run.created" && e.runId === runId)).toHaveLength(1);
      expect(events.filter((e) => e.kind === "run.running" && e.runId === runId)).toHaveLength(1);
      expect((await s.getInboxEvent(publish.eventId))?.result?.["runId"] ?? runId).toBe(runId);
      expect((await s.getInboxEvent(confirm.eventId))?.status).toBe("replied");
      expect((await s.getInboxEvent(last.eventId))?.status).toBe("replied");
      // A refused cap never changes the cap; an allowed one sets it once (twice only across a crash
      // between the set and the inbox mark, harmless: setting the same cap twice changes nothing more).
      expect(capSets).toBeGreaterThanOrEqual(capCommands.length);
      expect(f.crashes).toEqual([]);
      expect(errors).toEqual([]);
      expect(kills).toBeGreaterThan(0);
      expect(leaderKills).toBeGreaterThan(0);
      expect(chat.sent.length).toBeGreaterThan(2);
      failed = false;
    },
    SIZE.timeoutMs + 120_000,
  );
});
