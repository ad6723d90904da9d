/**
 * The room's policy is changed by those who own the room, against a real
 * Synapse and a real `dagbot start` node. The room is created as Synapse creates rooms: changing its
 * power levels needs 100. An operator at 50 (enough for publish and confirm) tries the attack of the
 * finding: switch the two-person rule off, publish and confirm their own DAG, open the operator
 * level to everyone, put themselves on auto_confirm. Every change is refused and the run waits.
 * Room admins (100) change it, but under the two-person rule only with a second admin's
 * confirmation; the proposer's own confirmation is refused; the applied change is announced in the
 * room and kept as a `policy.set` event with who, from what and to what.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { RoomPolicy, Store } from "../../src/ports/store.js";
import { bodyOf, publishJson, replyTo } from "../support/bot-chat.js";
import type { MatrixUser, MatrixEvent } from "../support/matrix-user.js";
import { useRoomWithPeople } from "../support/room-with-people.js";

const room = useRoomWithPeople({
  people: {
    alice: { localpart: "pol-alice", power: 100 }, // room admin (the room's creator)
    bob: { localpart: "pol-bob", power: 50 }, // operator
    carol: { localpart: "pol-carol" }, // member, power 0
    dave: { localpart: "pol-dave", power: 100 }, // room admin
  },
  bots: { prefix: "polbot" },
  roomName: "dagbot policy",
  fleet: { config: { permissions: { power_level: 50, two_person_rule: true } } },
  start: "first",
});
let store: Store;
let roomId: string;
let alice: MatrixUser;
let dave: MatrixUser;
let bob: MatrixUser;
let carol: MatrixUser;

const T = 30_000;

async function command(user: MatrixUser, body: string): Promise<string> {
  const id = await user.sendText(roomId, body);
  const reply: MatrixEvent = await alice.waitFor(
    replyTo(id),
    T,
    `the reply to ${JSON.stringify(body.slice(0, 40))}`,
  );
  return bodyOf(reply);
}

const policyNow = async (): Promise<RoomPolicy | undefined> => (await store.getRoomPolicy(roomId))?.policy;

beforeAll(() => {
  ({
    roomId,
    store,
    people: { alice, dave, bob, carol },
  } = room);
});

describe("the room's policy belongs to the room's admins", () => {
  it("an operator at 50 cannot change any setting alone, so their own DAG still needs someone else", async () => {
    // As Synapse creates rooms: changing the power levels needs 100, so bob at 50 is no admin.
    const levels = await alice.request(
      "GET",
      `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/state/m.room.power_levels/`,
    );
    expect(levels.events["m.room.power_levels"]).toBe(100);
    expect(levels.users[bob.userId]).toBe(50);
    const before = await policyNow();
    expect(before).toMatchObject({ twoPersonRule: true, powerLevel: 50, autoConfirm: [] });
    for (const change of [
      "two_person_rule off",
      "power_level 0",
      `auto_confirm +${bob.userId}`,
      `allow +${carol.userId}`,
      "logs anyone",
    ]) {
      expect(await command(bob, `!dag policy ${change}`)).toContain(
        "changing the room's policy needs power level 100, the level this room requires to change its power levels (room admins); you have 50",
      );
    }
    expect(await policyNow()).toEqual(before);
    expect((await store.readEvents(roomId, 0)).filter((e) => e.kind.startsWith("policy.")).length).toBe(1);

    // The rest of the attack: publish and confirm their own DAG. The rule still holds.
    await command(bob, publishJson({ id: "pol_own", tasks: [{ id: "t", action: "true" }] }));
    expect(await command(bob, "!dag confirm pol_own")).toContain("two-person rule");
    expect((await store.getRun(roomId, "pol_own"))?.status).toBe("pending");
    // Showing the policy stays an operator's right.
    expect(await command(bob, "!dag policy")).toContain("two_person_rule on");
  });

  it("an admin's change waits for a second admin; the proposer cannot confirm it; the applied change is announced and logged", async () => {
    const proposed = await command(alice, "!dag policy two_person_rule off");
    const id = /!dag policy confirm ([0-9a-f]{8})/.exec(proposed)?.[1];
    expect(id).toBeDefined();
    expect(proposed).toContain(`Policy change proposed by ${alice.userId}: \`two_person_rule off\``);
    expect(proposed).toContain("needs a second room admin");
    expect((await policyNow())?.twoPersonRule).toBe(true);

    expect(await command(alice, `!dag policy confirm ${id}`)).toContain(
      `you proposed policy change ${id}; the two-person rule needs another room admin to confirm it`,
    );
    expect(await command(bob, `!dag policy confirm ${id}`)).toContain("needs power level 100");
    expect((await policyNow())?.twoPersonRule).toBe(true);

    const applied = await command(dave, `!dag policy confirm ${id}`);
    expect(applied).toContain(
      `The room's policy is changed by ${dave.userId} (proposed by ${alice.userId} as \`${id}\`): two_person_rule on → off.`,
    );
    expect(await store.getRoomPolicy(roomId)).toMatchObject({
      setBy: dave.userId,
      policy: { twoPersonRule: false },
    });
    const events = (await store.readEvents(roomId, 0)).filter((e) => e.kind.startsWith("policy."));
    expect(events.map((e) => e.kind)).toEqual(["policy.set", "policy.proposed", "policy.set"]);
    expect(events[1]?.data).toMatchObject({ changeId: id, by: alice.userId });
    expect(events[2]?.data).toMatchObject({
      by: dave.userId,
      previous: { twoPersonRule: true },
      policy: { twoPersonRule: false },
      change: { setting: "two_person_rule", value: "off" },
      proposal: { changeId: id, proposedBy: alice.userId },
    });
    expect(events[2]!.at).toBeGreaterThanOrEqual(events[1]!.at);

    // Without the rule an admin's change applies at once; an operator's still does not.
    expect(await command(dave, "!dag policy logs anyone")).toContain(
      `The room's policy is changed by ${dave.userId}: logs operators → anyone.`,
    );
    expect(await command(bob, "!dag policy power_level 0")).toContain("needs power level 100");
    expect((await policyNow())?.powerLevel).toBe(50);
  });
});
