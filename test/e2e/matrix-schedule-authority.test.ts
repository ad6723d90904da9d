/**
 * Schedules run on a living authority, against a real Synapse and two
 * `dagbot start` processes: a per-second schedule, published by alice and confirmed by bob under
 * the two-person rule, fires; alice lowers her own power level in the room's m.room.power_levels;
 * the schedule pauses itself instead of firing, and the room gets exactly one message saying so.
 * Then an operator deletes it in chat, and it stays quiet.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { RunRecord, Store } from "../../src/ports/store.js";
import { BotFleet, fleetHooks } from "../support/bot-fleet.js";
import { bodyOf, publishJson, replyTo, roomHistory } from "../support/bot-chat.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser } from "../support/matrix-user.js";
import { waitFor } from "../support/store-wait.js";

const fx = useSynapse();
let fleet: BotFleet;
let store: Store;
let roomId: string;
let alice: MatrixUser; // publisher, power 100, then 0
let bob: MatrixUser; // confirmer, power 50
const T = 30_000;

const slotRuns = async (): Promise<RunRecord[]> =>
  (await store.listDefinitionRuns(roomId, "tick", { limit: 10_000 })).filter((r) => r.dag.slot !== undefined);

beforeAll(async () => {
  const { hs } = fx;
  const bots = [];
  for (const n of [1, 2]) bots.push(await hs.registerUser(`authbot${n}`, { deviceId: `AUTHBOT${n}` }));
  const [a, b] = [await hs.registerUser("sched-alice"), await hs.registerUser("sched-bob")];
  alice = new MatrixUser(hs.url, a);
  bob = new MatrixUser(hs.url, b);
  roomId = await hs.createRoom(a.accessToken, {
    name: "schedule authority",
    invite: [...bots.map((x) => x.userId), b.userId],
    powerLevels: { users: { [a.userId]: 100, [b.userId]: 50 } },
  });
  await bob.joinRoom(roomId);
  fleet = new BotFleet({
    hs,
    bots,
    rooms: [roomId],
    config: { permissions: { power_level: 50, two_person_rule: true } },
    matrix: { encryption: false },
  });
  await fleet.startAll();
  store = await openSqliteStore(fleet.storePath);
  alice.startSync();
}, 120_000);

fleetHooks(() => ({ fleet, person: alice, store }));

describe("a schedule whose publisher loses their power level", () => {
  it("pauses itself instead of firing and says so in the room exactly once", async () => {
    const dag = { id: "tick", schedule: "* * * * * *", tasks: [{ id: "t", action: "true" }] };
    const published = await alice.sendText(roomId, publishJson(dag));
    await alice.waitFor(replyTo(published), T, "the publish reply");
    const confirm = await bob.sendText(roomId, "!dag confirm tick");
    await alice.waitFor(replyTo(confirm), T, "the confirm reply");
    await waitFor("3 slots fired", slotRuns, (r) => r.length >= 3, { timeoutMs: T, intervalMs: 100 });

    // Alice lowers her own power level: she may no longer run anything in the room.
    await alice.setPowerLevel(roomId, alice.userId, 0);
    const paused = await waitFor(
      "the schedule to pause itself",
      () => store.getDefinition(roomId, "tick"),
      (d) => d?.scheduleState.state === "paused",
      { timeoutMs: T, intervalMs: 100 },
    );
    expect(paused?.scheduleState).toMatchObject({ by: "dagbot" });
    expect(paused?.scheduleState.reason).toContain(alice.userId);
    const notice = await alice.waitFor(
      (e) => e.room_id === roomId && /paused itself/.test(bodyOf(e)),
      T,
      "the message that the schedule paused itself",
    );
    expect(bodyOf(notice)).toContain("`tick`");
    const firedBefore = (await slotRuns()).length;

    // Several slots later (seen on the store's clock), nothing more fired, nothing more was said.
    const pausedAt = paused!.scheduleState.at!;
    await waitFor(
      "4 slots to pass",
      () => store.now(),
      (now) => now > pausedAt + 4_000,
      {
        timeoutMs: T,
        intervalMs: 200,
      },
    );
    expect((await slotRuns()).length).toBe(firedBefore);
    expect((await slotRuns()).every((r) => r.dag.slot!.at <= pausedAt)).toBe(true);
    const said = (await roomHistory(alice, roomId)).filter((e) => /paused itself/.test(bodyOf(e)));
    expect(said).toHaveLength(1);
    const events = (await store.readEvents(roomId, 0)).filter((e) => e.kind.startsWith("schedule."));
    expect(events.filter((e) => e.kind === "schedule.paused")).toHaveLength(1);
    // One slot skipped for the publisher's power level; on a loaded machine the leader may also
    // have missed a slot before the pause, which the schedule's missed policy skips and says so.
    const reasons = events.filter((e) => e.kind === "schedule.skipped").map((e) => String(e.data["reason"]));
    expect(reasons.filter((r) => r === paused?.scheduleState.reason)).toHaveLength(1);
    expect(reasons.filter((r) => r !== paused?.scheduleState.reason && !r.startsWith("missed: "))).toEqual(
      [],
    );

    // An operator deletes it in chat; `!dag schedules` no longer lists it.
    const del = await bob.sendText(roomId, "!dag schedule delete tick");
    const answer = await alice.waitFor(replyTo(del), T, "the delete reply");
    expect(bodyOf(answer)).toContain("is deleted");
    const list = await bob.sendText(roomId, "!dag schedules");
    expect(bodyOf(await alice.waitFor(replyTo(list), T, "the schedules reply"))).toContain(
      "No scheduled DAGs",
    );
  }, 120_000);
});
