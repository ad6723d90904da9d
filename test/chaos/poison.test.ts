/**
 * Poison commands with real `dagbot node` processes. First the publish the
 * issue found: parameter patterns of 24 × `(?:.{0,999}){0,1}` with a 1,500-character default kept
 * each leader's event loop busy past its lease, and every next leader took the same command up
 * again; it must be refused at once, and the room's other commands answered once each. Then a
 * command whose handling takes its leader down twice (one leader killed with SIGKILL, the next
 * frozen with SIGSTOP, each in the middle of handling it): the third leader answers it as dropped
 * and never runs it, and every other command of the room is still answered exactly once.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import pg from "pg";
import type { Store } from "../../src/ports/store.js";
import type { Target } from "../support/engine-cluster.js";
import { ROOM, allEvents, createTarget, requireBuild } from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";
import type { SentCommand } from "../support/chaos-cluster.js";
import { ChatStandIn, Fleet, fleetUp } from "../support/chaos-cluster.js";
import { inboxOnceViolations, leaderTermViolations } from "../support/chaos-checks.js";

const FLEET = { capacity: 2, ttl: "2s", renewEvery: "500ms", acquireEvery: "250ms" };

const publish = (dag: unknown): string => `!dag publish\n\`\`\`json\n${JSON.stringify(dag)}\n\`\`\``;
const echoDag = (id: string): unknown => ({
  id,
  tasks: [{ id: "a", action: "echo", args: { message: "hi" } }],
});

async function outcomeOf(store: Store, c: SentCommand): Promise<Record<string, unknown> | null> {
  const row = await store.getInboxEvent(c.eventId);
  const outcome = row?.result?.["dagbotOutcome"];
  return typeof outcome === "object" && outcome !== null ? (outcome as Record<string, unknown>) : null;
}

async function allAnswered(store: Store, chat: ChatStandIn, what: string): Promise<void> {
  await waitFor(
    what,
    () => Promise.all(chat.sent.map((c) => store.getInboxEvent(c.eventId))),
    (rows) => rows.every((r) => r?.status === "replied"),
    { timeoutMs: 60_000, intervalMs: 100 },
  );
}

describe("poison commands with real processes", () => {
  let target: Target | null = null;
  let store: Store | null = null;
  let fleet: Fleet | null = null;
  let admin: pg.Client | null = null;
  let stopped: string | null = null;

  beforeAll(() => requireBuild());

  afterEach(async (context) => {
    const failed = context.task.result?.state === "fail";
    if (stopped !== null) fleet?.signal(stopped, "SIGCONT");
    await fleet?.killAll();
    await admin?.end().catch(() => {});
    await store?.close();
    await target?.cleanup(failed);
    fleet = null;
    store = null;
    admin = null;
    stopped = null;
    target = null;
  });

  it("the publish that stalled every leader is refused at once; the room's other commands are answered once each", async () => {
    target = await createTarget("sqlite", "poison-stall");
    store = await target.open();
    const s = store;
    fleet = new Fleet(target, ["node-a", "node-b", "node-c"], FLEET);
    await fleetUp(s, 3);
    const chat = new ChatStandIn(s, fleet.nodeIds, "stall");
    await chat.send("!dag list");
    const stall = await chat.send(
      publish({
        id: "stall",
        params: { big: { pattern: "(?:.{0,999}){0,1}".repeat(24), default: "a".repeat(1500) } },
        tasks: [{ id: "a", action: "echo", args: { message: "{params.big}" } }],
      }),
    );
    await chat.send("!dag status");
    await chat.send(publish(echoDag("after")));
    await chat.send("!dag nodes");
    await allAnswered(s, chat, "every command answered");

    const refused = await outcomeOf(s, stall);
    expect(refused?.["kind"]).toBe("invalid-dag");
    expect(JSON.stringify(refused)).toMatch(/params\.big\.pattern.*is 408 characters long; at most 256/);
    expect(await s.getRun(ROOM, "stall")).toBeNull();
    expect((await s.getRun(ROOM, "after"))?.status).toBe("pending");
    const events = await allEvents(s);
    expect(
      await inboxOnceViolations(
        s,
        events,
        chat.sent.map((c) => c.eventId),
        () => true, // engine-only nodes queue no chat replies
      ),
    ).toEqual([]);
    expect(events.filter((e) => e.kind === "inbox.abandoned")).toEqual([]);
    expect(leaderTermViolations(events)).toEqual([]);
    expect(fleet.crashes).toEqual([]);
  }, 120_000);

  it("a command whose handling took two leaders down (SIGKILL, then SIGSTOP) is dropped, never run; every other command is answered exactly once", async () => {
    target = await createTarget("postgres", "poison-quarantine");
    store = await target.open();
    const s = store;
    fleet = new Fleet(target, ["node-a", "node-b", "node-c"], FLEET);
    const f = fleet;
    await fleetUp(s, 3);
    admin = new pg.Client({ connectionString: target.store });
    await admin.connect();
    const a = admin;
    const chat = new ChatStandIn(s, f.nodeIds, "poison");
    await chat.send("!dag list");
    await allAnswered(s, chat, "the first command answered");

    // While the test holds this lock, a publish's handling reaches its write of the new DAG's
    // definition and waits there: the leader is in the middle of handling it, for as long as we like.
    const lockDefinitions = async (): Promise<void> => {
      await a.query("BEGIN");
      await a.query("LOCK TABLE definitions IN EXCLUSIVE MODE");
    };
    const handlingWaits = (): Promise<unknown> =>
      waitFor(
        "a leader in the middle of handling the publish",
        async () =>
          (
            await a.query<{ n: string }>(
              "SELECT count(*) AS n FROM pg_locks WHERE NOT granted AND relation = 'definitions'::regclass",
            )
          ).rows[0]?.n,
        (n) => Number(n) > 0,
        { timeoutMs: 30_000, intervalMs: 25 },
      );
    const leaderNow = async (): Promise<string> => {
      const lease = await s.getLease(ROOM);
      if (lease?.holder == null || lease.expiresAt <= lease.now) throw new Error("no live leader");
      return lease.holder.nodeId;
    };

    await lockDefinitions();
    const poison = await chat.send(publish(echoDag("poison")));
    const others = [
      await chat.send("!dag status"),
      await chat.send(publish(echoDag("after"))),
      await chat.send("!dag nodes"),
      await chat.send("!dag list"),
    ];

    // First leader: killed while it handles the publish.
    await handlingWaits();
    const killed = await leaderNow();
    await f.kill(killed);
    await a.query("COMMIT");
    // Locked again before the next leader (a lease TTL away) reaches the same write.
    await lockDefinitions();

    // Second leader: frozen while it handles the publish. Its session, idle inside a transaction
    // once the lock is released, is ended by the server; its lease runs out.
    await handlingWaits();
    const frozen = await leaderNow();
    expect(frozen).not.toBe(killed);
    f.signal(frozen, "SIGSTOP");
    stopped = frozen;
    await a.query("COMMIT");

    await allAnswered(s, chat, "every command answered by the third leader");
    f.signal(frozen, "SIGCONT");
    stopped = null;

    expect(await outcomeOf(s, poison)).toEqual({ kind: "quarantined", losses: 2 });
    expect(await s.getRun(ROOM, "poison")).toBeNull();
    for (const c of others) expect((await outcomeOf(s, c))?.["kind"]).not.toBe("quarantined");
    expect((await s.getRun(ROOM, "after"))?.status).toBe("pending");
    const events = await allEvents(s);
    expect(
      await inboxOnceViolations(
        s,
        events,
        chat.sent.map((c) => c.eventId),
        () => true, // engine-only nodes queue no chat replies
      ),
    ).toEqual([]);
    const abandoned = events.filter((e) => e.kind === "inbox.abandoned");
    expect(abandoned.map((e) => [e.data["eventId"], e.data["losses"]])).toEqual([
      [poison.eventId, 1],
      [poison.eventId, 2],
    ]);
    expect(leaderTermViolations(events)).toEqual([]);
    expect(f.crashes).toEqual([]);
  }, 180_000);
});
