/**
 * Chaos on PostgreSQL: the leader frozen (SIGSTOP) while one of its connections is inside a
 * transaction. Its fence check holds a lock on the room's lease row until that transaction ends,
 * and a frozen process never ends it: the takeover must not wait for the frozen node to wake up.
 * The scenario freezes the leader again and again under a flood of commands until the server shows
 * one of its sessions idle inside a transaction, then waits for another node to take over.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import type { LeaseState, Store } from "../../src/ports/store.js";
import type { Target } from "../support/engine-cluster.js";
import { ROOM, allEvents, createTarget, requireBuild } from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";
import { ChatStandIn, Fleet } from "../support/chaos-cluster.js";
import { errorLines, inboxOnceViolations, leaderTermViolations } from "../support/chaos-checks.js";
import { Dice, chaosSeed, pause } from "../support/chaos-settings.js";

const MAX_TRIES = 200;

describe("chaos on postgres: a leader frozen inside a transaction", () => {
  let target: Target | null = null;
  let store: Store | null = null;
  let fleet: Fleet | null = null;
  let admin: pg.Client | null = null;

  beforeAll(() => requireBuild());

  afterEach(async (context) => {
    const failed = context.task.result?.state === "fail";
    await fleet?.killAll();
    await admin?.end().catch(() => {});
    await store?.close();
    await target?.cleanup(failed);
  });

  it("another node takes over although the frozen leader holds an open transaction", async () => {
    const dice = new Dice(chaosSeed());
    target = await createTarget("postgres", "frozen-tx");
    store = await target.open();
    const s = store;
    fleet = new Fleet(target, ["node-a", "node-b"], {
      capacity: 2,
      ttl: "2s",
      renewEvery: "500ms",
      acquireEvery: "250ms",
    });
    const f = fleet;
    admin = new pg.Client({ connectionString: target.store });
    await admin.connect();
    const a = admin;
    const chat = new ChatStandIn(s, f.nodeIds, "frozen-tx");
    const lease = await waitFor(
      "a leader",
      () => s.getLease(ROOM),
      (l) => l?.holder != null,
      { timeoutMs: 30_000, intervalMs: 25 },
    );
    let leader = lease!.holder!.nodeId;

    // Commands keep the leader inside its fenced transactions (handling, replies) most of the time.
    let flooding = true;
    const flood = (async () => {
      while (flooding) {
        await chat.send(dice.chance(0.5) ? "!dag status" : `!dag cap ${dice.int(2, 30)}`);
        await pause(dice.int(2, 15));
      }
    })();

    let frozenInTx: Array<{ pid: number; query: string }> = [];
    let tries = 0;
    let old: LeaseState | null = null;
    while (frozenInTx.length === 0 && tries < MAX_TRIES) {
      tries += 1;
      // The lease as it is when the holder freezes: the term that must be taken over.
      const before = await s.getLease(ROOM);
      if (before?.holder == null || before.expiresAt <= before.now) {
        await pause(50);
        continue;
      }
      old = before;
      leader = before.holder.nodeId;
      f.signal(leader, "SIGSTOP");
      await pause(300);
      // Other sessions finish their transactions in milliseconds; one idle in a transaction for
      // this long belongs to the frozen process.
      // Only a transaction past its fence check matters: it holds a lock on the lease row.
      const { rows } = await a.query<{ pid: number; query: string }>(
        `SELECT a.pid, left(a.query, 120) AS query FROM pg_stat_activity a
          WHERE a.datname = current_database() AND a.state = 'idle in transaction'
            AND now() - a.state_change > interval '200 milliseconds'
            AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.granted
                          AND l.relation = 'room_leases'::regclass)`,
      );
      frozenInTx = rows;
      if (rows.length === 0) {
        f.signal(leader, "SIGCONT");
        await pause(dice.int(20, 120));
      }
    }
    expect(frozenInTx.length, `no freeze inside a transaction in ${MAX_TRIES} tries`).toBeGreaterThan(0);
    const frozenAt = Date.now();
    if (old === null) throw new Error("no lease seen before the freeze");
    const frozenTerm = old.term;

    // Read the lease row with a plain SELECT: it never waits for row locks, unlike the event log.
    let blocked: unknown[] = [];
    const taken = await waitFor(
      "another node to lead while the old leader is frozen inside a transaction",
      async () => {
        blocked = (
          await a.query(
            `SELECT pid, wait_event_type, wait_event, left(query, 80) AS query FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          )
        ).rows;
        return s.getLease(ROOM);
      },
      (l) => l?.holder != null && l.holder.nodeId !== leader && l.term > frozenTerm,
      { timeoutMs: 20_000, intervalMs: 50 },
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}; sessions waiting for a lock: ${JSON.stringify(blocked)}`);
    });
    const takeoverMs = Date.now() - frozenAt;
    f.signal(leader, "SIGCONT");
    const takeover = (await allEvents(s)).find((e) => e.kind === "lease.acquired" && e.term === taken!.term);
    flooding = false;
    await flood;
    await waitFor(
      "every command answered",
      () => Promise.all(chat.sent.map((c) => s.getInboxEvent(c.eventId))),
      (rows) => rows.every((r) => r?.status === "replied"),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const resumedAt = await s.now();
    await waitFor(
      "the resumed node's heartbeat",
      () => s.listNodes(),
      (ns) => ns.some((n) => n.session.nodeId === leader && n.heartbeatAt > resumedAt),
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    const events = await allEvents(s);
    console.log(
      `[chaos frozen-tx] ${JSON.stringify({
        seed: dice.seed,
        tries,
        frozenIn: frozenInTx.map((r) => r.query.replace(/\s+/g, " ")),
        oldTerm: frozenTerm,
        newTerm: takeover!.term,
        newLeader: takeover!.actor,
        takeoverAfterFreezeMs: takeoverMs,
        commands: chat.sent.length,
      })}`,
    );
    expect(takeover!.actor?.startsWith(`${leader}/`)).toBe(false);
    expect(leaderTermViolations(events)).toEqual([]);
    expect(
      await inboxOnceViolations(
        s,
        events,
        chat.sent.map((c) => c.eventId),
        // Engine-only nodes queue no chat messages: no reply is due.
        () => true,
      ),
    ).toEqual([]);
    expect(f.crashes).toEqual([]);
    expect(f.logs().flatMap(errorLines)).toEqual([]);
  }, 120_000);
});
