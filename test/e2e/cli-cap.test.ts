// `dagbot cap` goes through the room's leader: the grammar's number check, an inbox row
// the leader handles with its term, and the answer it recorded; with no node it waits in the inbox.
import { beforeAll, describe, expect, it } from "vitest";
import type { NodeProcess } from "../support/engine-cluster.js";
import {
  ROOM,
  cli,
  createTarget,
  killAll,
  requireBuild,
  startNode,
  writeNodeConfig,
} from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";
import { scratchFolder } from "../support/scratch-folder.js";

const scratch = scratchFolder("cli-cap");
const { track } = scratch;

beforeAll(() => {
  requireBuild();
});

describe("dagbot cap", () => {
  it("refuses a bad number with the chat grammar's message, exit 2, and queues nothing", async () => {
    const target = await createTarget("sqlite", "cap-bad");
    const config = writeNodeConfig(target, { nodeId: "solo" });
    const r = await track(cli(["cap", "1000000", "--config", config], { cwd: target.dir }));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("expected a whole number from 0 to 10000");
    const store = await target.open();
    try {
      expect(await store.latestInboxEvent(ROOM)).toBeNull();
    } finally {
      await store.close();
    }
    await target.cleanup(false);
  });

  it("with no node: queued (exit 0); the first leader applies it, fenced by its term; later ones answer at once", async () => {
    const target = await createTarget("sqlite", "cap-leader");
    let node: NodeProcess | null = null;
    try {
      const config = writeNodeConfig(target, { nodeId: "solo" });
      const queued = await track(cli(["cap", "0", "--config", config, "--json"], { cwd: target.dir }));
      expect(queued.code, queued.stderr).toBe(0);
      expect(JSON.parse(queued.stdout)).toMatchObject({
        ok: true,
        answer: "queued",
        room: ROOM,
        command: { verb: "cap", n: 0 },
      });
      node = startNode(target, config, "solo");
      const store = await target.open();
      try {
        await waitFor(
          "the queued cap applied",
          () => store.getRoomCap(ROOM),
          (cap) => cap === 0,
          {
            timeoutMs: 15_000,
            intervalMs: 25,
          },
        );
        const set = await track(cli(["cap", "5", "--config", config, "--json"], { cwd: target.dir }));
        expect(set.code, set.stderr).toBe(0);
        expect(JSON.parse(set.stdout)).toMatchObject({
          ok: true,
          answer: "cap",
          room: ROOM,
          cap: 5,
          previous: 0,
        });
        expect(await store.getRoomCap(ROOM)).toBe(5);
        const caps = (await store.readEvents(ROOM, 0)).filter(
          (e) => e.kind === "cap.set" && e.data["initial"] !== true,
        );
        // Both writes were the leader's: each carries its term (a direct store write has none).
        expect(caps.map((e) => e.data["cap"])).toEqual([0, 5]);
        for (const e of caps) expect(e.term).not.toBeNull();
      } finally {
        await store.close();
      }
      await killAll([node]);
      await target.cleanup(false);
    } catch (e) {
      if (node !== null) await killAll([node]);
      await target.cleanup(true);
      throw e;
    }
  });
});
