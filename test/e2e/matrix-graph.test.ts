/**
 * `!dag graph` against a real Synapse: the picture is an m.image in the run's thread whose media
 * downloads from the homeserver and decodes as a PNG of the stated size, with the run's states in
 * it; a picture larger than the homeserver accepts (max_upload_size 80 KiB here) is answered with a
 * notice naming the 413, and the run's card keeps moving meanwhile.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { STATE_STYLE } from "../../src/adapters/graph/dot.js";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { Store } from "../../src/ports/store.js";
import { BotFleet } from "../support/bot-fleet.js";
import { bodyOf, cardEditSaying, cardOf, publishJson, replyTo } from "../support/bot-chat.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser } from "../support/matrix-user.js";
import { countColour, decodePng } from "../support/png.js";
import { waitFor } from "../support/store-wait.js";

const fx = useSynapse({ extraConfig: { max_upload_size: "80K" } });
let fleet: BotFleet;
let store: Store;
let roomId: string;
let alice: MatrixUser;

const T = 30_000;

beforeAll(async () => {
  const { hs } = fx;
  const bot = await hs.registerUser("graphbot1", { deviceId: "GRAPHBOT1" });
  const a = await hs.registerUser("alice");
  alice = new MatrixUser(hs.url, a);
  roomId = await hs.createRoom(a.accessToken, {
    name: "dagbot graph e2e",
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

async function runEnded(dagId: string): Promise<void> {
  await waitFor(
    `${dagId} to end`,
    () => store.getRun(roomId, dagId),
    (r) => r !== null && (r.status === "succeeded" || r.status === "failed"),
    { timeoutMs: T, intervalMs: 100 },
  );
}

describe("!dag graph", () => {
  it("posts the run as an m.image in its thread; the media downloads and decodes as that PNG", async () => {
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

    const commandId = await alice.sendText(roomId, "!dag graph pic_small");
    const image = await alice.waitFor(replyTo(commandId), T, "the picture");
    expect(image.content["msgtype"]).toBe("m.image");
    expect(image.content["m.relates_to"]).toMatchObject({
      rel_type: "m.thread",
      event_id: publishId,
      "m.in_reply_to": { event_id: commandId },
    });
    expect(bodyOf(image)).toContain("pic_small");
    expect(bodyOf(image)).toContain("1/3 succeeded · 1 failed · 1 skipped");
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
    const reply = await alice.waitFor(replyTo(commandId), T, "the answer to !dag graph");
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
