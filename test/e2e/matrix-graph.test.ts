/**
 * What a room shows of its runs, against a real Synapse. `!dag graph`: the picture is a notice showing its upload inline (it notifies nobody) in the run's thread whose media
 * downloads from the homeserver and decodes as a PNG of the stated size, with the run's states in
 * it; a picture larger than the homeserver accepts (max_upload_size 80 KiB here) is answered with a
 * notice naming the 413, and the run's card keeps moving meanwhile; typed in the main timeline, the
 * command is answered there with a line pointing to the thread. A calm room: a run of 20 tasks that
 * needed confirmation puts two bot events in the main timeline (the answers to the publish and the
 * confirm typed there); the card and the final message are in its thread. Picture budgets: a member over the
 * rate limit is refused once, saying when to ask again, and answered by a ⏳ reaction after that; the room's
 * policy `graph operators` keeps pictures to operators.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { STATE_STYLE } from "../../src/adapters/graph/dot.js";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { Store } from "../../src/ports/store.js";
import { BotFleet, fleetHooks } from "../support/bot-fleet.js";
import {
  bodyOf,
  cardEditSaying,
  cardOf,
  pictureFor,
  publishJson,
  replyTo,
  roomHistory,
  txnOf,
} from "../support/bot-chat.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser, type MatrixEvent } from "../support/matrix-user.js";
import { countColour, decodePng } from "../support/png.js";
import { waitFor } from "../support/store-wait.js";

const fx = useSynapse({ extraConfig: { max_upload_size: "80K" } });
let fleet: BotFleet;
let store: Store;
let roomId: string;
let alice: MatrixUser;
let bob: MatrixUser;
let carol: MatrixUser;
let botUserId: string;

const T = 30_000;

beforeAll(async () => {
  const { hs } = fx;
  const bot = await hs.registerUser("graphbot1", { deviceId: "GRAPHBOT1" });
  const a = await hs.registerUser("alice");
  const b = await hs.registerUser("bob");
  const c = await hs.registerUser("carol");
  alice = new MatrixUser(hs.url, a);
  bob = new MatrixUser(hs.url, b);
  carol = new MatrixUser(hs.url, c);
  botUserId = bot.userId;
  roomId = await hs.createRoom(a.accessToken, {
    name: "dagbot graph e2e",
    invite: [bot.userId, b.userId, c.userId],
    powerLevels: { users: { [a.userId]: 100, [b.userId]: 50 } },
  });
  await bob.joinRoom(roomId);
  await carol.joinRoom(roomId);
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

async function runEnded(dagId: string): Promise<void> {
  await waitFor(
    `${dagId} to end`,
    () => store.getRun(roomId, dagId),
    (r) => r !== null && (r.status === "succeeded" || r.status === "failed"),
    { timeoutMs: T, intervalMs: 100 },
  );
}

describe("!dag graph", () => {
  it("posts the run's picture in its thread without notifying anyone; the media downloads and decodes as that PNG", async () => {
    const dag = {
      id: "pic_small",
      tasks: [
        { id: "first", action: "echo", args: { message: "hi" } },
        { id: "second", action: "fail", needs: ["first"] },
        { id: "third", action: "true", needs: ["second"] },
      ],
    };
    const publishId = await alice.sendText(roomId, publishJson(dag));
    await runEnded("pic_small");

    const card = await alice.waitFor(cardOf("pic_small"), T, "the card");
    const commandId = await alice.sendText(roomId, "!dag graph pic_small");
    // Typed in the main timeline: answered there, pointing to the picture in the run's thread.
    const answer = await alice.waitFor(replyTo(commandId), T, "the answer");
    expect(bodyOf(answer)).toBe("🖼️ The picture of `pic_small` goes into its thread.");
    expect(answer.content["m.relates_to"]).toEqual({ "m.in_reply_to": { event_id: commandId } });
    const image = await alice.waitFor(pictureFor(commandId), T, "the picture");
    // A notice showing the upload inline, so it notifies nobody (push rules silence notices); the
    // m.image keys stay on it.
    expect(image.content["msgtype"]).toBe("m.notice");
    expect(image.content["m.mentions"]).toEqual({});
    expect(String(image.content["formatted_body"])).toContain(`<img src="${String(image.content["url"])}"`);
    // Clients without threads show it as a reply to the card, not to the publish (the whole DAG).
    expect(image.content["m.relates_to"]).toEqual({
      rel_type: "m.thread",
      event_id: publishId,
      is_falling_back: true,
      "m.in_reply_to": { event_id: card.event_id },
    });
    // Asked after the run ended, it is its thread's last event: its text says how the run ended,
    // outcome first, as the final message does, and so does the thread summary under the publish.
    expect(bodyOf(image)).toMatch(
      /^❌ `pic_small` failed — `second`: exit 1 · `third` skipped · 1\/3 succeeded/,
    );
    const root = (await alice.request(
      "GET",
      `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/event/${encodeURIComponent(publishId)}`,
    )) as MatrixEvent;
    const latest = root.unsigned?.["m.relations"]?.["m.thread"]?.latest_event as MatrixEvent | undefined;
    expect(latest?.event_id).toBe(image.event_id);
    expect(bodyOf(latest!)).toMatch(/^❌ `pic_small` failed — /);
    expect(image.content["filename"]).toMatch(/^pic_small-[0-9a-f]{8}\.png$/);
    const info = image.content["info"] as { w: number; h: number; size: number; mimetype: string };
    expect(info.mimetype).toBe("image/png");

    const url = String(image.content["url"]);
    const m = /^mxc:\/\/([^/]+)\/(.+)$/.exec(url);
    expect(m, url).not.toBeNull();
    const res = await fetch(`${fx.hs.url}/_matrix/client/v1/media/download/${m![1]}/${m![2]}`, {
      headers: { authorization: `Bearer ${alice.accessToken}` },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/png");
    const bytes = new Uint8Array(await res.arrayBuffer());
    expect(bytes.byteLength).toBe(info.size);
    const png = decodePng(bytes);
    expect([png.width, png.height]).toEqual([info.w, info.h]);
    // Shaped for a timeline's thumbnail (about 400 px wide), as the room's own event says: from square
    // to about 16:9, never a strip (a row of three boxes used to be 1059 × 427, 2.5:1).
    expect(info.w / info.h).toBeGreaterThanOrEqual(1);
    expect(info.w / info.h).toBeLessThanOrEqual(2);
    // The failed task's red and the succeeded task's green are in the picture.
    expect(countColour(png, STATE_STYLE.failed.fill)).toBeGreaterThan(500);
    expect(countColour(png, STATE_STYLE.succeeded.fill)).toBeGreaterThan(500);
  });

  it("answers a picture larger than the homeserver takes (413) with a notice, and the card keeps moving", async () => {
    // 10 lanes of 3: no fan-out or chain to fold, so a tall picture (~150 KB) above the 80 KiB limit.
    const tasks = [];
    for (let lane = 0; lane < 10; lane++)
      for (let step = 0; step < 3; step++)
        tasks.push({
          id: `lane${lane}_step${step}`,
          action: step === 1 ? "sleep" : "true",
          ...(step === 1 ? { args: { seconds: 1 } } : {}),
          ...(step > 0 ? { needs: [`lane${lane}_step${step - 1}`] } : {}),
        });
    await alice.sendText(roomId, publishJson({ id: "pic_wide", tasks }));
    const card = await alice.waitFor(cardOf("pic_wide"), T, "the card");
    const commandId = await alice.sendText(roomId, "!dag graph pic_wide");
    const reply = await alice.waitFor(pictureFor(commandId), T, "what went where the picture would be");
    expect(reply.content["msgtype"]).toBe("m.notice");
    expect(bodyOf(reply)).toMatch(
      /No picture of `pic_wide`: the homeserver refused the \d+ KiB picture as too large \(413\)/,
    );
    await alice.waitFor(cardEditSaying(card.event_id, /succeeded/), T, "the card edited to succeeded");
  });

  it("says so when there is no such run", async () => {
    const commandId = await alice.sendText(roomId, "!dag graph pic_nosuch");
    const reply = await alice.waitFor(replyTo(commandId), T, "the answer");
    expect(reply.content["msgtype"]).toBe("m.notice");
    expect(bodyOf(reply)).toContain("pic_nosuch");
  });
});

describe("a calm room", () => {
  it("a confirmed run of 20 tasks puts two bot events in the main timeline, each answering a command typed there; the rest is in its thread, which ends with the final message", async () => {
    // bob is not on auto_confirm: his publish waits for alice's confirmation.
    const tasks = Array.from({ length: 20 }, (_, i) => ({
      id: `t${i}`,
      action: "true",
      ...(i > 0 ? { needs: [`t${Math.floor((i - 1) / 3)}`] } : {}),
    }));
    const publishId = await bob.sendText(roomId, publishJson({ id: "calm20", tasks }));
    const ack = await alice.waitFor(replyTo(publishId), T, "the publish's acknowledgement");
    expect(bodyOf(ack)).toBe("📥 Published `calm20` (20 tasks) for confirmation. Its card is in the thread.");
    const confirmId = await alice.sendText(roomId, "!dag confirm calm20");
    const confirmed = await alice.waitFor(replyTo(confirmId), T, "the confirmation's answer");
    // Answered where it was typed (the main timeline), in words that stay true once the run ends.
    expect(confirmed.content["m.relates_to"]).toEqual({ "m.in_reply_to": { event_id: confirmId } });
    expect(bodyOf(confirmed)).toBe("▶️ @alice:localhost confirmed `calm20`; it started.");
    await runEnded("calm20");
    const run = await store.getRun(roomId, "calm20");
    await alice.waitFor((e) => txnOf(e) === `final.${run!.runId}`, T, "the final message");

    const history = await roomHistory(alice, roomId);
    const from = history.findIndex((e) => e.event_id === publishId);
    // The bot's messages about this run (other tests' runs may still be ending beside it).
    const ours = new Set([`reply.${publishId}`, `reply.${confirmId}`, `final.${run!.runId}`]);
    const bots = history
      .slice(from)
      .filter((e) => e.sender === botUserId && e.type === "m.room.message")
      .filter((e) => ours.has(txnOf(e) ?? "") || (txnOf(e) ?? "").startsWith(`card.${run!.runId}`));
    const relType = (e: MatrixEvent): unknown =>
      (e.content["m.relates_to"] as { rel_type?: string } | undefined)?.rel_type;
    const main = bots.filter((e) => relType(e) !== "m.thread" && relType(e) !== "m.replace");
    expect(main.map((e) => txnOf(e))).toEqual([`reply.${publishId}`, `reply.${confirmId}`]);
    // The card and its final message are in its thread; the final message is its latest event.
    const inThread = bots.filter(
      (e) =>
        relType(e) === "m.thread" &&
        (e.content["m.relates_to"] as { event_id?: string }).event_id === publishId,
    );
    expect(inThread.map((e) => txnOf(e))).toEqual([`card.${run!.runId}`, `final.${run!.runId}`]);
  });
});

describe("picture budgets", () => {
  it("a member over the rate limit is refused once with when to ask again, then answered with ⏳ only; graph operators keeps pictures to operators", async () => {
    const dag = { id: "pic_budget", tasks: [{ id: "only", action: "true" }] };
    await alice.sendText(roomId, publishJson(dag));
    await runEnded("pic_budget");
    // carol has power level 0: an ordinary member.
    for (let i = 0; i < 3; i++) {
      const asked = await carol.sendText(roomId, "!dag graph pic_budget");
      const image = await alice.waitFor(pictureFor(asked), T, `picture ${i + 1}`);
      expect(image.content["msgtype"]).toBe("m.notice");
    }
    const fourth = await carol.sendText(roomId, "!dag graph pic_budget");
    const refusal = await alice.waitFor(replyTo(fourth), T, "the refusal");
    expect(refusal.content["msgtype"]).toBe("m.notice");
    expect(bodyOf(refusal)).toMatch(/you asked for 3 pictures per 60 s already.*try again in \d+ s/);
    const fifth = await carol.sendText(roomId, "!dag graph pic_budget");
    // Commands are handled in order: once a later command is answered, the fifth was handled too.
    const later = await carol.sendText(roomId, "!dag status pic_budget");
    await alice.waitFor(replyTo(later), T, "the answer to a later command");
    const row = await waitFor(
      "the fifth ask handled",
      () => store.getInboxEvent(fifth),
      (e) => e?.status === "replied",
      { timeoutMs: T, intervalMs: 100 },
    );
    expect(row?.result).toMatchObject({ dagbotOutcome: { kind: "rate-limited" } });
    // Answered by a ⏳ on the ask itself, sent once, and by no message.
    const reaction = await waitFor(
      "the ⏳ on the fifth ask",
      async () =>
        (await roomHistory(alice, roomId)).filter(
          (e) => e.sender === botUserId && txnOf(e) === `reply.${fifth}`,
        ),
      (events) => events.length > 0,
      { timeoutMs: T, intervalMs: 200 },
    );
    expect(reaction.map((e) => e.type)).toEqual(["m.reaction"]);
    expect(reaction[0]!.content["m.relates_to"]).toEqual({
      rel_type: "m.annotation",
      event_id: fifth,
      key: "⏳",
    });

    // The room keeps pictures to operators: bob (50) may, carol may not, whatever her rate.
    const set = await alice.sendText(roomId, "!dag policy graph operators");
    expect(bodyOf(await alice.waitFor(replyTo(set), T, "the policy change"))).toContain("graph operators");
    const bobAsks = await bob.sendText(roomId, "!dag graph pic_budget");
    expect((await alice.waitFor(pictureFor(bobAsks), T, "bob's picture")).content["url"]).toMatch(/^mxc:/);
    // The policy answers before the rate limit: carol hears why, though she was told to wait.
    const carolAsks = await carol.sendText(roomId, "!dag graph pic_budget");
    const refused = await alice.waitFor(replyTo(carolAsks), T, "carol's refusal");
    expect(bodyOf(refused)).toContain("this room's policy keeps pictures to operators (graph operators)");
    const reset = await alice.sendText(roomId, "!dag policy graph anyone");
    await alice.waitFor(replyTo(reset), T, "the policy change back");
  });
});
