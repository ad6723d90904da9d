/**
 * Whose authority a schedule runs on: the publisher, and under the two-person
 * rule the confirmer too, judged as their own command would be now (room policy from the store,
 * standing from the oracle). The oracle here is a stand-in; the real one is tested against Synapse
 * in test/e2e/matrix-schedule-authority.test.ts.
 */
import { describe, expect, it } from "vitest";
import type { CommandPolicy } from "../../src/app/commands/context.js";
import { scheduleAuthority } from "../../src/app/schedule-authority.js";
import type { SenderStanding } from "../../src/ports/permissions.js";
import type { DefinitionRecord, RoomPolicy } from "../../src/ports/store.js";

const policy: CommandPolicy = {
  requiredPowerLevel: 50,
  allowlist: [],
  twoPersonRule: true,
  autoConfirm: [],
  confirmTimeoutMs: 60_000,
  nodeStaleAfterMs: 30_000,
};

function authority(
  power: Record<string, number>,
  room: Partial<RoomPolicy> | null = null,
  queueMessages = true,
) {
  return scheduleAuthority({
    store: {
      getRoomPolicy: async (roomId) =>
        room === null
          ? null
          : {
              roomId,
              setBy: "node",
              updatedAt: 0,
              policy: {
                powerLevel: 50,
                allow: [],
                twoPersonRule: true,
                autoConfirm: [],
                logs: "operators",
                ...room,
              },
            },
    },
    permissions: {
      standing: async (_room, user): Promise<SenderStanding> =>
        user.startsWith("local:")
          ? { kind: "local-operator" }
          : { kind: "room-member", powerLevel: power[user] ?? 0, allowlisted: false, adminLevel: 100 },
    },
    policy,
    queueMessages,
  });
}

const def = (publisher: string, confirmedBy: string | null): DefinitionRecord =>
  ({
    roomId: "!r:x",
    dagId: "tick",
    publisher,
    origin: { runId: "u", status: "succeeded", confirmedBy, confirmDeadline: null },
  }) as DefinitionRecord;

describe("schedule authority", () => {
  it("allows while the publisher and the confirmer are operators; names who is not", async () => {
    const a = authority({ "@alice:x": 100, "@bob:x": 50 });
    expect(await a.refusal(def("@alice:x", "@bob:x"))).toBeNull();
    const demoted = authority({ "@alice:x": 0, "@bob:x": 50 });
    expect(await demoted.refusal(def("@alice:x", "@bob:x"))).toMatch(
      /^@alice:x \(its publisher\) may no longer run it: power level 0 in this room, 50 needed/,
    );
    const confirmerGone = authority({ "@alice:x": 100, "@bob:x": 10 });
    expect(await confirmerGone.refusal(def("@alice:x", "@bob:x"))).toMatch(
      /^@bob:x \(the confirmer of its first run\)/,
    );
  });

  it("the room's stored policy decides: its power level, its allowlist, its two-person rule", async () => {
    const power = { "@alice:x": 60, "@bob:x": 10 };
    expect(await authority(power, { twoPersonRule: false }).refusal(def("@alice:x", "@bob:x"))).toBeNull();
    expect(
      await authority(power, { powerLevel: 70, allow: ["@alice:x"], twoPersonRule: false }).refusal(
        def("@alice:x", null),
      ),
    ).toBeNull();
    expect(
      await authority(power, { powerLevel: 70, twoPersonRule: false }).refusal(def("@alice:x", null)),
    ).toMatch(/70 needed/);
  });

  it("a local operator's schedule always runs; the notice is queued only where the room's messages are sent", async () => {
    const a = authority({});
    expect(await a.refusal(def("local:ops", null))).toBeNull();
    expect(a.notice(def("@alice:x", null), "why", 1000)).toMatchObject({
      txnId: "schedule.paused.!r:x.tick.1000",
      roomId: "!r:x",
      content: { msgtype: "m.notice", "m.mentions": {} },
    });
    expect(authority({}, null, false).notice(def("@alice:x", null), "why", 1000)).toBeNull();
  });
});
