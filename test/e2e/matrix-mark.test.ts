/**
 * `!dag mark` in chat, against a real Synapse and one `dagbot start`: a member without the
 * operators' power level is refused; the operator marks an open gate succeeded with a reason, what
 * needs it runs, the run ends succeeded, and the run's card shows the mark (who, from chat, why).
 * (The CLI and HTTP faces: mark-faces.test.ts.)
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { Store } from "../../src/ports/store.js";
import { BotFleet, TEST_ACTIONS } from "../support/bot-fleet.js";
import { bodyOf, publishJson, replyTo } from "../support/bot-chat.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser } from "../support/matrix-user.js";
import { waitFor } from "../support/store-wait.js";

const fx = useSynapse();
let fleet: BotFleet;
let store: Store;
let roomId: string;
let alice: MatrixUser; // operator, power 100
let dave: MatrixUser; // member, power 10
const T = 30_000;

beforeAll(async () => {
  const { hs } = fx;
  const bot = await hs.registerUser("markbot1", { deviceId: "MARKBOT1" });
  const a = await hs.registerUser("mark-alice");
  const d = await hs.registerUser("mark-dave");
  [alice, dave] = [new MatrixUser(hs.url, a), new MatrixUser(hs.url, d)];
  roomId = await hs.createRoom(a.accessToken, {
    name: "marks",
    invite: [bot.userId, d.userId],
    powerLevels: { users: { [a.userId]: 100, [d.userId]: 10, [bot.userId]: 50 } },
  });
  await dave.joinRoom(roomId);
  fleet = new BotFleet({
    hs,
    bots: [bot],
    rooms: [roomId],
    config: { permissions: { power_level: 50, auto_confirm: [a.userId] }, actions: TEST_ACTIONS },
    matrix: { encryption: false },
  });
  await fleet.startAll();
  store = await openSqliteStore(fleet.storePath);
  alice.startSync();
}, 120_000);

afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") {
    fleet?.keepDir();
    console.error(fleet?.tails());
  }
});

afterAll(async () => {
  await alice?.stopSync();
  await store?.close();
  await fleet?.dispose();
});

async function say(user: MatrixUser, text: string, what: string): Promise<string> {
  const sent = await user.sendText(roomId, text);
  return bodyOf(await alice.waitFor(replyTo(sent), T, what));
}

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
