/**
 * The room's policy lives in the store, with real node processes on one SQLite
 * file: the first node sets it; a node whose config states other permissions says so in its log and
 * never leads; a node that states none follows the room's policy and may lead.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeProcess, Target } from "../support/engine-cluster.js";
import { ROOM, createTarget, requireBuild, startNode, writeNodeConfig } from "../support/engine-cluster.js";
import { waitFor } from "../support/store-wait.js";

let target: Target;
let failed = false;
const running: NodeProcess[] = [];

beforeAll(async () => {
  requireBuild();
  target = await createTarget("sqlite", "room-policy");
});

afterAll(async () => {
  for (const n of running) n.kill("SIGKILL");
  await Promise.all(running.map((n) => n.exited));
  await target.cleanup(failed);
});

function start(nodeId: string, permissions: string): NodeProcess {
  const node = startNode(target, writeNodeConfig(target, { nodeId, extra: permissions }), nodeId);
  running.push(node);
  return node;
}

describe("the room's policy", () => {
  it("is set by the first node; a node whose config disagrees does not lead; one that states nothing does", async () => {
    try {
      const store = await target.open();
      const strict = start("strict", "[permissions]\ntwo_person_rule = true\npower_level = 60\n");
      await waitFor(
        "strict to lead",
        () => store.getLease(ROOM),
        (l) => l?.holder?.nodeId === "strict",
      );
      const policy = await store.getRoomPolicy(ROOM);
      expect(policy).toMatchObject({ setBy: "strict", policy: { twoPersonRule: true, powerLevel: 60 } });
      strict.kill("SIGTERM");
      await strict.exited;

      const lax = start("lax", "[permissions]\ntwo_person_rule = false\n");
      await waitFor(
        "lax to complain",
        () => readFileSync(lax.logPath, "utf8"),
        (log) => log.includes("disagree with the room's policy"),
      );
      const complaint = readFileSync(lax.logPath, "utf8")
        .split("\n")
        .find((line) => line.includes("disagree with the room's policy"));
      expect(JSON.parse(complaint ?? "{}")).toMatchObject({
        level: "error",
        disagreements: ["two_person_rule: config false, room true"],
      });

      // A node without [permissions] follows the room's policy: it leads, and lax never did.
      start("plain", "");
      await waitFor(
        "plain to lead",
        () => store.getLease(ROOM),
        (l) => l?.holder?.nodeId === "plain",
        { timeoutMs: 20_000 },
      );
      const leaders = (await store.readEvents(ROOM, 0))
        .filter((e) => e.kind === "lease.acquired")
        .map((e) => (e.actor ?? "").split("/")[0]);
      expect(new Set(leaders)).toEqual(new Set(["strict", "plain"]));
      expect((await store.getRoomPolicy(ROOM))?.policy).toMatchObject({
        twoPersonRule: true,
        powerLevel: 60,
      });
      await store.close();
    } catch (e) {
      failed = true;
      throw e;
    }
  });
});
