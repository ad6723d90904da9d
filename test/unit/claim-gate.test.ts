/**
 * A core's gate before its edges' claims (src/app/claim-gate.ts): the shared read of the queue
 * answers a claim only when it started after the claim arrived, and says which offers nothing fits.
 * Claims wait for part of the store pool and are refused past a bound while other calls go on.
 * Pure: the reads and calls are deferred promises this test settles, on a fake clock.
 */
import { describe, expect, it } from "vitest";
import {
  ClaimAdmission,
  ClaimsBusyError,
  claimSlotsFor,
  claimWaitBoundFor,
  emptyClaimFor,
  FOUND_WORK_FOR_MS,
  FreshRead,
  QueueLook,
} from "../../src/app/claim-gate.js";
import type { NodeOffer, QueuedShape } from "../../src/ports/store.js";
import { FakeClock, settle } from "../support/fake-clock.js";

/** A read the test ends: each call starts one, kept in order. */
function deferredReads(): {
  read: () => Promise<number>;
  started: { end: (v: number) => void; fail: (e: Error) => void }[];
} {
  const started: { end: (v: number) => void; fail: (e: Error) => void }[] = [];
  return {
    started,
    read: () =>
      new Promise<number>((resolve, reject) => {
        started.push({ end: resolve, fail: reject });
      }),
  };
}

describe("FreshRead: a call is answered only by a read that started after it arrived", () => {
  it("a call arriving while a read is in flight waits for the next read, which the calls of that time share", async () => {
    const { read, started } = deferredReads();
    const shared = new FreshRead(read);
    const answers: string[] = [];
    const a = shared.get().then((v) => answers.push(`a:${v}`));
    expect(started).toHaveLength(1);
    // b and c arrive while read 1 is in flight: it may have looked before they were sent.
    const b = shared.get().then((v) => answers.push(`b:${v}`));
    const c = shared.get().then((v) => answers.push(`c:${v}`));
    expect(started).toHaveLength(1);
    started[0]!.end(1);
    await a;
    await settle();
    // Read 1 answered a only; read 2 started once it ended, for b and c.
    expect(answers).toEqual(["a:1"]);
    expect(started).toHaveLength(2);
    // d arrives during read 2: not its answer either.
    const d = shared.get().then((v) => answers.push(`d:${v}`));
    started[1]!.end(2);
    await Promise.all([b, c]);
    await settle();
    expect(answers).toEqual(["a:1", "b:2", "c:2"]);
    expect(started).toHaveLength(3);
    started[2]!.end(3);
    await d;
    expect(answers).toEqual(["a:1", "b:2", "c:2", "d:3"]);
    expect(shared.reads).toBe(3);
  });

  it("with a gap, a call soon after a read's start waits for the next read, which starts once the gap passed", async () => {
    const { read, started } = deferredReads();
    const clock = new FakeClock();
    const shared = new FreshRead(read, { clock, gapMs: 100 });
    const a = shared.get();
    started[0]!.end(1);
    await expect(a).resolves.toBe(1);
    // Read 1 ended, but it started less than 100 ms ago: b and c wait for read 2.
    await clock.advance(30);
    const b = shared.get();
    await clock.advance(30);
    const c = shared.get();
    await settle();
    expect(started).toHaveLength(1);
    await clock.advance(40);
    expect(started).toHaveLength(2);
    started[1]!.end(2);
    await expect(Promise.all([b, c])).resolves.toEqual([2, 2]);
    // A call after a quiet gap starts its read at once.
    await clock.advance(150);
    const d = shared.get();
    expect(started).toHaveLength(3);
    started[2]!.end(3);
    await expect(d).resolves.toBe(3);
  });

  it("a failed read fails its calls only; the calls waiting for the next one get a fresh read", async () => {
    const { read, started } = deferredReads();
    const shared = new FreshRead(read);
    const a = shared.get();
    const b = shared.get();
    started[0]!.fail(new Error("store down"));
    await expect(a).rejects.toThrow("store down");
    await settle();
    expect(started).toHaveLength(2);
    started[1]!.end(7);
    await expect(b).resolves.toBe(7);
    // Nothing in flight: the next call starts its own read at once.
    const c = shared.get();
    expect(started).toHaveLength(3);
    started[2]!.end(8);
    await expect(c).resolves.toBe(8);
  });
});

