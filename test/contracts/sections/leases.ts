/**
 * Store contract: room leases. Acquire where free or expired with term + 1, exactly one winner
 * among racing connections, renew and release fenced by (holder session, term, unexpired), takeover
 * after expiry on the store's (test) clock, and a deposed leader whose writes change nothing.
 */
import { expect, it } from "vitest";
import { ConflictError } from "../../../src/ports/errors.js";
import type { LeaderFence, Store } from "../../../src/ports/store.js";
import { cmd, dag, LEASE_TTL_MS, race, runInput, session, task } from "../../support/store-fixtures.js";
import type { ContractContext } from "../context.js";

const RACERS = 16;

function stripExpiry(f: LeaderFence & { expiresAt: number }): LeaderFence {
  return { roomId: f.roomId, session: f.session, term: f.term };
}

async function conflictOf(p: Promise<unknown>): Promise<ConflictError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(ConflictError);
  return e as ConflictError;
}

export function leasesSection(ctx: ContractContext): void {
  it("acquires a free room's lease with term 1 on the store's clock", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!lease");
    const me = session("n1");
    expect(await store.getLease(room)).toBeNull();
    const now = ctx.clock.now();
    const got = await store.acquireLease(room, me, LEASE_TTL_MS);
    expect(got).toEqual({ roomId: room, session: me, term: 1, expiresAt: now + LEASE_TTL_MS });
    const lease = await store.getLease(room);
    expect(lease).toEqual({ roomId: room, holder: me, term: 1, expiresAt: now + LEASE_TTL_MS, now });
    expect(await store.now()).toBe(now);
  });

  it("refuses a held lease with a conflict naming the holder, and changes nothing", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!lease");
    await store.acquireLease(room, session("n1", "b1"), LEASE_TTL_MS);
    const before = await store.getLease(room);
    const e = await conflictOf(store.acquireLease(room, session("n2"), LEASE_TTL_MS));
    expect(e.found).toMatchObject({ holder: "n1/b1", term: 1 });
    // The holder itself cannot "acquire" again either: it renews.
    await conflictOf(store.acquireLease(room, session("n1", "b1"), LEASE_TTL_MS));
    expect(await store.getLease(room)).toEqual(before);
  });

  it(`${RACERS} connections racing for one lease: exactly one winner`, async () => {
    const room = ctx.uid("!lease-race");
    const stores = await Promise.all(Array.from({ length: RACERS }, () => ctx.open()));
    const { values, errors } = await race(
      stores.map((s, i) => () => s.acquireLease(room, session(`racer${i}`), LEASE_TTL_MS)),
    );
    expect(values).toHaveLength(1);
    expect(errors).toHaveLength(RACERS - 1);
    for (const e of errors) expect(e).toBeInstanceOf(ConflictError);
    const lease = await stores[0]!.getLease(room);
    expect(lease?.holder).toEqual(values[0]!.session);
    expect(lease?.term).toBe(1);
  });

  it(`${RACERS} connections racing for an EXPIRED lease: exactly one winner, term + 1`, async () => {
    const room = ctx.uid("!lease-race");
    const first = await ctx.store();
    await first.acquireLease(room, session("old"), LEASE_TTL_MS);
    ctx.clock.advance(LEASE_TTL_MS);
    const stores = await Promise.all(Array.from({ length: RACERS }, () => ctx.open()));
    const { values, errors } = await race(
      stores.map((s, i) => () => s.acquireLease(room, session(`racer${i}`), LEASE_TTL_MS)),
    );
    expect(values.map((v) => v.term)).toEqual([2]);
    expect(errors.filter((e) => e instanceof ConflictError)).toHaveLength(RACERS - 1);
  });

  it("renews only for the current holder and term; renewal moves the expiry on the store's clock", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!lease");
    const me = session("n1");
    const fence = stripExpiry(await store.acquireLease(room, me, LEASE_TTL_MS));
    ctx.clock.advance(3_000);
    const { expiresAt } = await store.renewLease(fence, LEASE_TTL_MS);
    expect(expiresAt).toBe(ctx.clock.now() + LEASE_TTL_MS);
    expect((await store.getLease(room))?.expiresAt).toBe(expiresAt);

    const before = await store.getLease(room);
    await conflictOf(store.renewLease({ ...fence, term: fence.term + 1 }, LEASE_TTL_MS));
    await conflictOf(store.renewLease({ ...fence, session: session("n2") }, LEASE_TTL_MS));
    // Same node name, new boot: a restarted process is a different session.
    await conflictOf(
      store.renewLease({ ...fence, session: { nodeId: me.nodeId, bootId: "reborn" } }, LEASE_TTL_MS),
    );
    expect(await store.getLease(room)).toEqual({ ...before, now: ctx.clock.now() });
  });

  it("renewing or releasing a room that has no lease row is a conflict with nothing found", async () => {
    const store = await ctx.store();
    const fence: LeaderFence = { roomId: ctx.uid("!nolease"), session: session("n1"), term: 1 };
    const renew = await conflictOf(store.renewLease(fence, LEASE_TTL_MS));
    expect(renew.found).toBeNull();
    const release = await conflictOf(store.releaseLease(fence));
    expect(release.found).toBeNull();
    expect(await store.getLease(fence.roomId)).toBeNull();
  });

  it("a batched renewal is judged by the fence: another session or boot under the holder's term, or a room with no lease, is lost and changes nothing", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!sync-fence");
    const nowhere = ctx.uid("!sync-none");
    const me = session("n1", "b1");
    const held = await store.acquireLease(room, me, LEASE_TTL_MS);
    ctx.clock.advance(100);
    const before = await store.getLease(room);
    const answers = await store.syncLeases(session("n1", "reborn"), LEASE_TTL_MS, [
      { roomId: room, term: held.term },
      { roomId: nowhere, term: 1 },
    ]);
    expect(answers.map((a) => [a.roomId, a.outcome, a.holder, a.term])).toEqual([
      [room, "lost", me, held.term],
      [nowhere, "lost", null, 0],
    ]);
    const [other] = await store.syncLeases(session("n2", "b1"), LEASE_TTL_MS, [
      { roomId: room, term: held.term },
    ]);
    expect(other?.outcome).toBe("lost");
    expect(await store.getLease(room)).toEqual(before);
    // A renewal never creates the lease it names.
    expect(await store.getLease(nowhere)).toBeNull();
    expect(await store.readEvents(nowhere, 0)).toEqual([]);
  });

  it("expires on the store's clock: the holder can no longer renew, another node takes over with term + 1", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!lease");
    const old = stripExpiry(await store.acquireLease(room, session("old"), LEASE_TTL_MS));
    ctx.clock.advance(LEASE_TTL_MS - 1);
    await conflictOf(store.acquireLease(room, session("new"), LEASE_TTL_MS));
    ctx.clock.advance(1);
    // Expired exactly at expiresAt: the old holder may not renew its way back in.
    await conflictOf(store.renewLease(old, LEASE_TTL_MS));
    const next = await store.acquireLease(room, session("new"), LEASE_TTL_MS);
    expect(next.term).toBe(old.term + 1);
    expect((await store.getLease(room))?.holder?.nodeId).toBe("new");
  });

  it("a deposed leader's writes change nothing: renew, release, create run, cap, schedule, inbox", async () => {
    const room = ctx.uid("!deposed");
    const oldStore = await ctx.open();
    const newStore = await ctx.open();
    const old = stripExpiry(await oldStore.acquireLease(room, session("old"), LEASE_TTL_MS));
    await oldStore.insertInboxEvent({
      eventId: ctx.uid("$ev"),
      roomId: room,
      sender: "@a:x",
      originServerTs: 1,
      content: { body: "!dag status" },
      seenBy: "old",
    });
    ctx.clock.advance(LEASE_TTL_MS + 1);
    const current = stripExpiry(await newStore.acquireLease(room, session("new"), LEASE_TTL_MS));
    const leaseBefore = await newStore.getLease(room);
    const capBefore = await newStore.getRoomCap(room);
    const eventsBefore = await newStore.readEvents(room, 0);

    await conflictOf(oldStore.renewLease(old, LEASE_TTL_MS));
    await conflictOf(oldStore.releaseLease(old));
    await conflictOf(oldStore.createRun(cmd(old), runInput(room, dag(ctx.uid("d"), [task("a")]))));
    await conflictOf(oldStore.setRoomCap(room, 1, { fence: old }));
    await conflictOf(oldStore.scheduleStep(old));
    await conflictOf(oldStore.reap(old));
    await conflictOf(oldStore.deriveRunOutcomes(old));
    await conflictOf(oldStore.nextInboxEvent(old));
    await conflictOf(
      oldStore.enqueueOutbox(old, [
        { txnId: ctx.uid("t"), roomId: room, eventType: "m.room.message", content: {} },
      ]),
    );

    expect(await newStore.getLease(room)).toEqual({ ...leaseBefore, now: ctx.clock.now() });
    expect(await newStore.getRoomCap(room)).toBe(capBefore);
    expect(await newStore.listRuns(room)).toEqual([]);
    expect(await newStore.readEvents(room, 0)).toEqual(eventsBefore);
    // The current leader is untouched by all of it.
    await newStore.renewLease(current, LEASE_TTL_MS);
  });

  it("a leader whose lease expired unclaimed is fenced too: its writes and its release are refused", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!lapsed");
    const fence = stripExpiry(await store.acquireLease(room, session("n1"), LEASE_TTL_MS));
    ctx.clock.advance(LEASE_TTL_MS);
    await conflictOf(store.createRun(cmd(fence), runInput(room, dag(ctx.uid("d"), [task("a")]))));
    await conflictOf(store.releaseLease(fence));
    expect(await store.listRuns(room)).toEqual([]);
  });

  it("release frees the room at once for the next acquirer, term still rising; a second release is refused", async () => {
    const store = await ctx.store();
    const room = ctx.uid("!lease");
    const fence = stripExpiry(await store.acquireLease(room, session("n1"), LEASE_TTL_MS));
    await store.releaseLease(fence);
    const lease = await store.getLease(room);
    expect(lease?.holder).toBeNull();
    expect(lease?.term).toBe(1);
    await conflictOf(store.releaseLease(fence));
    await conflictOf(store.renewLease(fence, LEASE_TTL_MS));
    const next = await store.acquireLease(room, session("n2"), LEASE_TTL_MS);
    expect(next.term).toBe(2);
  });

  it("records acquisitions and releases in the room's event log with term and actor", async () => {
    const store: Store = await ctx.store();
    const room = ctx.uid("!lease-log");
    const me = session("n1", "b1");
    const fence = stripExpiry(await store.acquireLease(room, me, LEASE_TTL_MS));
    await store.releaseLease(fence);
    const events = await store.readEvents(room, 0);
    expect(events.map((e) => [e.kind, e.term, e.actor])).toEqual([
      ["lease.acquired", 1, "n1/b1"],
      ["lease.released", 1, "n1/b1"],
    ]);
  });
}
