/**
 * The SQLite change feed's timer, under vitest's fake timers over a real file: it polls only while
 * someone listens, notices another connection's commit by PRAGMA data_version, backs off to at most
 * 100 ms when idle, and close() leaves no timer behind.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ChangeTopic, Store } from "../../src/ports/store.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";

const db = sqliteTestDb("sqlite-change-feed");
let failed = false;
const open: Store[] = [];

beforeEach(({ onTestFailed }) => {
  onTestFailed(() => {
    failed = true;
  });
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
});
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(open.splice(0).map((s) => s.close()));
});
afterAll(() => db.cleanup(failed));

async function twoConnections(): Promise<[Store, Store]> {
  const a = await db.open();
  const b = await db.open();
  open.push(a, b);
  return [a, b];
}

const insert = (s: Store, eventId: string) =>
  s.insertInboxEvent({
    eventId,
    roomId: "!feed",
    sender: "@a:x",
    originServerTs: 1,
    content: {},
    seenBy: "b",
  });

describe("SQLite change feed", () => {
  it("polls only while someone listens; close() stops it", async () => {
    const [a] = await twoConnections();
    expect(vi.getTimerCount()).toBe(0);
    const off = a.onChange(() => {});
    expect(vi.getTimerCount()).toBe(1);
    off();
    expect(vi.getTimerCount()).toBe(0);
    a.onChange(() => {});
    vi.advanceTimersByTime(1000);
    expect(vi.getTimerCount()).toBe(1);
    await a.close();
    expect(vi.getTimerCount()).toBe(0);
  });

  it("hears another connection's commit within 100 ms of fake time, even after a long idle spell", async () => {
    const [a, b] = await twoConnections();
    const heard: Array<[ChangeTopic, string | null]> = [];
    a.onChange((topic, room) => heard.push([topic, room]));
    vi.advanceTimersByTime(60_000);
    expect(heard).toEqual([]);
    await insert(b, "$feed-1");
    vi.advanceTimersByTime(100);
    // Which table changed is unknown across processes: every topic (a wake with no targets wakes
    // every node), no room.
    const every = ["inbox", "tasks", "runs", "outbox", "lease", "cap", "ready", "wake", "done"];
    expect(heard).toEqual(every.map((t) => [t, null]));
  });

  it("hears its own connection's commits at once, with the room, without waiting for a poll", async () => {
    const [a] = await twoConnections();
    const heard: Array<[ChangeTopic, string | null]> = [];
    a.onChange((topic, room) => heard.push([topic, room]));
    await insert(a, "$feed-2");
    expect(heard).toEqual([["inbox", "!feed"]]);
  });

  it("a closed store hears nothing more and keeps no timer", async () => {
    const [a, b] = await twoConnections();
    const heard: ChangeTopic[] = [];
    a.onChange((topic) => heard.push(topic));
    await a.close();
    await insert(b, "$feed-3");
    vi.advanceTimersByTime(1000);
    expect(heard).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a throwing listener does not stop the others or undo the write", async () => {
    const errors: unknown[] = [];
    const a = await db.open({ onListenerError: (e) => errors.push(e) });
    open.push(a);
    const heard: ChangeTopic[] = [];
    a.onChange(() => {
      throw new Error("listener bug");
    });
    a.onChange((topic) => heard.push(topic));
    expect(await insert(a, "$feed-4")).toBe("inserted");
    expect(heard).toEqual(["inbox"]);
    expect(errors).toHaveLength(1);
    expect((await a.getInboxEvent("$feed-4"))?.status).toBe("new");
  });
});