describe("emptyClaimFor: whether a claim could take a task, from the queue's shapes", () => {
  const offer: NodeOffer = {
    session: { nodeId: "edge-1", bootId: "b" },
    roomIds: ["r1"],
    labels: ["edge", "gpu"],
    actions: ["echo", "build"],
    leaseMs: 15_000,
  };
  const shape = (s: Partial<QueuedShape>): QueuedShape => ({
    roomId: "r1",
    action: "echo",
    pin: null,
    labels: [],
    ready: 1,
    nextReadyInMs: null,
    ...s,
  });

  it("nothing queued: an empty claim, nothing waits", () => {
    expect(emptyClaimFor([], offer)).toEqual({ claimed: [], more: false, nextReadyInMs: null });
  });

  it("a ready task that fits sends the claim on to the store", () => {
    expect(emptyClaimFor([shape({})], offer)).toBeNull();
    expect(emptyClaimFor([shape({ labels: ["gpu"], pin: "edge-1", action: "build" })], offer)).toBeNull();
  });

  it("ready tasks of another room, action, node or label do not", () => {
    const unfit = [
      shape({ roomId: "r2" }),
      shape({ action: "deploy" }),
      shape({ pin: "edge-2" }),
      shape({ labels: ["edge", "arm"] }),
    ];
    expect(emptyClaimFor(unfit, offer)).toEqual({ claimed: [], more: false, nextReadyInMs: null });
  });

  it("fitting tasks waiting out a backoff: empty, with the soonest of them", () => {
    const waiting = [
      shape({ ready: 0, nextReadyInMs: 9000 }),
      shape({ ready: 0, nextReadyInMs: 4000, action: "build" }),
      shape({ ready: 0, nextReadyInMs: 100, roomId: "r2" }),
    ];
    expect(emptyClaimFor(waiting, offer)).toEqual({ claimed: [], more: false, nextReadyInMs: 4000 });
  });
});

describe("QueueLook: a read that found ready work sends the claims that fit it on for a while", () => {
  const offer = (nodeId: string, labels: string[] = []): NodeOffer => ({
    session: { nodeId, bootId: "b" },
    roomIds: ["r1"],
    labels,
    actions: ["echo"],
    leaseMs: 15_000,
  });
  const ready: QueuedShape = {
    roomId: "r1",
    action: "echo",
    pin: null,
    labels: [],
    ready: 3,
    nextReadyInMs: null,
  };
  const gpuOnly: QueuedShape = { ...ready, labels: ["gpu"] };

  it("claims that fit what it found go on without a read, until it is old or a claim took nothing", async () => {
    const clock = new FakeClock();
    let queue: QueuedShape[] = [ready];
    let reads = 0;
    const look = new QueueLook(
      {
        queuedShapes: async () => {
          reads += 1;
          return queue;
        },
      },
      ["r1"],
      clock,
      0,
    );
    expect(await look.emptyClaim(offer("e1"))).toBeNull();
    expect(reads).toBe(1);
    // The work is gone (claimed elsewhere): a claim sent on finds nothing, as before the look.
    queue = [];
    expect(await look.emptyClaim(offer("e2"))).toBeNull();
    expect(reads).toBe(1);
    // It said so: the next claim reads afresh, and "nothing" is only ever a fresh read's.
    look.claimedNothing();
    expect(await look.emptyClaim(offer("e3"))).toEqual({ claimed: [], more: false, nextReadyInMs: null });
    expect(reads).toBe(2);
    // Ready work for gpu edges does not send a plain edge's claim on: it reads.
    queue = [gpuOnly];
    expect(await look.emptyClaim(offer("g1", ["gpu"]))).toBeNull();
    expect(reads).toBe(3);
    expect(await look.emptyClaim(offer("e4"))).toEqual({ claimed: [], more: false, nextReadyInMs: null });
    expect(reads).toBe(4);
    // Found work is sent on for FOUND_WORK_FOR_MS only.
    queue = [ready];
    expect(await look.emptyClaim(offer("e5"))).toBeNull();
    expect(reads).toBe(5);
    queue = [];
    await clock.advance(FOUND_WORK_FOR_MS);
    expect(await look.emptyClaim(offer("e6"))).toEqual({ claimed: [], more: false, nextReadyInMs: null });
    expect(reads).toBe(6);
  });

  it("the claim of an edge a leader's wake named goes on without a read, once, within FOUND_WORK_FOR_MS", async () => {
    const clock = new FakeClock();
    let reads = 0;
    const look = new QueueLook(
      {
        queuedShapes: async () => {
          reads += 1;
          return [];
        },
      },
      ["r1"],
      clock,
      0,
    );
    const nothing = { claimed: [], more: false, nextReadyInMs: null };
    look.heardWake(["e1/2", "e2"]);
    expect(await look.emptyClaim(offer("e1"))).toBeNull();
    expect(await look.emptyClaim(offer("e2"))).toBeNull();
    expect(reads).toBe(0);
    // Once: the same edge's next claim, and an edge the wake did not name, read.
    expect(await look.emptyClaim(offer("e1"))).toEqual(nothing);
    expect(await look.emptyClaim(offer("e3"))).toEqual(nothing);
    expect(reads).toBe(2);
    // A wake heard too long ago sends nothing on.
    look.heardWake(["e4"]);
    await clock.advance(FOUND_WORK_FOR_MS);
    expect(await look.emptyClaim(offer("e4"))).toEqual(nothing);
    expect(reads).toBe(3);
    // A wake for every node sends each claim on while it is recent.
    look.heardWake(undefined);
    expect(await look.emptyClaim(offer("e5"))).toBeNull();
    expect(await look.emptyClaim(offer("e6"))).toBeNull();
    expect(reads).toBe(3);
  });
});

