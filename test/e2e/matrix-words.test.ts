/**
 * The words inside the room's lines, read from a real Synapse's history: a failed run's
 * final message names the failed task with its exit status and the dependents it kept from running,
 * then points to the logs; its card lines say no "attempt 1/1" and no duration under a second. A
 * typo is answered with the command as meant, to copy, and no line of every verb; help is short.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { Store } from "../../src/ports/store.js";
import { BotFleet, fleetHooks } from "../support/bot-fleet.js";
import {
  bodyOf,
  cardEditSaying,
  cardOf,
  publishJson,
  replyTo,
  roomHistory,
  txnOf,
} from "../support/bot-chat.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser } from "../support/matrix-user.js";

const fx = useSynapse();
let fleet: BotFleet;
let store: Store;
let roomId: string;
let alice: MatrixUser;

const T = 30_000;

beforeAll(async () => {
  const { hs } = fx;
  const bot = await hs.registerUser("wordsbot1", { deviceId: "WORDSBOT1" });
  const a = await hs.registerUser("alice");
  alice = new MatrixUser(hs.url, a);
  roomId = await hs.createRoom(a.accessToken, {
    name: "dagbot words e2e",
    invite: [bot.userId],
    powerLevels: { users: { [a.userId]: 100 } },
  });
  fleet = new BotFleet({
    hs,
    bots: [bot],
    rooms: [roomId],
    config: { permissions: { power_level: 50, auto_confirm: [a.userId] } },
  });
  await fleet.startAll();
  store = await openSqliteStore(fleet.storePath);
  alice.startSync();
}, 120_000);

fleetHooks(() => ({ fleet, person: alice, store }));

describe("failures in words", () => {
  it("a failed run's final message names the failed task with its exit status and its skipped dependents", async () => {
    const dag = {
      id: "deploy_prod",
      tasks: [
        { id: "fetch", action: "true" },
        { id: "migrate", action: "fail", needs: ["fetch"] },
        { id: "rollout", action: "true", needs: ["migrate"] },
        { id: "smoke_test", action: "true", needs: ["rollout"] },
      ],
    };
    const published = await alice.sendText(roomId, publishJson(dag));
    await alice.waitFor(replyTo(published), T, "the publish's answer");
    const card = await alice.waitFor(cardOf("deploy_prod"), T, "the status card");
    await alice.waitFor(cardEditSaying(card.event_id, /— failed/), T, "the card edited to failed");
    const run = (await store.getRun(roomId, "deploy_prod"))!;
    expect(run.status).toBe("failed");
    await alice.waitFor((e) => txnOf(e) === `final.${run.runId}`, T, "the final message");

    // From the server's own history, not from what a sync delivered.
    const history = await roomHistory(alice, roomId);
    const finals = history.filter((e) => txnOf(e) === `final.${run.runId}`);
    expect(finals).toHaveLength(1);
    const final = bodyOf(finals[0]!);
    // Outcome first: the run, the failed task and why, what it skipped; then the counts.
    expect(final).toMatch(
      /^❌ `deploy_prod` failed — `migrate`: exit 1 · `rollout`, `smoke_test` skipped · /,
    );
    expect(final).toContain("1/4 succeeded");
    // Then where to look: the failed task's logs, named after its failure.
    expect(final.indexOf("`migrate`: exit 1")).toBeLessThan(
      final.indexOf("See `!dag logs deploy_prod migrate`"),
    );
    expect(String(finals[0]!.content["formatted_body"])).toContain(
      "<code>migrate</code>: exit 1 · <code>rollout</code>, <code>smoke_test</code> skipped",
    );

    // The card's last state: the tasks have no retries, so no "attempt 1/1"; these tasks end
    // within a second, so no "ms" duration.
    const edits = history.filter(
      (e) =>
        e.content["m.relates_to"]?.rel_type === "m.replace" &&
        e.content["m.relates_to"]?.event_id === card.event_id,
    );
    const last = String(edits.at(-1)?.content["m.new_content"]?.body ?? "");
    expect(last).toMatch(/❌ `migrate` — failed · on `[^`]+` · exit 1/);
    for (const body of [bodyOf(card), ...edits.map((e) => String(e.content["m.new_content"]?.body ?? ""))]) {
      expect(body).not.toMatch(/attempt 1\/1/);
      expect(body).not.toMatch(/\d+ms\b/);
    }
  });
});

describe("help and mistakes", () => {
  it("a mistyped verb is answered once, in the room, with the whole command as meant to copy", async () => {
    const typo = await alice.sendText(roomId, "!dag confrim deploy_prod 4847e234");
    const answer = await alice.waitFor(replyTo(typo), T, "the answer to the typo");
    expect(bodyOf(answer)).toBe(
      '⚠️ unknown command "confrim"\nDid you mean `!dag confirm deploy_prod 4847e234`?',
    );
    expect(String(answer.content["formatted_body"])).toContain(
      "<code>!dag confirm deploy_prod 4847e234</code>",
    );
    // Not the list of every verb.
    expect(bodyOf(answer)).not.toMatch(/publish|schedules|policy/);
    const help = await alice.sendText(roomId, "!dag help");
    const helpAnswer = await alice.waitFor(replyTo(help), T, "the answer to help");
    const lines = bodyOf(helpAnswer).split("\n");
    expect(lines.length).toBeLessThanOrEqual(6);
    // A title first (what previews and reply quotes show), then the commands, then the key.
    expect(lines[0]).toBe("dagbot commands");
    expect(bodyOf(helpAnswer)).toMatch(/🔒 needs an operator .*you are one/);
    expect(bodyOf(helpAnswer)).toMatch(/`cancel` 🔒/);
    const history = await roomHistory(alice, roomId);
    expect(history.filter((e) => txnOf(e) === `reply.${typo}`)).toHaveLength(1);
  });
});
