/**
 * Store contract: the room policy. The first node to start sets it; a later
 * node's config never overwrites it; only a fenced leader write (an admin's command) changes it,
 * and that write marks its inbox row handled in the same transaction. Under the two-person rule a
 * change is proposed first and applied by a second person's confirmation: only while it
 * is pending and unexpired, never by its proposer, and once.
 */
import { expect, it } from "vitest";
import { ConflictError } from "../../../src/ports/errors.js";
import type { RoomPolicy } from "../../../src/ports/store.js";
import { answered, becomeLeader } from "../../support/store-fixtures.js";
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
      { fence, inboxEventId: "$policy-1", answer: answered },
      room,
      changed,
      "@ops:example.org",
    );
    expect(result).toEqual({ kind: "set", previous: strict });
    expect(await store.getRoomPolicy(room)).toMatchObject({ policy: changed, setBy: "@ops:example.org" });
    const row = await store.getInboxEvent("$policy-1");
    expect(row?.status).toBe("handled");
    expect(row?.result).toEqual({ answered: { policy: changed, previous: strict } });
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

  it("every change is logged with who, from what and to what", async () => {
    const store = await ctx.store();
    const room = `!${ctx.uid("policy")}:example.org`;
    await store.initRoomPolicy(room, strict, "node-a");
    const fence = await becomeLeader(store, room);
    const change = { setting: "power_level", value: "0" };
    await store.setRoomPolicy({ fence }, room, lax, "@admin:x", { change });
    const set = (await store.readEvents(room, 0)).filter((e) => e.kind === "policy.set");
    expect(set.at(-1)).toMatchObject({
      term: fence.term,
      data: { policy: lax, previous: strict, by: "@admin:x", change },
    });
    expect(set.at(-1)?.at).toBe(ctx.clock.now());
  });

  it("a proposed change waits; its proposer cannot confirm it; another person applies it once", async () => {
    const store = await ctx.store();
    const room = `!${ctx.uid("policy")}:example.org`;
    await store.initRoomPolicy(room, strict, "node-a");
    const fence = await becomeLeader(store, room);
    await store.insertInboxEvent({
      eventId: `$${ctx.uid("propose")}`,
      roomId: room,
      sender: "@a:x",
      originServerTs: 1,
      content: { body: "!dag policy two_person_rule off" },
      seenBy: "test",
    });
    const eventId = (await store.nextInboxEvent(fence))!.eventId;
    const change = { setting: "two_person_rule", value: "off" };
    const proposed = await store.proposePolicyChange(
      { fence, inboxEventId: eventId, answer: answered },
      room,
      {
        changeId: "0a1b2c3d",
        change,
        by: "@a:x",
        ttlMs: 60_000,
      },
    );
    expect(proposed).toMatchObject({
      roomId: room,
      changeId: "0a1b2c3d",
      change,
      proposedBy: "@a:x",
      proposedAt: ctx.clock.now(),
      expiresAt: ctx.clock.now() + 60_000,
      status: "pending",
      confirmedBy: null,
    });
    // Repeated (a leader handling the command again): the same proposal, nothing new.
    const again = await store.proposePolicyChange({ fence }, room, {
      changeId: "0a1b2c3d",
      change: { setting: "logs", value: "anyone" },
      by: "@a:x",
      ttlMs: 60_000,
    });
    expect(again).toEqual(proposed);
    expect((await store.getInboxEvent(eventId))?.result).toMatchObject({
      answered: { changeId: "0a1b2c3d", proposedBy: "@a:x" },
    });
    expect((await store.getRoomPolicy(room))?.policy).toEqual(strict);

    const changed = { ...strict, twoPersonRule: false };
    const own = await store.setRoomPolicy({ fence }, room, changed, "@a:x", { confirms: "0a1b2c3d" });
    expect(own).toMatchObject({ kind: "not-pending", proposal: { status: "pending" } });
    const unknown = await store.setRoomPolicy({ fence }, room, changed, "@b:x", { confirms: "ffffffff" });
    expect(unknown).toEqual({ kind: "not-pending", proposal: null });
    expect((await store.getRoomPolicy(room))?.policy).toEqual(strict);

    ctx.clock.advance(1_000);
    const done = await store.setRoomPolicy({ fence }, room, changed, "@b:x", {
      change,
      confirms: "0a1b2c3d",
    });
    expect(done).toEqual({ kind: "set", previous: strict });
    expect(await store.getRoomPolicy(room)).toMatchObject({ policy: changed, setBy: "@b:x" });
    expect(await store.getPolicyProposal(room, "0a1b2c3d")).toMatchObject({
      status: "applied",
      confirmedBy: "@b:x",
      confirmedAt: ctx.clock.now(),
    });
    const twice = await store.setRoomPolicy({ fence }, room, lax, "@c:x", { confirms: "0a1b2c3d" });
    expect(twice).toMatchObject({ kind: "not-pending", proposal: { status: "applied" } });
    expect((await store.getRoomPolicy(room))?.policy).toEqual(changed);

    const events = (await store.readEvents(room, 0)).filter((e) => e.kind.startsWith("policy."));
    expect(events.map((e) => e.kind)).toEqual(["policy.set", "policy.proposed", "policy.set"]);
    expect(events[2]?.data).toMatchObject({
      policy: changed,
      previous: strict,
      by: "@b:x",
      change,
      proposal: { changeId: "0a1b2c3d", proposedBy: "@a:x" },
    });
  });

  it("a proposal nobody confirmed in time expires: it can no longer be applied", async () => {
    const store = await ctx.store();
    const room = `!${ctx.uid("policy")}:example.org`;
    await store.initRoomPolicy(room, strict, "node-a");
    const fence = await becomeLeader(store, room);
    await store.proposePolicyChange({ fence }, room, {
      changeId: "12345678",
      change: { setting: "power_level", value: "0" },
      by: "@a:x",
      ttlMs: 500,
    });
    ctx.clock.advance(500);
    const late = await store.setRoomPolicy({ fence }, room, lax, "@b:x", { confirms: "12345678" });
    expect(late).toMatchObject({
      kind: "not-pending",
      proposal: { status: "pending", expiresAt: ctx.clock.now() },
    });
    expect((await store.getRoomPolicy(room))?.policy).toEqual(strict);
  });

  it("a deposed leader cannot propose a change", async () => {
    const store = await ctx.store();
    const room = `!${ctx.uid("policy")}:example.org`;
    const stale = await becomeLeader(store, room, "old");
    await store.releaseLease(stale);
    await becomeLeader(store, room, "new");
    await expect(
      store.proposePolicyChange({ fence: stale }, room, {
        changeId: "abcdef01",
        change: { setting: "logs", value: "anyone" },
        by: "@a:x",
        ttlMs: 1_000,
      }),
    ).rejects.toBeInstanceOf(ConflictError);
    expect(await store.getPolicyProposal(room, "abcdef01")).toBeNull();
  });
}
