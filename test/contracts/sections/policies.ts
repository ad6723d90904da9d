/**
 * Store contract: the room policy (issue 10, finding 7). The first node to start sets it; a later
 * node's config never overwrites it; only a fenced leader write (an operator's command) changes it,
 * and that write marks its inbox row handled in the same transaction.
 */
import { expect, it } from "vitest";
import { ConflictError } from "../../../src/ports/errors.js";
import type { RoomPolicy } from "../../../src/ports/store.js";
import { becomeLeader } from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const strict: RoomPolicy = {
  powerLevel: 75,
  allow: ["@ops:example.org"],
  twoPersonRule: true,
  autoConfirm: [],
  logs: "operators",
};
const lax: RoomPolicy = {
  powerLevel: 0,
  allow: [],
  twoPersonRule: false,
  autoConfirm: ["@me:x"],
  logs: "anyone",
};

export function policiesSection(ctx: ContractContext): void {
  it("the first node sets the room's policy; a later node with another config does not change it", async () => {
    const store = await ctx.store();
    const room = `!${ctx.uid("policy")}:example.org`;
    expect(await store.getRoomPolicy(room)).toBeNull();
    const first = await store.initRoomPolicy(room, strict, "node-a");
    expect(first.set).toBe(true);
    expect(first.stored).toMatchObject({ roomId: room, policy: strict, setBy: "node-a" });
    const second = await store.initRoomPolicy(room, lax, "node-b");
    expect(second.set).toBe(false);
    expect(second.stored.policy).toEqual(strict);
    expect((await store.getRoomPolicy(room))?.policy).toEqual(strict);
    const events = (await store.readEvents(room, 0)).filter((e) => e.kind === "policy.set");
    expect(events).toHaveLength(1);
  });

  it("a leader's command replaces it (fenced) and marks its inbox row handled in the same transaction", async () => {
    const store = await ctx.store();
    const room = `!${ctx.uid("policy")}:example.org`;
    await store.initRoomPolicy(room, strict, "node-a");
    const fence = await becomeLeader(store, room);
    await store.insertInboxEvent({
      eventId: "$policy-1",
      roomId: room,
      sender: "@ops:example.org",
      originServerTs: 1,
      content: { body: "!dag policy two_person_rule off" },
      seenBy: "test",
    });
    const changed = { ...strict, twoPersonRule: false };
    const result = await store.setRoomPolicy(
      { fence, inboxEventId: "$policy-1" },
      room,
      changed,
      "@ops:example.org",
    );
    expect(result.previous).toEqual(strict);
    expect(await store.getRoomPolicy(room)).toMatchObject({ policy: changed, setBy: "@ops:example.org" });
    const row = await store.getInboxEvent("$policy-1");
    expect(row?.status).toBe("handled");
    expect(row?.result).toMatchObject({ op: "policy", kind: "set", policy: changed, previous: strict });
  });

  it("a deposed leader cannot change it, and the policy stays as it was", async () => {
    const store = await ctx.store();
    const room = `!${ctx.uid("policy")}:example.org`;
    await store.initRoomPolicy(room, strict, "node-a");
    const stale = await becomeLeader(store, room, "old");
    await store.releaseLease(stale);
    await becomeLeader(store, room, "new");
    await expect(store.setRoomPolicy({ fence: stale }, room, lax, "@x:y")).rejects.toBeInstanceOf(
      ConflictError,
    );
    expect((await store.getRoomPolicy(room))?.policy).toEqual(strict);
  });
}
