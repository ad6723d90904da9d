/**
 * What the room shows stays true across a leader kill (docs/chat.md; docs/architecture.md §12:
 * one bot account with a device per node, so any node may edit what another sent). A real Synapse
 * and two `dagbot start` processes, devices of one account: alice publishes a release whose gate
 * opens; while the gate is open the leader, which sent the card and the gate's message, is killed
 * with SIGKILL; bob approves with ✅ on the gate's message, which the new leader handles; the run
 * finishes. Then the room is read back as a client reads it — /messages with the homeserver's bundled
 * edits and thread summaries — and every card, gate message and thread summary says the end.
 * With DAGBOT_ROOM_TRANSCRIPT=<file> it writes the room as text before the kill, after it (before the
 * approval) and at the end.
 */
import { writeFileSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import { TEST_ACTIONS, type BotFleet } from "../support/bot-fleet.js";
import { bodyOf, cardOf, publishJson, replyTo, txnOf } from "../support/bot-chat.js";
import type { MatrixUser, MatrixEvent } from "../support/matrix-user.js";
import { loginDevice, messagesAsShown, roomText, type ShownMessage } from "../support/room-as-shown.js";
import { useRoomWithPeople } from "../support/room-with-people.js";
import { waitFor } from "../support/store-wait.js";

const room = useRoomWithPeople({
  people: {
    alice: { localpart: "alice", power: 100 }, // publisher, on auto_confirm: her publish starts at once
    bob: { localpart: "bob", power: 50 }, // operator: the one person who may approve the gate
  },
  // One bot account with a device per node.
  bots: async (hs) => {
    const account = await hs.registerUser("dagbot", { deviceId: "DAGBOT1" });
    return [account, await loginDevice(hs.url, account, "DAGBOT2")];
  },
  // The bot account holds operator power too: it is still never named as an approver.
  botPower: 50,
  roomName: "release room",
  fleet: (ids) => ({
    config: {
      permissions: { power_level: 50, auto_confirm: [ids.alice] },
      actions: {
        ...TEST_ACTIONS,
        // Takes a moment, then publishes version=<v>: what the gate's message says is approved.
        stamp: {
          argv: ["sh", "-c", 'sleep 1; echo "version=$0" >> "$DAGBOT_OUTPUT"', "{v}"],
          args: { v: { pattern: "[0-9.]{1,20}" } },
          timeout: "1m",
          kill_grace: "300ms",
        },
      },
    },
    matrix: { encryption: false },
  }),
  tailLines: 25,
});
let fleet: BotFleet;
let store: Store;
let roomId: string;
let botUserId: string;
let alice: MatrixUser;
let bob: MatrixUser;
/** bot-sdk backs off 5–15 s after a failed sync; a new leader's catch-up can take that long. */
const T = 60_000;

const DAG = {
  id: "release",
  tasks: [
    { id: "build", action: "stamp", args: { v: "2.7.0" }, outputs: { version: "[0-9.]+" } },
    {
      id: "ok",
      needs: ["build"],
      approve: { who: "operators", description: "roll out to production", timeout: "4h" },
    },
    {
      id: "deploy",
      action: "echo",
      args: { message: "deploying {tasks.build.outputs.version}" },
      needs: ["ok"],
    },
    { id: "smoke_test", action: "true", needs: ["deploy"] },
  ],
};

beforeAll(() => {
  ({
    roomId,
    store,
    fleet,
    people: { alice, bob },
  } = room);
  botUserId = room.bots[0]!.userId;
});

async function leaderIndex(): Promise<number> {
  const lease = await waitFor(
    "a leader",
    () => store.getLease(roomId),
    (l) => l !== null && l.holder !== null && l.expiresAt > l.now,
    { timeoutMs: T, intervalMs: 50 },
  );
  return fleet.nodes.findIndex((n) => n.nodeId === lease!.holder!.nodeId);
}

const isBot = (m: ShownMessage) => m.event.sender === botUserId;

describe("the room across a leader kill during a live run with an open gate", () => {
  it("reads true at the end: the card, the gate's message and the thread summary, from the homeserver's bundled relations", async () => {
    const publishId = await alice.sendText(roomId, publishJson(DAG));
    await alice.waitFor(replyTo(publishId), T, "the publish's acknowledgement");
    const card = await alice.waitFor(cardOf("release"), T, "the card");
    const gateMessage = await alice.waitFor(
      (e) => bodyOf(e).startsWith("🚦") && bodyOf(e).includes("approve `release/ok`"),
      T,
      "the gate's message",
    );
    const run = (await store.getRun(roomId, "release"))!;
    // The card says the gate is open before the kill: the edit the new leader must replace.
    await alice.waitFor(
      (e) =>
        e.content["m.relates_to"]?.event_id === card.event_id &&
        String(e.content["m.new_content"]?.body ?? "").includes("awaits approval"),
      T,
      "the card naming the open gate",
    );
    const before = await messagesAsShown(alice, roomId);
    const beforeText = roomText(before);
    expect(beforeText).toMatch(/🔄|running|awaits approval/);

    const victim = await leaderIndex();
    // The card and the gate's message went out before the kill: whatever edits them later is another node.
    const killedAt = Date.now();
    await fleet.kill(victim);
    const successor = await waitFor(
      "a new leader",
      () => leaderIndex(),
      (i) => i !== victim,
      { timeoutMs: T },
    );
    expect(fleet.running(successor)).toBe(true);
    expect((await store.getTask(run.runId, "ok"))!.gateState!.decision).toBeNull();
    const between = roomText(await messagesAsShown(alice, roomId));

    // bob approves on the message the killed leader sent; the new leader counts it and edits it.
    await bob.sendReaction(roomId, gateMessage.event_id, "✅");
    const ended = await waitFor(
      "release to end",
      () => store.getRun(roomId, "release"),
      (r) => r?.status === "succeeded" || r?.status === "failed",
      { timeoutMs: T, intervalMs: 100 },
    );
    expect(ended!.status).toBe("succeeded");
    expect((await store.getTask(run.runId, "ok"))!.gateState!.approvals.map((a) => a.by)).toEqual([
      bob.userId,
    ]);
    const final = await alice.waitFor((e) => txnOf(e) === `final.${run.runId}`, T, "the final message");

    // What a client shows once the last edits are in: read until the card's bundled edit says the end.
    let shown: ShownMessage[] = [];
    await waitFor(
      "the card's bundled edit to say succeeded",
      async () => (shown = await messagesAsShown(alice, roomId)),
      (ms) =>
        /^✅ `release` — succeeded/.test(ms.find((m) => m.event.event_id === card.event_id)?.body ?? ""),
      { timeoutMs: T, intervalMs: 500 },
    );
    const file = process.env["DAGBOT_ROOM_TRANSCRIPT"];
    if (file)
      writeFileSync(
        file,
        `Before the kill of node${victim + 1} (the leader):\n\n${beforeText}\n` +
          `After the kill, node${successor + 1} leading, before the approval:\n\n${between}\n` +
          `At the end (node${successor + 1} leads):\n\n${roomText(shown)}`,
      );
    const byId = (id: string) => shown.find((m) => m.event.event_id === id)!;

    // The card: the homeserver bundles the new leader's edit (same account), which says the end.
    const shownCard = byId(card.event_id);
    expect(shownCard.edit).not.toBeNull();
    expect(shownCard.edit!.sender).toBe(botUserId);
    expect(shownCard.edit!.origin_server_ts).toBeGreaterThan(killedAt);
    expect(shownCard.body).toMatch(/^✅ `release` — succeeded/);
    expect(shownCard.body).toContain("4/4");
    expect(shownCard.body).not.toMatch(/🔄|running|awaits approval|waiting/);

    // The gate's message: the decision, edited in by the new leader, not the call to act.
    const shownGate = byId(gateMessage.event_id);
    expect(shownGate.edit).not.toBeNull();
    expect(shownGate.edit!.origin_server_ts).toBeGreaterThan(killedAt);
    expect(shownGate.body).toMatch(/^✅ `release\/ok` approved by @bob:localhost at \d\d:\d\d UTC\.$/);
    // Before it, it named bob alone, never the bot account holding operator power.
    expect(gateMessage.content["m.mentions"]).toEqual({ user_ids: [bob.userId] });

    // The thread summary under the publish: the final message, outcome first, to alice by m.mentions.
    const root = byId(publishId);
    expect(root.thread).toBeNull();
    const inThread = shown.filter((m) => m.thread === publishId);
    expect(root.summary).not.toBeNull();
    expect(root.summary!.count).toBe(inThread.length);
    expect(root.summary!.latest.event_id).toBe(final.event_id);
    expect(inThread.at(-1)!.event.event_id).toBe(final.event_id);
    const latest = root.summary!.latest;
    expect(bodyOf(latest)).toMatch(/^✅ `release` succeeded in \S+ — 4\/4 succeeded/);
    expect(latest.content["m.mentions"]).toEqual({ user_ids: [alice.userId] });
    // The final message is the last word: nobody edits it, and bob's ✅ got no second announcement.
    expect(byId(final.event_id).edit).toBeNull();
    expect(
      shown.filter(
        (m) =>
          isBot(m) &&
          m.event.content["m.relates_to"]?.["m.in_reply_to"]?.event_id === gateMessage.event_id &&
          m.thread === null,
      ),
    ).toEqual([]);

    // No bot message, read as shown, says something that is no longer true.
    for (const m of shown.filter(isBot))
      expect([txnOf(m.event), m.body]).not.toEqual([
        txnOf(m.event),
        expect.stringMatching(/🔄|🚦|running|awaits approval|Approval needed|React ✅ to approve/),
      ]);
    // Each of the run's messages exactly once, whichever node sent it.
    const txns = shown.filter(isBot).map((m) => txnOf(m.event as MatrixEvent));
    for (const txn of [`card.${run.runId}`, `final.${run.runId}`, `gate.${run.runId}.ok`])
      expect(txns.filter((t) => t === txn)).toHaveLength(1);
  }, 180_000);
});
