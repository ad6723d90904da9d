/**
 * A DAG that runs after another DAG's runs, against a real Synapse and two `dagbot
 * start` processes: alice publishes `build` and `deploy` (after build succeeded) and confirms them;
 * a run of build started in chat starts deploy.2 at once, on alice's authority, and `!dag triggers`
 * says so. Then alice lowers her own power level: the next run of build (bob's) starts no deploy,
 * and the skipped firing says that alice may no longer run it — the schedule's rule — once, in
 * build.3's thread. deploy.2, which no message published, has its card as its own thread's root in
 * the main timeline and its final message in that thread.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { Store } from "../../src/ports/store.js";
import { BotFleet, fleetHooks } from "../support/bot-fleet.js";
import { bodyOf, publishJson, replyTo, roomHistory, txnOf } from "../support/bot-chat.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser, type MatrixEvent } from "../support/matrix-user.js";
import { waitFor } from "../support/store-wait.js";

const fx = useSynapse();
let fleet: BotFleet;
let store: Store;
let roomId: string;
let alice: MatrixUser; // publisher, power 100, then 0
let bob: MatrixUser; // operator, power 50
const T = 30_000;

beforeAll(async () => {
  const { hs } = fx;
  const bots = [];
  for (const n of [1, 2]) bots.push(await hs.registerUser(`afterbot${n}`, { deviceId: `AFTERBOT${n}` }));
  const [a, b] = [await hs.registerUser("after-alice"), await hs.registerUser("after-bob")];
  alice = new MatrixUser(hs.url, a);
  bob = new MatrixUser(hs.url, b);
  roomId = await hs.createRoom(a.accessToken, {
    name: "after another DAG",
    invite: [...bots.map((x) => x.userId), b.userId],
    powerLevels: { users: { [a.userId]: 100, [b.userId]: 50 } },
  });
  await bob.joinRoom(roomId);
  fleet = new BotFleet({
    hs,
    bots,
    rooms: [roomId],
    config: { permissions: { power_level: 50 } },
    matrix: { encryption: false },
  });
  await fleet.startAll();
  store = await openSqliteStore(fleet.storePath);
  alice.startSync();
}, 120_000);

fleetHooks(() => ({ fleet, person: alice, store }));

const ended = (s: string | undefined): boolean => s === "succeeded" || s === "failed";

async function say(user: MatrixUser, text: string, what: string): Promise<string> {
  const sent = await user.sendText(roomId, text);
  return bodyOf(await alice.waitFor(replyTo(sent), T, what));
}

async function runEnds(id: string): Promise<string> {
  const run = await waitFor(
    `${id} to end`,
    () => store.getRun(roomId, id),
    (r) => ended(r?.status),
    {
      timeoutMs: T,
      intervalMs: 100,
    },
  );
  return run!.status;
}

describe("a DAG after another, in chat", () => {
  it("fires on its owner's authority, is listed by !dag triggers, and is skipped once its owner may no longer run it", async () => {
    await say(alice, publishJson({ id: "build", tasks: [{ id: "t", action: "true" }] }), "publish build");
    await say(alice, "!dag confirm build", "confirm build");
    expect(await runEnds("build")).toBe("succeeded");
    const deployDag = {
      id: "deploy",
      after: { dag: "build", status: "succeeded" },
      tasks: [{ id: "t", action: "true" }],
    };
    await say(alice, publishJson(deployDag), "publish deploy");
    await say(alice, "!dag confirm deploy", "confirm deploy");
    expect(await runEnds("deploy")).toBe("succeeded");

    await say(alice, "!dag run build", "run build");
    await say(alice, "!dag confirm build.2", "confirm build.2");
    expect(await runEnds("build.2")).toBe("succeeded");
    expect(await runEnds("deploy.2")).toBe("succeeded");
    const deploy2 = (await store.getRun(roomId, "deploy.2"))!;
    expect(deploy2.dag.trigger).toMatchObject({ run: "build.2", status: "succeeded" });
    // Started at once: the definition was approved and its owner may run it, as for a schedule's slot.
    expect(deploy2.confirmedBy).toBeNull();

    const listed = await say(bob, "!dag triggers", "the triggers reply");
    expect(listed).toContain("`deploy` — after build succeeded");
    expect(listed).toContain("last: deploy.2 after build.2 succeeded");
    expect(listed).toContain(`owner ${alice.userId}`);

    // Alice lowers her own power level: deploy runs on her authority, which she no longer has.
    await alice.setPowerLevel(roomId, alice.userId, 0);
    await say(bob, "!dag run build", "bob runs build");
    await say(bob, "!dag confirm build.3", "bob confirms build.3");
    expect(await runEnds("build.3")).toBe("succeeded");
    const skipped = await waitFor(
      "deploy's firing after build.3",
      async () =>
        (await store.listAfterFirings(roomId, { dagId: "deploy" })).find(
          (f) => f.upstreamDagId === "build.3",
        ),
      (f) => f !== undefined,
      { timeoutMs: T, intervalMs: 100 },
    );
    expect(skipped!.runId).toBeNull();
    expect(skipped!.reason).toContain(`${alice.userId} (its publisher) may no longer run it`);
    expect(await store.getRun(roomId, "deploy.3")).toBeNull();
    const again = await say(bob, "!dag triggers", "the second triggers reply");
    expect(again).toContain("last: skipped after build.3 succeeded");

    // The skip is said once, in build.3's thread, outcome first.
    const build3 = (await store.getRun(roomId, "build.3"))!;
    const skipTxn = `after.skipped.deploy.${build3.runId}`;
    await alice.waitFor((e) => txnOf(e) === skipTxn, T, "the skip's notice");
    await alice.waitFor((e) => txnOf(e) === `final.${deploy2.runId}`, T, "deploy.2's final message");
    const history = await roomHistory(alice, roomId);
    const said = history.filter((e) => txnOf(e) === skipTxn);
    expect(said).toHaveLength(1);
    expect(said[0]!.content["m.relates_to"]?.rel_type).toBe("m.thread");
    expect(said[0]!.content["m.relates_to"]?.event_id).toBe(build3.publishEventId);
    expect(bodyOf(said[0]!)).toMatch(
      /^✅ `build\.3` succeeded · ⏭️ `deploy` \(after `build`\) did not start: .* may no longer run it/,
    );

    // deploy.2 has no publish message: its card is its own thread's root in the main timeline, and
    // every other message of the run is in that thread.
    const ofDeploy2 = history.filter((e) => (txnOf(e) ?? "").includes(deploy2.runId));
    const card = ofDeploy2.find((e) => txnOf(e) === `card.${deploy2.runId}`)!;
    expect(card.content["m.relates_to"]).toBeUndefined();
    const rest = ofDeploy2.filter((e) => e !== card && e.content["m.relates_to"]?.rel_type !== "m.replace");
    expect(rest.map((e) => txnOf(e))).toEqual([`final.${deploy2.runId}`]);
    for (const e of rest) {
      expect(e.content["m.relates_to"]?.rel_type).toBe("m.thread");
      expect(e.content["m.relates_to"]?.event_id).toBe(card.event_id);
    }
    // What a client shows under the card: the homeserver's thread summary, ending with the outcome.
    const root = (await alice.request(
      "GET",
      `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/event/${encodeURIComponent(card.event_id)}`,
    )) as MatrixEvent;
    const latest = root.unsigned?.["m.relations"]?.["m.thread"]?.latest_event as MatrixEvent | undefined;
    expect(bodyOf(latest!)).toMatch(/^✅ `deploy\.2` succeeded/);
  }, 180_000);
});
