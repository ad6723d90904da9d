/**
 * Chaos 2: the leader is frozen with SIGSTOP, mid-run and while it executes tasks, for
 * longer than the lease TTL, then resumed with SIGCONT. Another node must take over with a higher
 * term; the frozen node must not write with its old term once the new one began (read from the event
 * log), its old credentials must be refused by the store, and it must come back as a follower (its
 * heartbeats resume; it may only lead again under a new term). On SQLite and PostgreSQL.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import type { LogEvent, Store } from "../../src/ports/store.js";
import type { StoreKind, Target } from "../support/engine-cluster.js";
import { ROOM, allEvents, createTarget, requireBuild } from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";
import { ChatStandIn, Fleet, fleetUp, freezeOutsideWriteTransaction } from "../support/chaos-cluster.js";
import {
  STALE_WRITE_MESSAGES,
  countMessages,
  errorLines,
  exactlyOnceSuccess,
  inboxOnceViolations,
  leaderTermViolations,
  readNodeLog,
} from "../support/chaos-checks.js";
import { CHAOS_LONG, Dice, chaosSeed } from "../support/chaos-settings.js";
import { ZombieLedger } from "../support/chaos-zombies.js";

const ROUNDS = CHAOS_LONG ? 3 : 1;
const TASKS = CHAOS_LONG ? 120 : 48;
const DAG_ID = "frozen";

/** What a node said after it was resumed, about leading and about writes it was refused or held back. */
const AFTER_RESUME_MESSAGES = [
  ...STALE_WRITE_MESSAGES,
  "lost leadership",
  "task lease passed without a renewal; abandoning the attempt",
  "attempt abandoned; the lease will expire and the leader requeues it",
];

function frozenDag(dice: Dice): Record<string, unknown> {
  const tasks = Array.from({ length: TASKS }, (_, i) => ({
    id: `p${String(i).padStart(3, "0")}`,
    action: "nap",
    args: { s: (dice.int(600, 1400) / 1000).toFixed(2) },
    retries: 10,
    retry_backoff: "100ms",
    ...(i >= 12 ? { needs: [`p${String(i - 12).padStart(3, "0")}`] } : {}),
  }));
  return { id: DAG_ID, tasks };
}

const firstWith = (events: readonly LogEvent[], p: (e: LogEvent) => boolean): LogEvent | undefined =>
  events.find(p);

