/**
 * `!dag mark` in chat, against a real Synapse and one `dagbot start`: a member without the
 * operators' power level is refused; the operator marks an open gate succeeded with a reason, what
 * needs it runs, the run ends succeeded, and the run's card shows the mark (who, from chat, why).
 * (The CLI and HTTP faces: mark-faces.test.ts.)
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import { TEST_ACTIONS } from "../support/bot-fleet.js";
import { publishJson } from "../support/bot-chat.js";
import type { MatrixUser } from "../support/matrix-user.js";
import { useRoomWithPeople } from "../support/room-with-people.js";
import { waitFor } from "../support/store-wait.js";

const room = useRoomWithPeople({
  people: {
    alice: { localpart: "mark-alice", power: 100 }, // operator
    dave: { localpart: "mark-dave", power: 10 }, // member
  },
  bots: { prefix: "markbot" },
  botPower: 50,
  roomName: "marks",
  fleet: (ids) => ({
    config: { permissions: { power_level: 50, auto_confirm: [ids.alice] }, actions: TEST_ACTIONS },
    matrix: { encryption: false },
  }),
});
const { say } = room;
let store: Store;
let roomId: string;
let alice: MatrixUser;
let dave: MatrixUser;
const T = 30_000;

beforeAll(() => {
  ({
    roomId,
    store,
    people: { alice, dave },
  } = room);
});

describe("mark in chat", () => {
  it("is refused to a member, and an operator's mark of an open gate lets the run go on, shown on its card", async () => {
    const dag = {
      id: "ship",
      tasks: [
        { id: "ok", approve: { timeout: "4h" } },
        { id: "deploy", action: "echo", args: { message: "deploying" }, needs: ["ok"] },
      ],
    };
    await say(alice, publishJson(dag), "publish ship");
    const run = (await store.getRun(roomId, "ship"))!;
    await waitFor(
      "the gate open",
      () => store.getTask(run.runId, "ok"),
      (t) => t?.gateState !== null,
      { timeoutMs: T, intervalMs: 100 },
    );
    const refused = await say(dave, "!dag mark ship ok succeeded", "dave's mark");
    expect(refused).toMatch(/you need power level 50/);
    expect((await store.getTask(run.runId, "ok"))?.status).toBe("blocked");

    const answer = await say(alice, "!dag mark ship ok succeeded approved on the phone", "alice's mark");
    expect(answer).toContain("marked `ship/ok` succeeded (approved on the phone)");
    const ended = await waitFor(
      "ship to end",
      () => store.getRun(roomId, "ship"),
      (r) => r?.status === "succeeded" || r?.status === "failed",
      { timeoutMs: T, intervalMs: 100 },
    );
    expect(ended!.status).toBe("succeeded");
    expect((await store.getTask(run.runId, "deploy"))?.output).toBe("deploying\n");
    // The card shows who marked it, from chat, and why.
    await alice.waitFor(
      (e) =>
        /✅ `ok` — .*marked succeeded by @mark-alice:localhost \(chat \d\d:\d\d UTC\): approved on the phone/.test(
          String(e.content["m.new_content"]?.body ?? e.content["body"] ?? ""),
        ),
      T,
      "the card showing the mark",
    );
  }, 90_000);
});
