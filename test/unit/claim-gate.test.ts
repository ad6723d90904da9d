/**
 * A core's gate before its edges' claims (src/app/claim-gate.ts): the shared read of the queue
 * answers a claim only when it started after the claim arrived, and says which offers nothing fits.
 * Pure: the reads are deferred promises this test settles.
 */
import { describe, expect, it } from "vitest";
import { emptyClaimFor, FreshRead } from "../../src/app/claim-gate.js";
import type { NodeOffer, QueuedShape } from "../../src/ports/store.js";

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

/** Lets the promise callbacks queued so far run. */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

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
