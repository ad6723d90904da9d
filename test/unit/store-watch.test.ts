import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { watchStore } from "../../src/composition/store-watch.js";
import type { Store } from "../../src/ports/store.js";
import { sqliteTestDb } from "../support/sqlite-harness.js";

// A real SQLite store: its change feed tells the watch of the inbox rows written below.
describe("watchStore's atLeastMs (dagbot run's progress view paced by its last read)", () => {
  const db = sqliteTestDb("store-watch");
  let store: Store;
  let failed = true;
  beforeAll(async () => {
    store = await db.open();
  });
  afterAll(async () => {
    await store.close();
    db.cleanup(failed);
  });

  const say = (roomId: string): Promise<unknown> =>
    store.insertInboxEvent({
      eventId: `$${randomUUID()}`,
      roomId,
      sender: "@alice:test",
      originServerTs: Date.now(),
      content: { msgtype: "m.text", body: "!dag status" },
      seenBy: "test",
    });

  it("a change during the pause ends the wait when the pause is up, not at the change nor at the poll", async () => {
    const watch = watchStore(store, "!room:test", ["inbox"]);
    try {
      const t0 = performance.now();
      setTimeout(() => void say("!room:test"), 20);
      await watch.wait(5_000, undefined, 300);
      const waited = performance.now() - t0;
      expect(waited).toBeGreaterThanOrEqual(295);
      expect(waited).toBeLessThan(2_500);
    } finally {
      watch.close();
    }
  });

  it("without a pause a change ends the wait at once, as before", async () => {
    const watch = watchStore(store, "!room:test", ["inbox"]);
    try {
      const t0 = performance.now();
      setTimeout(() => void say("!room:test"), 20);
      await watch.wait(5_000);
      expect(performance.now() - t0).toBeLessThan(2_500);
    } finally {
      watch.close();
    }
  });

  it("a change of an urgent table ends the pause at once", async () => {
    const watch = watchStore(store, "!room:test", ["inbox"], { urgent: ["inbox"] });
    try {
      const t0 = performance.now();
      setTimeout(() => void say("!room:test"), 20);
      await watch.wait(5_000, undefined, 4_000);
      expect(performance.now() - t0).toBeLessThan(2_000);
    } finally {
      watch.close();
    }
  });

  it("an urgent change of another room does not end the pause", async () => {
    const watch = watchStore(store, "!room:test", ["inbox"], { urgent: ["inbox"] });
    try {
      const t0 = performance.now();
      setTimeout(() => void say("!other:test"), 20);
      await watch.wait(600, undefined, 300);
      expect(performance.now() - t0).toBeGreaterThanOrEqual(295);
    } finally {
      watch.close();
    }
  });

  it("stop ends the pause at once", async () => {
    const watch = watchStore(store, "!room:test", ["inbox"]);
    const stop = new AbortController();
    try {
      const t0 = performance.now();
      setTimeout(() => stop.abort(), 20);
      await watch.wait(5_000, stop.signal, 4_000);
      expect(performance.now() - t0).toBeLessThan(2_000);
      failed = false;
    } finally {
      watch.close();
    }
  });
});
