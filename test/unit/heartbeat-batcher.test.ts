/**
 * The core's group commit of edge heartbeats (src/app/heartbeat-batcher.ts) on a fake clock: beats
 * of one window go to the store as one call, each caller is answered only after that call
 * committed, a failed call fails each of its beats, and close writes what waits.
 */
import { describe, expect, it } from "vitest";
import { HeartbeatBatcher } from "../../src/app/heartbeat-batcher.js";
import type { NodeHeartbeat } from "../../src/ports/store.js";
import { FakeClock, settle } from "../support/fake-clock.js";

const beat = (nodeId: string): NodeHeartbeat => ({
  session: { nodeId, bootId: "b1" },
  labels: [],
  capacity: 1,
  actions: ["echo"],
  roomIds: ["!a:example.org"],
});

/** A store whose heartbeats() calls wait until the test commits or fails them. */
class HeldStore {
  readonly calls: { beats: string[]; commit: () => void; fail: (e: Error) => void }[] = [];
  heartbeats(beats: readonly NodeHeartbeat[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.calls.push({ beats: beats.map((b) => b.session.nodeId), commit: resolve, fail: reject });
    });
  }
}

/** Which of the promises have settled, and how. */
function track(promises: Promise<void>[]): string[] {
  const states = promises.map(() => "waiting");
  promises.forEach((p, i) =>
    p.then(
      () => (states[i] = "ok"),
      (e: unknown) => (states[i] = `failed: ${(e as Error).message}`),
    ),
  );
  return states;
}

describe("HeartbeatBatcher", () => {
  it("writes the beats of one window as one store call and answers each after it committed", async () => {
    const clock = new FakeClock();
    const store = new HeldStore();
    const batcher = new HeartbeatBatcher(store, clock, 50, 100);
    const first = batcher.heartbeat(beat("a"));
    await clock.advance(20);
    const states = track([first, batcher.heartbeat(beat("b")), batcher.heartbeat(beat("c"))]);
    await clock.advance(29);
    expect(store.calls).toEqual([]);
    // The window runs from the first beat: 50 ms after it, not after the last.
    await clock.advance(1);
    expect(store.calls.map((c) => c.beats)).toEqual([["a", "b", "c"]]);
    await settle();
    expect(states).toEqual(["waiting", "waiting", "waiting"]);
    store.calls[0]!.commit();
    await settle();
    expect(states).toEqual(["ok", "ok", "ok"]);
    expect(batcher.batches).toBe(1);
  });

  it("fails every beat of a failed call with its error, and the next batch is written", async () => {
    const clock = new FakeClock();
    const store = new HeldStore();
    const batcher = new HeartbeatBatcher(store, clock, 50, 100);
    const states = track([batcher.heartbeat(beat("a")), batcher.heartbeat(beat("b"))]);
    await clock.advance(50);
    store.calls[0]!.fail(new Error("store gone"));
    await settle();
    expect(states).toEqual(["failed: store gone", "failed: store gone"]);
    const later = track([batcher.heartbeat(beat("a"))]);
    await clock.advance(50);
    expect(store.calls.map((c) => c.beats)).toEqual([["a", "b"], ["a"]]);
    store.calls[1]!.commit();
    await settle();
    expect(later).toEqual(["ok"]);
  });

  it("keeps one call in flight: beats arriving meanwhile form the next batch, a full one goes at once", async () => {
    const clock = new FakeClock();
    const store = new HeldStore();
    const batcher = new HeartbeatBatcher(store, clock, 50, 3);
    const one = track([batcher.heartbeat(beat("a"))]);
    await clock.advance(50);
    expect(store.calls).toHaveLength(1);
    // While the first commit is open: four beats, past the window, wait for it.
    const more = track(["b", "c", "d", "e"].map((n) => batcher.heartbeat(beat(n))));
    await clock.advance(200);
    expect(store.calls).toHaveLength(1);
    store.calls[0]!.commit();
    await settle();
    expect(one).toEqual(["ok"]);
    // A full batch (3) goes without a window; the one left, which has waited longer than its
    // window already, goes right after it.
    expect(store.calls.map((c) => c.beats)).toEqual([["a"], ["b", "c", "d"]]);
    store.calls[1]!.commit();
    await settle();
    expect(more).toEqual(["ok", "ok", "ok", "waiting"]);
    expect(store.calls.map((c) => c.beats)).toEqual([["a"], ["b", "c", "d"], ["e"]]);
    store.calls[2]!.commit();
    await settle();
    expect(more).toEqual(["ok", "ok", "ok", "ok"]);
  });

  it("a full batch cuts the window short", async () => {
    const clock = new FakeClock();
    const store = new HeldStore();
    const batcher = new HeartbeatBatcher(store, clock, 50, 2);
    void batcher.heartbeat(beat("a"));
    await settle();
    expect(store.calls).toHaveLength(0);
    void batcher.heartbeat(beat("b"));
    await settle();
    expect(store.calls.map((c) => c.beats)).toEqual([["a", "b"]]);
  });

  it("close writes the waiting beats without their window, and resolves once they committed", async () => {
    const clock = new FakeClock();
    const store = new HeldStore();
    const batcher = new HeartbeatBatcher(store, clock, 50, 100);
    const states = track([batcher.heartbeat(beat("a")), batcher.heartbeat(beat("b"))]);
    let closed = false;
    const closing = batcher.close().then(() => (closed = true));
    await settle();
    expect(store.calls.map((c) => c.beats)).toEqual([["a", "b"]]);
    expect(closed).toBe(false);
    store.calls[0]!.commit();
    await closing;
    expect(states).toEqual(["ok", "ok"]);
    // A beat after close is written at once, alone.
    const late = track([batcher.heartbeat(beat("c"))]);
    await settle();
    expect(store.calls.map((c) => c.beats)).toEqual([["a", "b"], ["c"]]);
    store.calls[1]!.commit();
    await settle();
    expect(late).toEqual(["ok"]);
  });
});
