/**
 * What a failed run leaves in the room, read back from a real Synapse as a client reads it: the
 * thread summary under the publish (the homeserver's bundled `m.thread` summary) starts with the
 * outcome — the failed task, why, the last line it printed, what it skipped — and reaches the
 * publisher through `m.mentions`, not by opening with their name; the card, read with its bundled
 * latest edit, carries the same last line and names every task.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/ports/store.js";
import { TEST_ACTIONS } from "../support/bot-fleet.js";
import { bodyOf, cardOf, publishJson, replyTo, txnOf } from "../support/bot-chat.js";
import type { MatrixUser, MatrixEvent } from "../support/matrix-user.js";
import { useRoomWithPeople } from "../support/room-with-people.js";
import { waitFor } from "../support/store-wait.js";

const room = useRoomWithPeople({
  // alice is an operator on auto_confirm: her publish starts at once.
  people: { alice: { localpart: "outcome-alice", power: 100 } },
  bots: { prefix: "outcomebot" },
  roomName: "outcome first",
  fleet: (ids) => ({
    config: {
      permissions: { power_level: 50, auto_confirm: [ids.alice] },
      actions: {
        ...TEST_ACTIONS,
        // Prints its progress, then why it fails, in colour, on stderr, and exits 1.
        migrate: {
          argv: [
            "sh",
            "-c",
            // Both lines on stderr: the order of two pipes' chunks is not the order of the writes.
            "printf 'applying 0042_orders.sql\\n\\033[31mERROR: relation \"orders\" does not exist\\033[0m\\n' >&2; exit 1",
          ],
          timeout: "1m",
          kill_grace: "300ms",
        },
      },
    },
    matrix: { encryption: false },
  }),
});
let store: Store;
let roomId: string;
let alice: MatrixUser;
const T = 30_000;

beforeAll(() => {
  ({
    roomId,
    store,
    people: { alice },
  } = room);
});

/** An event as a client fetches it: with the homeserver's bundled relations (edit, thread summary). */
async function asShown(eventId: string): Promise<MatrixEvent> {
  return (await alice.request(
    "GET",
    `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/event/${encodeURIComponent(eventId)}`,
  )) as MatrixEvent;
}

describe("a failed run, as the room shows it", () => {
  it("the thread summary starts with the outcome and the failure's last line; the card carries it too", async () => {
    const dag = {
      id: "deploy_web",
      tasks: [
        { id: "fetch", action: "true" },
        { id: "migrate", action: "migrate", needs: ["fetch"] },
        { id: "deploy", action: "true", needs: ["migrate"] },
        { id: "smoke_test", action: "true", needs: ["deploy"] },
      ],
    };
    const publishId = await alice.sendText(roomId, publishJson(dag));
    await alice.waitFor(replyTo(publishId), T, "the publish's answer");
    const card = await alice.waitFor(cardOf("deploy_web"), T, "the card");
    await waitFor(
      "deploy_web to fail",
      () => store.getRun(roomId, "deploy_web"),
      (r) => r?.status === "failed",
      { timeoutMs: T, intervalMs: 100 },
    );
    const run = (await store.getRun(roomId, "deploy_web"))!;
    const final = await alice.waitFor((e) => txnOf(e) === `final.${run.runId}`, T, "the final message");

    // The thread summary a client shows under the publish: the final message, outcome first.
    const summary = (await asShown(publishId)).unsigned?.["m.relations"]?.["m.thread"];
    const latest = summary?.latest_event as MatrixEvent | undefined;
    expect(latest?.event_id).toBe(final.event_id);
    expect(bodyOf(latest!)).toMatch(
      /^❌ `deploy_web` failed — `migrate`: exit 1, ERROR: relation "orders" does not exist · `deploy`, `smoke_test` skipped · 1\/4 succeeded/,
    );
    // The publisher is reached through m.mentions; their name comes last, not first.
    expect(latest!.content["m.mentions"]).toEqual({ user_ids: [alice.userId] });
    expect(bodyOf(latest!)).toMatch(new RegExp(`cc ${alice.userId.replace(/[.]/g, "\\.")}$`));
    expect(latest!.content["msgtype"]).toBe("m.text");

    // The card, with the latest edit the homeserver bundles: the failed task's line carries its last
    // printed line, and the ended card names every task.
    const shownCard = await asShown(card.event_id);
    const edit = shownCard.unsigned?.["m.relations"]?.["m.replace"] as MatrixEvent | undefined;
    const cardBody = String(edit?.content["m.new_content"]?.body);
    expect(cardBody).toMatch(/^❌ `deploy_web` — failed/);
    expect(cardBody).toMatch(/^❌ `migrate` — failed · .*exit 1 · ERROR: relation "orders" does not exist$/m);
    expect(cardBody).toContain("⏭️ 2 skipped: `deploy`, `smoke_test`");
    expect(cardBody).not.toMatch(/and \d+ more/);
    // Nothing of the escape codes reached the room.
    expect(bodyOf(final)).not.toContain("\u001b");
  });
});
