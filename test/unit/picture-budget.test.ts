// The picture budget's rate limits and cache (src/app/picture-budget.ts, src/app/pictures.ts;
// docs/architecture.md §8): a member and a room ask for at most so many pictures per window, a refusal is told once
// with when to try again, and the same run in the same state is drawn and uploaded once, counted on
// the real renderer over a real SQLite store.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GraphvizRenderer } from "../../src/adapters/graph/graphviz-renderer.js";
import type { Drawing } from "../../src/app/pictures.js";
import { createPictureMaker } from "../../src/app/pictures.js";
import { PictureCache, PictureLimiter, pictureRefusal } from "../../src/app/picture-budget.js";
import type { RunGraph } from "../../src/domain/run-graph.js";
import type { GraphRenderer, PictureFormat } from "../../src/ports/graph-renderer.js";
import type { Store } from "../../src/ports/store.js";
import { sqliteTestDb, type SqliteTestDb } from "../support/sqlite-harness.js";
import { becomeLeader, chainDag, offer, publishRunning, session } from "../support/store-fixtures.js";

const limits = { member: { count: 3, windowMs: 60_000 }, room: { count: 5, windowMs: 60_000 } };

describe("PictureLimiter", () => {
  it("allows a member their count per window, refuses the next once with when to try again, then quietly", () => {
    const limiter = new PictureLimiter(limits);
    const t0 = 1_000_000;
    for (let i = 0; i < 3; i++) expect(limiter.ask("!r", "@a", t0 + i * 1000).kind).toBe("allowed");
    const refused = limiter.ask("!r", "@a", t0 + 10_000);
    // The first ask leaves the window at t0 + 60 s.
    expect(refused).toMatchObject({ kind: "refused", scope: "member", retryAfterMs: 50_000, tell: true });
    if (refused.kind !== "refused") throw new Error("refused");
    expect(pictureRefusal(refused)).toContain("try again in 50 s");
    expect(limiter.ask("!r", "@a", t0 + 20_000)).toMatchObject({ kind: "refused", tell: false });
    expect(limiter.ask("!r", "@a", t0 + 59_999)).toMatchObject({ kind: "refused", tell: false });
    // Another member of the room still may; the first again once the window moved on.
    expect(limiter.ask("!r", "@b", t0 + 30_000).kind).toBe("allowed");
    expect(limiter.ask("!r", "@a", t0 + 60_001).kind).toBe("allowed");
    // Refused again later: told again, it is a new refusal.
    expect(limiter.ask("!r", "@a", t0 + 60_002)).toMatchObject({ kind: "refused", tell: true });
  });

  it("holds the room's count across its members, and rooms apart", () => {
    const limiter = new PictureLimiter(limits);
    for (let i = 0; i < 5; i++) expect(limiter.ask("!r", `@m${i}`, 1000 + i).kind).toBe("allowed");
    expect(limiter.ask("!r", "@m9", 2000)).toMatchObject({ kind: "refused", scope: "room", tell: true });
    expect(limiter.ask("!other", "@m9", 2000).kind).toBe("allowed");
  });
});

describe("PictureCache", () => {
  it("makes a value once per key, shares it while it is made, and forgets what it must not keep", async () => {
    const cache = new PictureCache<string>(2);
    let made = 0;
    const make = (v: string) => async () => {
      made += 1;
      return v;
    };
    const [a, b] = await Promise.all([
      cache.get("k", make("x"), () => true),
      cache.get("k", make("y"), () => true),
    ]);
    expect([a, b, made]).toEqual(["x", "x", 1]);
    expect(await cache.get("bad", make("no"), () => false)).toBe("no");
    expect(await cache.get("bad", make("no"), () => false)).toBe("no");
    expect(made).toBe(3);
    // Capacity 2: the least recently used goes.
    await cache.get("k2", make("z"), () => true);
    await cache.get("k3", make("w"), () => true);
    await cache.get("k", make("again"), () => true);
    expect(made).toBe(6);
  });
});

describe("createPictureMaker", () => {
  let db: SqliteTestDb;
  let store: Store;
  let failed = false;
  const real = new GraphvizRenderer();

  beforeAll(async () => {
    db = sqliteTestDb("picture-budget");
    store = await db.open();
  });
  afterAll(async () => {
    await real.close();
    await store.close();
    db.cleanup(failed);
  });

  it("draws and uploads the same run in the same state once; a changed state is drawn anew", async () => {
    try {
      const renders: RunGraph[] = [];
      const renderer: GraphRenderer = {
        render: (graph: RunGraph, format: PictureFormat) => {
          renders.push(graph);
          return real.render(graph, format);
        },
        close: async () => {},
      };
      const uploads: string[] = [];
      const uploader = {
        upload: async (_data: Uint8Array, _mimetype: string, filename: string) => {
          uploads.push(filename);
          return `mxc://hs/${uploads.length}`;
        },
      };
      const pictures = createPictureMaker({ store, renderer, uploader, cache: new PictureCache<Drawing>() });
      const fence = await becomeLeader(store, "!cache:hs");
      const run = await publishRunning(store, fence, chainDag("nightly", 3));
      const request = (to: string) => ({
        runId: run.runId,
        dagId: "nightly",
        relation: { "m.in_reply_to": { event_id: to } },
      });

      const first = await pictures(request("$one"), "!cache:hs");
      const second = await pictures(request("$two"), "!cache:hs");
      expect(renders.length).toBe(1);
      expect(uploads.length).toBe(1);
      // An unencrypted room gets a quiet notice showing the upload inline, not an m.image that notifies.
      expect(first.content).toMatchObject({ msgtype: "m.notice", url: "mxc://hs/1" });
      // The same upload, answering the second ask where it was made.
      expect(second.content).toMatchObject({
        msgtype: "m.notice",
        url: "mxc://hs/1",
        "m.relates_to": { "m.in_reply_to": { event_id: "$two" } },
      });

      // The first task starts: another picture.
      const claimed = await store.claimTasks(offer(session("w"), ["!cache:hs"]), 1);
      expect(claimed.claimed.length).toBe(1);
      const third = await pictures(request("$three"), "!cache:hs");
      expect(renders.length).toBe(2);
      expect(third.content).toMatchObject({ url: "mxc://hs/2" });
      await pictures(request("$four"), "!cache:hs");
      expect(renders.length).toBe(2);
    } catch (e) {
      failed = true;
      throw e;
    }
  });
});
