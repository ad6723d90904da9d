// A core's wake streams behind one change-feed subscription: each stream gets what a subscription
// of its own gave it (a wake naming nodes only when it names its node, with those names only).
import { describe, expect, it } from "vitest";
import { WakeStreams } from "../../src/adapters/http/edge-routes.js";
import type { ChangeListener, ChangeTopic } from "../../src/ports/store.js";

let now = 0;
const clock = { monotonicMs: () => now };

function feed() {
  const listeners = new Set<ChangeListener>();
  return {
    listeners,
    onChange(listener: ChangeListener, _topics?: readonly ChangeTopic[]) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    emit(topic: ChangeTopic, roomId: string | null, nodes?: readonly string[]) {
      for (const l of listeners) l(topic, roomId, nodes);
    },
  };
}

const parse = (frames: string[]) =>
  frames.map((f) => {
    expect(f.startsWith("data: ") && f.endsWith("\n\n")).toBe(true);
    return JSON.parse(f.slice(6, -2)) as unknown;
  });

describe("WakeStreams", () => {
  it("sends each stream the frames a subscription of its own sent, with one subscription while any is open", () => {
    const f = feed();
    const hub = new WakeStreams(f, clock);
    const got: Record<string, string[]> = { a: [], a2: [], ab: [], c: [] };
    const open = (key: string, node: string, rooms: string[]) =>
      hub.add({ node, mayHear: (r) => rooms.includes(r), write: (frame) => got[key]!.push(frame) });
    const closeA = open("a", "a", ["!r"]);
    open("a2", "a", ["!r"]);
    open("ab", "a/b", ["!r"]);
    const closeC = open("c", "c", ["!other"]);
    expect(f.listeners.size).toBe(1);

    f.emit("wake", "!r", ["x", "a/b/2", "c/1"]);
    f.emit("wake", null, ["c"]);
    f.emit("wake", "!r", []);
    f.emit("wake", "!r");
    f.emit("runs", "!r", ["a"]);
    f.emit("runs", null);

    expect(parse(got.a!)).toEqual([
      { topic: "wake", roomId: "!r", nodes: ["a/b/2"] },
      { topic: "wake", roomId: "!r" },
      { topic: "runs", roomId: "!r", nodes: ["a"] },
      { topic: "runs", roomId: null },
    ]);
    expect(got.a2).toEqual(got.a);
    expect(parse(got.ab!)).toEqual([
      { topic: "wake", roomId: "!r", nodes: ["a/b/2"] },
      { topic: "wake", roomId: "!r" },
      { topic: "runs", roomId: "!r", nodes: [] },
      { topic: "runs", roomId: null },
    ]);
    // Room !r is not c's to hear of; a room-less wake naming it is.
    expect(parse(got.c!)).toEqual([
      { topic: "wake", roomId: null, nodes: ["c"] },
      { topic: "runs", roomId: null },
    ]);

    closeA();
    closeA();
    f.emit("wake", "!r", ["a"]);
    expect(got.a!.length).toBe(4);
    expect(got.a2!.length).toBe(5);
    closeC();
    expect(f.listeners.size).toBe(1);
  });

  it("drops its subscription when the last stream closes and takes one again for the next", () => {
    const f = feed();
    const hub = new WakeStreams(f, clock);
    const close = hub.add({ node: "a", mayHear: () => true, write: () => {} });
    close();
    expect(f.listeners.size).toBe(0);
    const frames: string[] = [];
    hub.add({ node: "a", mayHear: () => true, write: (x) => frames.push(x) });
    f.emit("wake", "!r", ["a/3"]);
    expect(parse(frames)).toEqual([{ topic: "wake", roomId: "!r", nodes: ["a/3"] }]);
  });

  it("withholds the wakes naming a node it refused as busy for half the Retry-After, or until it claims", () => {
    const f = feed();
    const hub = new WakeStreams(f, clock);
    const frames: string[] = [];
    hub.add({ node: "a", mayHear: () => true, write: (x) => frames.push(x) });
    now = 1_000;
    hub.refused("a", 4);
    f.emit("wake", "!r", ["a"]);
    f.emit("runs", "!r");
    f.emit("wake", "!r");
    now = 2_999;
    f.emit("wake", "!r", ["a/1"]);
    now = 3_000;
    f.emit("wake", "!r", ["a/2"]);
    hub.refused("a", 4);
    hub.claiming("a");
    f.emit("wake", "!r", ["a/3"]);
    // A run's change and a wake for every node still reach it.
    expect(parse(frames)).toEqual([
      { topic: "runs", roomId: "!r" },
      { topic: "wake", roomId: "!r" },
      { topic: "wake", roomId: "!r", nodes: ["a/2"] },
      { topic: "wake", roomId: "!r", nodes: ["a/3"] },
    ]);
  });
});
