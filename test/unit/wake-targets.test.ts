/** Whom the leader wakes for ready tasks (planWake), and the lease batcher's one statement for a node's rooms. */
import { describe, expect, it } from "vitest";
import { LeaseBatcher } from "../../src/app/lease-batcher.js";
import { renewDelayMs } from "../../src/domain/lease-term.js";
import { planWake, SELF_SERVE_MS, WAKE_DEPRIORITIZE_MS, WAKE_HOLD_MS } from "../../src/app/wake-targets.js";
import type { RecentWake } from "../../src/app/wake-targets.js";
import { ConflictError } from "../../src/ports/errors.js";
import type { ClaimDemand, LeaseSync, LeaseWish, Session } from "../../src/ports/store.js";
import { nodesNamedBy, wakeFor, wakeTarget } from "../../src/ports/store.js";

const node = (nodeId: string, free: number, fits: number) => ({ nodeId, free, fits });

describe("planWake", () => {
  const none = new Map<string, RecentWake>();

  it("wakes as many nodes as the ready tasks need, those that can take most first", () => {
    const demand: ClaimDemand = {
      ready: 6,
      nextReadyInMs: null,
      nodes: [node("a", 1, 6), node("b", 4, 6), node("c", 4, 6), node("d", 0, 6)],
    };
    const plan = planWake(demand, none, 0, 0);
    expect(plan.targets).toEqual([
      { nodeId: "b", take: 4 },
      { nodeId: "c", take: 2 },
    ]);
    expect(plan.unassigned).toBe(0);
  });

  it("counts only the tasks a node fits, and says how many nobody free can take", () => {
    const demand: ClaimDemand = {
      ready: 5,
      nextReadyInMs: null,
      nodes: [node("gpu", 4, 1), node("cpu", 4, 0), node("full", 0, 5)],
    };
    const plan = planWake(demand, none, 0, 0);
    expect(plan.targets).toEqual([{ nodeId: "gpu", take: 1 }]);
    expect(plan.unassigned).toBe(4);
  });

  it("does not wake a node again while it is held, and counts what it was woken for", () => {
    const demand: ClaimDemand = { ready: 4, nextReadyInMs: null, nodes: [node("a", 4, 4), node("b", 4, 4)] };
    const recent = new Map([["a", { at: 1000, expected: 4 }]]);
    expect(planWake(demand, recent, 1000 + WAKE_HOLD_MS - 1, 0).targets).toEqual([]);
    // After the hold, a node that did not claim goes after the others.
    const later = planWake(demand, recent, 1000 + WAKE_HOLD_MS, 0);
    expect(later.targets.map((t) => t.nodeId)).toEqual(["b"]);
    const muchLater = planWake(demand, recent, 1000 + WAKE_DEPRIORITIZE_MS, 0);
    expect(muchLater.targets.map((t) => t.nodeId)).toEqual(["a"]);
  });

  it("leaves nodes whose last claim left more to serve themselves, counting their free slots", () => {
    const demand: ClaimDemand = {
      ready: 5,
      nextReadyInMs: null,
      nodes: [node("self", 4, 5), node("idle", 4, 5), node("other", 4, 5)],
    };
    const serving = new Map([["self", 1000]]);
    const plan = planWake(demand, none, 1000 + SELF_SERVE_MS - 1, 0, serving);
    expect(plan.targets).toEqual([{ nodeId: "idle", take: 1 }]);
    // Once its word is old, it is a candidate like any other.
    const later = planWake(demand, none, 1000 + SELF_SERVE_MS, 0, serving);
    expect(later.targets.map((t) => t.take)).toEqual([4, 1]);
  });

  it("takes turns among equal nodes", () => {
    const demand: ClaimDemand = {
      ready: 1,
      nextReadyInMs: null,
      nodes: [node("a", 2, 1), node("b", 2, 1), node("c", 2, 1)],
    };
    const first = [0, 1, 2].map((r) => planWake(demand, none, 0, r).targets[0]?.nodeId);
    expect(new Set(first).size).toBe(3);
  });
});