/** A call the test ends: resolves with "done" once `end` is called. */
function held(): { call: () => Promise<string>; started: () => boolean; end: () => void } {
  let started = false;
  let end: () => void = () => undefined;
  const done = new Promise<void>((resolve) => {
    end = resolve;
  });
  return {
    call: async () => {
      started = true;
      await done;
      return "done";
    },
    started: () => started,
    end: () => end(),
  };
}

describe("ClaimAdmission: claims wait for part of the pool and are refused past a bound; other calls never", () => {
  it("derives its bounds from the pool: a quarter of it (at least one) kept from claims", () => {
    expect([1, 2, 4, 8, 10].map(claimSlotsFor)).toEqual([1, 1, 3, 6, 8]);
    expect(claimWaitBoundFor(8)).toBe(32);
  });

  it("a claim past the slots waits, past the wait bound is refused before it runs; a renewal goes straight on", async () => {
    const clock = new FakeClock();
    const gate = new ClaimAdmission(4, clock);
    expect(gate.claimSlots).toBe(3);
    const running = [held(), held(), held()];
    const answers = running.map((h) => gate.claim(h.call));
    expect(running.every((h) => h.started())).toBe(true);
    // The slots are taken: the next claims wait, up to the bound (16 for a pool of 4).
    const waiting = Array.from({ length: 16 }, () => held());
    const later = waiting.map((h) => gate.claim(h.call));
    await settle();
    expect(waiting.some((h) => h.started())).toBe(false);
    expect(gate.queued).toBe(16);
    // One more is refused at once, its call never made.
    const refused = held();
    await expect(gate.claim(refused.call)).rejects.toBeInstanceOf(ClaimsBusyError);
    expect(refused.started()).toBe(false);
    expect(gate.refused).toBe(1);
    // A renewal is neither refused nor queued behind the claims.
    const renewal = held();
    const renewed = gate.other(renewal.call);
    expect(renewal.started()).toBe(true);
    renewal.end();
    await expect(renewed).resolves.toBe("done");
    // A claim that ends hands its slot to the first waiting, first come first.
    running[0]!.end();
    await answers[0];
    await settle();
    expect(waiting.map((h) => h.started())).toEqual([true, ...Array<boolean>(15).fill(false)]);
    for (const h of [...running, ...waiting]) h.end();
    await Promise.all([...answers, ...later]);
    expect(gate.queued).toBe(0);
  });

  it("a refusal's Retry-After is the time the claims waiting and those refused lately take to pass at the recent pace, 1 to 10 s", async () => {
    const clock = new FakeClock();
    const gate = new ClaimAdmission(1, clock, 60_000);
    const busyAfter = async (): Promise<number> => {
      try {
        await gate.claim(async () => "never");
      } catch (e) {
        if (e instanceof ClaimsBusyError) return e.retryAfterS;
      }
      throw new Error("not refused");
    };
    // A pool of one: one claim at a time, four waiting; nothing measured yet: 1 s.
    const first = held();
    const answers = [gate.claim(first.call)];
    const waiting = Array.from({ length: 4 }, () => held());
    answers.push(...waiting.map((h) => gate.claim(h.call)));
    expect(await busyAfter()).toBe(1);
    // Claims that each hold their turn 700 ms: four waiting pass in about 2.8 s.
    for (const h of [first, ...waiting]) {
      await settle();
      expect(h.started()).toBe(true);
      await clock.advance(700);
      h.end();
    }
    await Promise.all(answers);
    // Four waiting and the one refused 3.5 s ago (it comes back first) pass in about 3.5 s.
    const slow = [held(), ...Array.from({ length: 4 }, () => held())];
    const later = slow.map((h) => gate.claim(h.call));
    expect(await busyAfter()).toBe(4);
    // A crowd refused within the last 10 s comes back ahead: at most 10 s.
    const crowd: number[] = [];
    for (let i = 0; i < 20; i += 1) crowd.push(await busyAfter());
    expect(crowd.slice(0, 3)).toEqual([5, 5, 6]);
    expect(crowd.at(-1)).toBe(10);
    // Ten seconds later the crowd refused then is forgotten: the four waiting and this one.
    await clock.advance(10_000);
    expect(await busyAfter()).toBe(3);
    for (const h of slow) h.end();
    await Promise.all(later);
  });

  it("claims wait while the pool is full of other calls, and a claim that waited too long is refused", async () => {
    const clock = new FakeClock();
    const gate = new ClaimAdmission(2, clock, 2_000);
    const renewals = [held(), held()];
    const renewed = renewals.map((h) => gate.other(h.call));
    const claim = held();
    const answer = gate.claim(claim.call);
    const late = held();
    const lateAnswer = gate.claim(late.call);
    const lateRefused = expect(lateAnswer).rejects.toBeInstanceOf(ClaimsBusyError);
    await settle();
    // The pool's two connections are the renewals': the claims wait.
    expect(claim.started()).toBe(false);
    renewals[0]!.end();
    await renewed[0];
    await settle();
    expect(claim.started()).toBe(true);
    // The second claim finds the one claim slot of a pool of 2 taken, and waits past its bound.
    await clock.advance(2_000);
    await lateRefused;
    expect(late.started()).toBe(false);
    claim.end();
    renewals[1]!.end();
    await Promise.all([answer, renewed[1]]);
  });
});