function describePause(kind: StoreKind): void {
  describe(`chaos on ${kind}: a leader frozen past its TTL`, () => {
    let target: Target | null = null;
    let store: Store | null = null;
    let fleet: Fleet | null = null;

    beforeAll(() => requireBuild());

    afterEach(async (context) => {
      const failed = context.task.result?.state === "fail";
      await fleet?.killAll();
      await store?.close();
      await target?.cleanup(failed);
      fleet = null;
      store = null;
      target = null;
    });

    it(
      `SIGSTOP of the leader for longer than the TTL (${ROUNDS} round${ROUNDS > 1 ? "s" : ""}): a new term takes over, the old term never writes again, the node rejoins as a follower`,
      async () => {
        const dice = new Dice(chaosSeed());
        target = await createTarget(kind, "pause");
        store = await target.open();
        const s = store;
        fleet = new Fleet(target, ["node-a", "node-b", "node-c"], {
          capacity: 3,
          ttl: "2s",
          renewEvery: "500ms",
          acquireEvery: "250ms",
        });
        const f = fleet;
        const chat = new ChatStandIn(s, f.nodeIds, `pause-${kind}`);
        await fleetUp(s, 3);
        await chat.send(`!dag publish\n\`\`\`json\n${JSON.stringify(frozenDag(dice))}\n\`\`\``);
        await chat.send(`!dag confirm ${DAG_ID}`);
        const runId = (await waitFor(
          "the run confirmed",
          () => s.getRun(ROOM, DAG_ID),
          (r) => r !== null && r.status === "running",
          { timeoutMs: 30_000, intervalMs: 50 },
        ))!.runId;

        const zombies = new ZombieLedger();
        const rounds: Array<Record<string, unknown>> = [];
        for (let round = 0; round < ROUNDS; round++) {
          // The leader, caught while it executes tasks of its own: both kinds of its writes are in flight.
          const caught = await waitFor(
            "a leader that is executing tasks",
            async () => {
              const lease = await s.getLease(ROOM);
              const tasks = await s.listTasks(runId);
              return { lease, tasks };
            },
            ({ lease, tasks }) =>
              lease?.holder != null &&
              lease.expiresAt > lease.now &&
              tasks.some((t) => t.status === "running" && t.executor?.bootId === lease.holder?.bootId),
            { timeoutMs: 60_000, intervalMs: 25 },
          );
          const old = caught.lease!;
          const frozen = old.holder!.nodeId;
          const oldSession = `${frozen}/${old.holder!.bootId}`;
          const logLinesBefore = readNodeLog(f.logPath(frozen)).length;
          await zombies.note(s, frozen, runId);
          const heldTasks = zombies.tokens.filter((t) => t.session.bootId === old.holder!.bootId).length;

          const refrozen = await freezeOutsideWriteTransaction(f, frozen, target);
          // Frozen until others have moved on: a new term, and its tasks taken from it.
          const takeover = await waitFor(
            "another node to lead with a higher term",
            async () =>
              firstWith(await allEvents(s), (e) => e.kind === "lease.acquired" && (e.term ?? 0) > old.term),
            (e) => e !== undefined,
            { timeoutMs: 30_000, intervalMs: 50 },
          );
          await waitFor(
            "the frozen node's tasks requeued",
            () => s.listTasks(runId),
            (ts) => !ts.some((t) => t.executor?.bootId === old.holder!.bootId && t.status === "running"),
            { timeoutMs: 30_000, intervalMs: 50 },
          );
          // The room keeps answering while its old leader is frozen.
          const during = await chat.send("!dag status");
          await waitFor(
            "a command answered by the new leader",
            () => s.getInboxEvent(during.eventId),
            (r) => r?.status === "replied",
            { timeoutMs: 30_000, intervalMs: 50 },
          );
          const resumedAt = await s.now();
          f.signal(frozen, "SIGCONT");

          const rejoined = await waitFor(
            "the resumed node's heartbeat",
            () => s.listNodes(),
            (ns) => ns.some((n) => n.session.nodeId === frozen && n.heartbeatAt > resumedAt),
            { timeoutMs: 30_000, intervalMs: 50 },
          );
          const lost = await waitFor(
            "the resumed node to say it lost leadership",
            () => readNodeLog(f.logPath(frozen)).slice(logLinesBefore),
            (lines) => lines.some((l) => l["msg"] === "lost leadership" && l["term"] === old.term),
            { timeoutMs: 30_000, intervalMs: 50 },
          );
          const events = await allEvents(s);
          const lateOld = events.filter((e) => e.term === old.term && e.seq > takeover!.seq);
          // It may lead again, but only under a term newer than the one that replaced it.
          const laterTerms = events.filter(
            (e) =>
              e.kind === "lease.acquired" &&
              e.actor === oldSession &&
              e.seq > takeover!.seq &&
              (e.term ?? 0) <= (takeover!.term ?? 0),
          );
          expect(lateOld).toEqual([]);
          expect(laterTerms).toEqual([]);
          expect(rejoined.find((n) => n.session.nodeId === frozen)?.session.bootId).toBe(old.holder!.bootId);
          const said = countMessages([lost], AFTER_RESUME_MESSAGES);
          rounds.push({
            frozen,
            oldTerm: old.term,
            newTerm: takeover!.term,
            newLeader: takeover!.actor,
            tasksHeldWhenFrozen: heldTasks,
            frozenInsideWriteTransaction: refrozen,
            lostLeadership: lost.find((l) => l["msg"] === "lost leadership")?.["why"],
            afterResume: Object.fromEntries(Object.entries(said).filter(([, n]) => n > 0)),
          });
        }

        const status = await waitFor(
          "the run to end",
          () => s.getRun(ROOM, DAG_ID),
          (r) => r !== null && r.status !== "running",
          { timeoutMs: 120_000, intervalMs: 100 },
        ).then((r) => r!.status);
        await waitFor(
          "every command answered",
          () => Promise.all(chat.sent.map((c) => s.getInboxEvent(c.eventId))),
          (rows) => rows.every((r) => r?.status === "replied"),
          { timeoutMs: 30_000, intervalMs: 100 },
        );
        const zombie = await zombies.replay(s);
        const events = await allEvents(s);
        const logs = f.logs();
        const terms = events.filter((e) => e.kind === "lease.acquired");
        console.log(
          `[chaos pause ${kind}] ${JSON.stringify(
            {
              seed: dice.seed,
              rounds,
              leaderTerms: terms.length,
              zombieWritesRejected: zombie.rejected,
              staleWritesRejectedInNodes: countMessages(logs, STALE_WRITE_MESSAGES),
              retries: (await s.listTasks(runId)).reduce((n, t) => n + t.attempt - 1, 0),
            },
            null,
            1,
          )}`,
        );

        expect(status).toBe("succeeded");
        expect(zombie.accepted).toEqual([]);
        expect(zombie.otherErrors).toEqual([]);
        expect(zombie.rejected).toBe(3 * zombies.fences.length + zombies.tokens.length);
        expect(zombies.fences).toHaveLength(ROUNDS);
        expect(await exactlyOnceSuccess(s, events, runId, TASKS)).toEqual([]);
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
        expect(f.crashes).toEqual([]);
        expect(logs.flatMap(errorLines)).toEqual([]);
      },
      CHAOS_LONG ? 300_000 : 150_000,
    );
  });
}

describePause("sqlite");
describePause("postgres");