describe("LeaseBatcher", () => {
  const me: Session = { nodeId: "n", bootId: "b" };

  function fakeStore(answer: (w: LeaseWish) => LeaseSync["outcome"]) {
    const calls: LeaseWish[][] = [];
    return {
      calls,
      syncLeases: (_s: Session, _ttl: number, wishes: LeaseWish[]): Promise<LeaseSync[]> => {
        calls.push(wishes);
        return Promise.resolve(
          wishes.map((w) => ({
            roomId: w.roomId,
            outcome: answer(w),
            holder: answer(w) === "held" ? { nodeId: "other", bootId: "x" } : me,
            term: w.term ?? 7,
            expiresAt: 5000,
            now: 1000,
          })),
        );
      },
    };
  }

  it("sends the acquires and renewals of a node's rooms made together as one statement, in room order", async () => {
    const store = fakeStore((w) => (w.roomId === "r2" ? "held" : w.term === null ? "acquired" : "renewed"));
    const b = new LeaseBatcher(store, me, 10_000, 1);
    const results = await Promise.allSettled([
      b.acquireLease("r3", me, 10_000),
      b.renewLease({ roomId: "r1", session: me, term: 4 }, 10_000),
      b.acquireLease("r2", me, 10_000),
    ]);
    expect(store.calls).toEqual([
      [
        { roomId: "r1", term: 4 },
        { roomId: "r2", term: null },
        { roomId: "r3", term: null },
      ],
    ]);
    expect(b.statements).toBe(1);
    expect(results[0]).toEqual({
      status: "fulfilled",
      value: { roomId: "r3", session: me, term: 7, expiresAt: 5000 },
    });
    expect(results[1]).toEqual({ status: "fulfilled", value: { expiresAt: 5000 } });
    // A room someone else holds: the conflict says who, until when, on the store's clock.
    const held = results[2];
    expect(held.status).toBe("rejected");
    const e = (held as PromiseRejectedResult).reason as ConflictError;
    expect(e).toBeInstanceOf(ConflictError);
    expect(e.found).toEqual({ holder: "other/x", term: 7, expiresAt: 5000, now: 1000 });
  });

  it("sends a batch at once when every room of the node has asked, not after the window", async () => {
    const store = fakeStore((w) => (w.term === null ? "acquired" : "renewed"));
    // A window no test would wait out: only a complete batch can be answered.
    const one = new LeaseBatcher(store, me, 10_000, 60_000, 1);
    await expect(one.acquireLease("r1", me, 10_000)).resolves.toMatchObject({ roomId: "r1", term: 7 });
    const two = new LeaseBatcher(store, me, 10_000, 60_000, 2);
    let first = false;
    const r1 = two.acquireLease("r1", me, 10_000).then((f) => ((first = true), f));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(first).toBe(false); // the second room has not asked: the window holds the first
    const r2 = two.renewLease({ roomId: "r2", session: me, term: 3 }, 10_000);
    await expect(Promise.all([r1, r2])).resolves.toHaveLength(2);
    expect(store.calls.slice(1)).toEqual([
      [
        { roomId: "r1", term: null },
        { roomId: "r2", term: 3 },
      ],
    ]);
  });

  it("a lost renewal is a conflict (deposed), and a store failure reaches every caller of the batch", async () => {
    const store = fakeStore(() => "lost");
    const b = new LeaseBatcher(store, me, 10_000, 1);
    await expect(b.renewLease({ roomId: "r1", session: me, term: 4 }, 10_000)).rejects.toBeInstanceOf(
      ConflictError,
    );
    const failing = new LeaseBatcher({ syncLeases: () => Promise.reject(new Error("down")) }, me, 10_000, 1);
    const both = await Promise.allSettled([
      failing.acquireLease("a", me, 10_000),
      failing.acquireLease("b", me, 10_000),
    ]);
    expect(both.map((r) => (r.status === "rejected" ? String(r.reason) : "ok"))).toEqual([
      "Error: down",
      "Error: down",
    ]);
  });
});

describe("renewDelayMs on a grid", () => {
  it("waits to the next multiple of renewEvery, never longer than renewEvery; a failure still backs off", () => {
    expect(renewDelayMs(3000, 0, 1000)).toBe(2000);
    expect(renewDelayMs(3000, 0, 5999)).toBe(1);
    expect(renewDelayMs(3000, 0, 6000)).toBe(3000);
    expect(renewDelayMs(3000, 0)).toBe(3000);
    expect(renewDelayMs(3000, 1, 5999)).toBeLessThan(3000);
  });
});

describe("wakeFor", () => {
  it("finds this node among a wake's names, with the number of tasks it is woken for", () => {
    expect(wakeFor("n1", ["n10/2", "n1/3"])).toEqual({ take: 3 });
    expect(wakeFor("n1", ["n1"])).toEqual({ take: null });
    expect(wakeFor("n1", ["n10/2", "n2/1"])).toBeNull();
    expect(wakeFor("n1", [wakeTarget("n1", 4)])).toEqual({ take: 4 });
  });

  it("nodesNamedBy reads the same rule from the name's side: a node is among them iff wakeFor finds it", () => {
    const names = ["n1", "n1/3", "n10/2", "a/b/2", "a/b", "a//1", "/x", "edge-7/1", "x/"];
    const nodes = ["n1", "n10", "n", "a", "a/b", "a/b/2", "a/", "", "edge-7", "edge", "x", "x/"];
    for (const name of names)
      for (const node of nodes)
        expect(nodesNamedBy(name).includes(node), `${node} in ${name}`).toBe(wakeFor(node, [name]) !== null);
  });
});
