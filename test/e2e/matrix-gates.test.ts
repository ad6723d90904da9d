/**
 * Approval gates in chat, against a real Synapse and two `dagbot start` processes: alice
 * publishes a release whose gate needs two operators and a ticket, bob confirms it. The gate's
 * message in the run's thread mentions exactly carol and erin (the operators other than the run's
 * publisher and confirmer); dave (power 10) reacts ✅ and is refused once, visibly; carol approves
 * with ✅, erin with `!dag approve … ticket=OPS-7`; the ticket reaches deploy's argv (what echo
 * printed), and the gate's message is edited to say who approved and when.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import { TEST_ACTIONS } from "../support/bot-fleet.js";
import { bodyOf, publishJson } from "../support/bot-chat.js";
import type { MatrixUser, MatrixEvent } from "../support/matrix-user.js";
import { useRoomWithPeople } from "../support/room-with-people.js";
import { waitFor } from "../support/store-wait.js";

const room = useRoomWithPeople({
  people: {
    alice: { localpart: "gate-alice", power: 100 }, // publisher
    bob: { localpart: "gate-bob", power: 50 }, // confirmer
    carol: { localpart: "gate-carol", power: 50 }, // operator
    erin: { localpart: "gate-erin", power: 50 }, // operator
    dave: { localpart: "gate-dave", power: 10 }, // member
  },
  bots: { prefix: "gatebot", count: 2 },
  // The bots hold operator power too: they are still never named as approvers.
  botPower: 50,
  roomName: "approval gates",
  fleet: {
    config: {
      permissions: { power_level: 50 },
      actions: {
        ...TEST_ACTIONS,
        // Publishes version=<v> for its dependents: what the gate's message says is approved.
        stamp: {
          argv: ["sh", "-c", 'echo "version=$0" >> "$DAGBOT_OUTPUT"', "{v}"],
          args: { v: { pattern: "[0-9.]{1,20}" } },
          timeout: "1m",
          kill_grace: "300ms",
        },
      },
    },
    matrix: { encryption: false },
  },
});
const { say } = room;
let store: Store;
let roomId: string;
let alice: MatrixUser;
let bob: MatrixUser;
let carol: MatrixUser;
let erin: MatrixUser;
let dave: MatrixUser;
const T = 30_000;

beforeAll(() => {
  ({
    roomId,
    store,
    people: { alice, bob, carol, erin, dave },
  } = room);
});

describe("an approval gate in chat", () => {
  it("mentions exactly who may approve, refuses a member once, passes with a reaction and a command, and its form value reaches the next task", async () => {
    const dag = {
      id: "release",
      tasks: [
        { id: "build", action: "stamp", args: { v: "2.7.0" }, outputs: { version: "[0-9.]+" } },
        {
          id: "ok",
          needs: ["build"],
          approve: {
            who: "operators",
            approvers: 2,
            description: "roll out to production",
            timeout: "4h",
            form: { ticket: "^[A-Z]+-[0-9]+$" },
          },
        },
        {
          id: "deploy",
          action: "echo",
          args: { message: "deploying {tasks.ok.outputs.ticket}" },
          needs: ["ok"],
        },
      ],
    };
    await say(alice, publishJson(dag), "publish release");
    await say(bob, "!dag confirm release", "confirm release");
    const run = (await store.getRun(roomId, "release"))!;

    const gateMessage = await alice.waitFor(
      (e) => bodyOf(e).startsWith("🚦") && bodyOf(e).includes("approve `release/ok`"),
      T,
      "the gate's message",
    );
    expect(gateMessage.content["m.mentions"]).toEqual({ user_ids: [carol.userId, erin.userId].sort() });
    // Three short lines, what to do first: who must act on what, how, until when and what runs after.
    const gateLines = bodyOf(gateMessage).split("\n");
    expect(gateLines).toHaveLength(3);
    expect(gateLines[0]).toMatch(
      /^🚦 @gate-(carol|erin):localhost, @gate-(carol|erin):localhost: approve `release\/ok` — roll out to production · `version=2\.7\.0`$/,
    );
    expect(gateLines[1]).toMatch(
      /^React ✅ to approve or ❌ to deny, or send `!dag approve release ok ticket=…`/,
    );
    expect(gateLines[2]).toMatch(
      /^Expires at \d\d:\d\d UTC \(in 4h\): then it fails; once approved, `deploy` runs$/,
    );
    expect(bodyOf(gateMessage)).not.toMatch(/gatebot/);
    // In the run's thread, under the publish.
    expect(gateMessage.content["m.relates_to"]?.rel_type).toBe("m.thread");
    expect(gateMessage.content["m.relates_to"]?.event_id).toBe(run.publishEventId);

    // The run's card says the gate is open and whom it awaits.
    await alice.waitFor(
      (e) =>
        String(e.content["m.new_content"]?.body ?? e.content["body"] ?? "").includes(
          "awaits approval by the room's operators (0 of 2)",
        ),
      T,
      "the card naming the open gate",
    );
    // Dave may not decide: refused once, visibly; a second reaction of his is not answered again.
    await dave.sendReaction(roomId, gateMessage.event_id, "✅");
    await alice.waitFor(
      (e) => bodyOf(e).includes("only the room's operators may decide on this gate"),
      T,
      "dave's refusal",
    );
    await dave.sendReaction(roomId, gateMessage.event_id, "❌");

    const carolsOk = await carol.sendReaction(roomId, gateMessage.event_id, "✅");
    await waitFor(
      "carol's approval",
      () => store.getTask(run.runId, "ok"),
      (t) => (t?.gateState?.approvals.length ?? 0) === 1,
      { timeoutMs: T, intervalMs: 100 },
    );
    // Her ✅ is answered on the message she reacted to: its edit says who approved so far.
    await alice.waitFor(
      (e) =>
        e.content["m.relates_to"]?.rel_type === "m.replace" &&
        e.content["m.relates_to"]?.event_id === gateMessage.event_id &&
        String(e.content["m.new_content"]?.body).includes(
          "approved so far by @gate-carol:localhost (1 of 2)",
        ),
      T,
      "the gate message's edit after carol's approval",
    );
    const answer = await say(erin, "!dag approve release ok ticket=OPS-7", "erin's approval");
    expect(answer).toContain("approved `release/ok`");

    const ended = await waitFor(
      "release to end",
      () => store.getRun(roomId, "release"),
      (r) => r?.status === "succeeded" || r?.status === "failed",
      { timeoutMs: T, intervalMs: 100 },
    );
    expect(ended!.status).toBe("succeeded");
    const gate = (await store.getTask(run.runId, "ok"))!;
    expect(gate.gateState!.approvals.map((a) => [a.by, a.face])).toEqual([
      [carol.userId, "chat"],
      [erin.userId, "chat"],
    ]);
    // The value reached deploy's argv: what the action itself printed.
    expect((await store.getTask(run.runId, "deploy"))!.output).toBe("deploying OPS-7\n");

    // The message is edited to say who decided and when.
    const edit = await alice.waitFor(
      (e) =>
        e.content["m.relates_to"]?.rel_type === "m.replace" &&
        e.content["m.relates_to"]?.event_id === gateMessage.event_id &&
        String(e.content["m.new_content"]?.body).startsWith("✅"),
      T,
      "the gate message's edit once approved",
    );
    expect(String(edit.content["m.new_content"]?.body)).toMatch(
      /^✅ `release\/ok` approved by @gate-carol:localhost, @gate-erin:localhost, the last at \d\d:\d\d UTC · `ticket=OPS-7`\.$/,
    );
    // One announcement per decision: no bot message replies to carol's ✅ (erin typed a command,
    // and her command has its one answer where she typed it).
    expect(alice.events(roomId).filter((e) => e.content["org.dagbot.txn"] === `reply.${carolsOk}`)).toEqual(
      [],
    );
    // What a client shows: the gate message with its latest edit bundled by the homeserver.
    const shown = (await alice.request(
      "GET",
      `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/event/${encodeURIComponent(gateMessage.event_id)}`,
    )) as MatrixEvent;
    const bundled = shown.unsigned?.["m.relations"]?.["m.replace"] as MatrixEvent | undefined;
    expect(String(bundled?.content["m.new_content"]?.body)).toMatch(/^✅ `release\/ok` approved by/);
    // Dave was told once only.
    const refusals = alice
      .events(roomId)
      .filter((e) => bodyOf(e).includes("only the room's operators may decide on this gate"));
    expect(refusals).toHaveLength(1);
    const events = (await store.readEvents(roomId, 0)).filter((e) => e.kind.startsWith("gate."));
    expect(events.map((e) => e.kind)).toEqual([
      "gate.opened",
      "gate.approval",
      "gate.approval",
      "gate.approved",
    ]);
  }, 180_000);
});
