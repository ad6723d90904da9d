/**
 * Encrypted rooms end to end: two `dagbot start` processes (WASM crypto behind matrix-bot-sdk) and a
 * person on an independent real client (matrix-js-sdk with its Rust crypto) in an encrypted room of
 * a real Synapse, plus a plain room. Publish → confirm → succeeded, the card edited in place and the
 * final message, all encrypted on the server and decrypted by the person; commands sent while the
 * whole fleet is down (leader killed with -9) answered exactly once after it comes back; the crypto
 * state kept owner-only in the state folder; plain rooms unchanged.
 */
import { readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import * as wasm from "@matrix-org/matrix-sdk-crypto-wasm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/adapters/sqlite/index.js";
import type { Store } from "../../src/ports/store.js";
import { BotFleet } from "../support/bot-fleet.js";
import {
  cardEditSaying,
  cardOf,
  pictureFor,
  publishJson,
  replyTo,
  roomHistory,
  txnOf,
} from "../support/bot-chat.js";
import { EncryptedPerson, type PersonEvent } from "../support/encrypted-person.js";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser } from "../support/matrix-user.js";
import { waitFor } from "../support/store-wait.js";
import type { RegisteredUser } from "../support/synapse.js";

/** matrix.decrypt_grace of the fleet's nodes, in seconds. */
const DECRYPT_GRACE_S = 5;

const fx = useSynapse();
let fleet: BotFleet;
let store: Store;
let roomId: string;
let plainRoomId: string;
let erin: EncryptedPerson;
let erinHttp: MatrixUser;
let bots: RegisteredUser[];

const T = 45_000;
const body = (e: PersonEvent): string => (typeof e.content["body"] === "string" ? e.content["body"] : "");

async function command(text: string, room = roomId): Promise<{ id: string; reply: PersonEvent }> {
  const id = await erin.sendText(room, text);
  const reply = await erin.waitFor(replyTo(id), T, `the reply to ${JSON.stringify(text.slice(0, 40))}`);
  return { id, reply };
}

beforeAll(async () => {
  const { hs } = fx;
  bots = [];
  for (const n of [1, 2]) bots.push(await hs.registerUser(`encbot${n}`, { deviceId: `ENCBOT${n}` }));
  const e = await hs.registerUser("erin", { deviceId: "ERINPHONE" });
  erinHttp = new MatrixUser(hs.url, e);
  const created = await erinHttp.request("POST", "/_matrix/client/v3/createRoom", {
    preset: "private_chat",
    name: "encrypted",
    invite: bots.map((b) => b.userId),
    initial_state: [
      { type: "m.room.encryption", state_key: "", content: { algorithm: "m.megolm.v1.aes-sha2" } },
    ],
  });
  roomId = created.room_id;
  plainRoomId = await hs.createRoom(e.accessToken, { name: "plain", invite: bots.map((b) => b.userId) });
  fleet = new BotFleet({
    hs,
    bots,
    rooms: [roomId, plainRoomId],
    config: { permissions: { power_level: 50 } },
    // Shorter than the default 15 s, so the undecryptable case waits seconds, not half a minute.
    matrix: { decrypt_grace: `${DECRYPT_GRACE_S}s` },
  });
  await fleet.startAll();
  store = await openSqliteStore(fleet.storePath);
  for (;;) {
    const members = await erinHttp.joinedMembers(roomId);
    if (bots.every((b) => members.includes(b.userId))) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  erin = await EncryptedPerson.start(hs.url, e);
  await wasm.initAsync();
}, 180_000);

afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") {
    fleet?.keepDir();
    console.error(fleet?.tails(25));
  }
});

afterAll(async () => {
  erin?.stop();
  await store?.close();
  await fleet?.dispose();
});

describe("the bot in an encrypted room, with a person on matrix-js-sdk", () => {
  it("publish → confirm → succeeded: replies, card, card edits and final message all encrypted and readable", async () => {
    const dag = {
      id: "enc_first",
      tasks: [
        { id: "first", action: "echo", args: { message: "secret words" } },
        { id: "second", action: "true", needs: ["first"] },
      ],
    };
    const published = await command(publishJson(dag));
    expect(published.reply.encrypted).toBe(true);
    expect(body(published.reply)).toMatch(/for confirmation\. Its card is in the thread\.$/);
    const card = await erin.waitFor(cardOf("enc_first"), T, "the status card");
    expect(card.encrypted).toBe(true);
    expect(card.content["m.relates_to"]).toMatchObject({ rel_type: "m.thread", event_id: published.id });

    const confirmed = await command("!dag confirm enc_first");
    expect(body(confirmed.reply)).toMatch(/confirmed/);
    const edit = await erin.waitFor(
      cardEditSaying(card.event_id, /succeeded/),
      T,
      "the card edited to succeeded",
    );
    expect(edit.encrypted).toBe(true);
    const final = await erin.waitFor(
      (e) => txnOf(e)?.startsWith("final.") === true && body(e).includes("enc_first"),
      T,
      "the final message",
    );
    expect(final.encrypted).toBe(true);
    expect((await store.getRun(roomId, "enc_first"))?.status).toBe("succeeded");

    // On the server, every event of the fleet in this room is ciphertext.
    const history = await roomHistory(erinHttp, roomId);
    const fromBots = history.filter(
      (ev) => bots.some((b) => b.userId === ev.sender) && ev.type !== "m.room.member",
    );
    expect(fromBots.length).toBeGreaterThan(3);
    expect(fromBots.every((ev) => ev.type === "m.room.encrypted")).toBe(true);
    expect(history.some((ev) => JSON.stringify(ev.content).includes("secret words"))).toBe(false);
  });

  // matrix-js-sdk (like Element) sends reactions in the clear even in an encrypted room.
  it("a ✅ on the encrypted card confirms; !dag logs shows the task's output, encrypted", async () => {
    const dag = {
      id: "enc_react",
      tasks: [{ id: "only", action: "echo", args: { message: "reacted words" } }],
    };
    await command(publishJson(dag));
    const card = await erin.waitFor(cardOf("enc_react"), T, "the status card");
    await erin.sendReaction(roomId, card.event_id, "✅");
    await erin.waitFor(cardEditSaying(card.event_id, /succeeded/), T, "the card edited to succeeded");
    expect((await store.getRun(roomId, "enc_react"))?.confirmedBy).toBe(erin.userId);
    const logs = await command("!dag logs enc_react only");
    expect(logs.reply.encrypted).toBe(true);
    expect(body(logs.reply)).toContain("reacted words");
  });

  it("!dag graph in the encrypted room: an encrypted m.image whose upload is ciphertext that decrypts to the PNG", async () => {
    // Typed in the main timeline: answered there; the picture goes into the run's thread.
    const asked = await command("!dag graph enc_first");
    expect(body(asked.reply)).toBe("🖼️ The picture of `enc_first` goes into its thread.");
    const image = await erin.waitFor(pictureFor(asked.id), T, "the picture");
    expect(image.encrypted).toBe(true);
    expect(image.content["msgtype"]).toBe("m.image");
    expect(image.content["url"]).toBeUndefined();
    const file = image.content["file"] as {
      url: string;
      key: unknown;
      iv: string;
      hashes: unknown;
      v: string;
    };
    expect(file.v).toBe("v2");
    const m = /^mxc:\/\/([^/]+)\/(.+)$/.exec(file.url);
    expect(m, file.url).not.toBeNull();
    const res = await fetch(`${fx.hs.url}/_matrix/client/v1/media/download/${m![1]}/${m![2]}`, {
      headers: { authorization: `Bearer ${erinHttp.accessToken}` },
    });
    expect(res.status).toBe(200);
    const stored = new Uint8Array(await res.arrayBuffer());
    const PNG = [0x89, 0x50, 0x4e, 0x47];
    // What the media repository holds is not a PNG; with the event's key it is.
    expect([...stored.slice(0, 4)]).not.toEqual(PNG);
    const clear = wasm.Attachment.decrypt(new wasm.EncryptedAttachment(stored, JSON.stringify(file)));
    expect([...clear.slice(0, 4)]).toEqual(PNG);
    const info = image.content["info"] as { size: number; mimetype: string };
    expect(info.mimetype).toBe("image/png");
    expect(clear.byteLength).toBe(info.size);
  });

  it("a plain room next to it works as before (answers in the clear)", async () => {
    const help = await command("!dag help", plainRoomId);
    expect(help.reply.encrypted).toBe(false);
    expect(body(help.reply)).toMatch(/Follow runs: `status`/);
  });

  it("an undecryptable message gets one answer asking to re-send (rate-limited), and `!dag nodes` counts them", async () => {
    // Ciphertext under a Megolm session nobody shared: no node can decrypt it.
    const bogus = (n: number) =>
      erinHttp.sendEvent(roomId, "m.room.encrypted", {
        algorithm: "m.megolm.v1.aes-sha2",
        sender_key: "x".repeat(43),
        session_id: `nosuchsession${n}`.padEnd(43, "A"),
        device_id: "ERINPHONE",
        ciphertext: "AwgAEnB".padEnd(120, "A"),
      });
    const first = await bogus(1);
    // Each node retries for its grace time, then gives up at its next sync batch; chatter makes one.
    await new Promise((r) => setTimeout(r, (DECRYPT_GRACE_S + 1) * 1000));
    await erin.sendText(roomId, "chatter after the grace time");
    const answer = await erin.waitFor(replyTo(first), T, "the answer to the undecryptable message");
    expect(answer.encrypted).toBe(true);
    expect(body(answer)).toMatch(/could not decrypt your message/);

    const second = await bogus(2);
    await new Promise((r) => setTimeout(r, (DECRYPT_GRACE_S + 1) * 1000));
    await erin.sendText(roomId, "more chatter after the grace time");
    let nodesReply = "";
    for (let i = 0; i < 10 && !/2 undecryptable events/.test(nodesReply); i++) {
      nodesReply = body((await command("!dag nodes")).reply);
      if (!/2 undecryptable events/.test(nodesReply)) await new Promise((r) => setTimeout(r, 1000));
    }
    expect(nodesReply).toMatch(/2 undecryptable events/);
    // The second one from the same sender within 10 minutes is not answered.
    expect(erin.events(roomId).filter((e) => txnOf(e) === `reply.${second}`)).toHaveLength(0);
    expect(erin.events(roomId).filter((e) => txnOf(e) === `reply.${first}`)).toHaveLength(1);
  }, 120_000);

  it("keeps each device's crypto state owner-only in the state folder", () => {
    const state = join(fleet.dir, "state");
    const dirs = readdirSync(state).filter((n) => n.startsWith("crypto-"));
    expect(dirs.length).toBe(2);
    for (const d of dirs) {
      expect(statSync(join(state, d)).mode & 0o777).toBe(0o700);
      expect(statSync(join(state, d, "crypto-store.idb")).mode & 0o777).toBe(0o600);
    }
  });

  it("commands sent while the whole fleet is down (kill -9) are decrypted and answered once after restart", async () => {
    // kill -9 both: the leader, whichever it is, dies without a goodbye.
    await fleet.kill(0);
    await fleet.kill(1);
    const sent = [
      await erin.sendText(roomId, "!dag status enc_first"),
      await erin.sendText(roomId, "!dag help"),
    ];
    await fleet.startAll();
    for (const id of sent) await erin.waitFor(replyTo(id), T, `the reply to ${id} sent during the downtime`);
    // Exactly once: the person's decrypted view, given time for any duplicate to arrive.
    await new Promise((r) => setTimeout(r, 3000));
    for (const id of sent) {
      expect(erin.events(roomId).filter((e) => txnOf(e) === `reply.${id}`)).toHaveLength(1);
    }
    const status = erin.events(roomId).find((e) => txnOf(e) === `reply.${sent[0]}`);
    expect(status?.encrypted).toBe(true);
    expect(status && body(status)).toMatch(/enc_first/);
    // The same devices: no node made a new crypto device on restart.
    for (const n of [0, 1])
      expect(fleet.logLines(n, "new crypto device: keys are made and uploaded")).toHaveLength(1);
  });

  it("kill -9 of the leader during a run: the new leader finishes it; every encrypted message exactly once", async () => {
    const dag = {
      id: "enc_kill",
      tasks: [
        { id: "one", action: "sleep", args: { seconds: 1.5 }, retries: 2, retry_backoff: "100ms" },
        {
          id: "two",
          action: "sleep",
          args: { seconds: 1.5 },
          needs: ["one"],
          retries: 2,
          retry_backoff: "100ms",
        },
      ],
    };
    const published = await command(publishJson(dag));
    await command("!dag confirm enc_kill");
    const run = await waitFor(
      "the run",
      () => store.getRun(roomId, "enc_kill"),
      (r) => r !== null,
      { timeoutMs: T },
    );
    await waitFor(
      "a running task",
      () => store.listTasks(run!.runId),
      (ts) => ts.some((t) => t.status === "running"),
      { timeoutMs: T },
    );
    const leaderIndex = async (): Promise<number> => {
      const lease = await waitFor(
        "a leader",
        () => store.getLease(roomId),
        (l) => l !== null && l.holder !== null && l.expiresAt > l.now,
        { timeoutMs: T, intervalMs: 50 },
      );
      return fleet.nodes.findIndex((n) => n.nodeId === lease!.holder!.nodeId);
    };
    const victim = await leaderIndex();
    await fleet.kill(victim);
    const during = [
      await erin.sendText(roomId, "!dag status enc_kill"),
      await erin.sendText(roomId, "!dag list"),
    ];
    await erin.waitFor((e) => txnOf(e) === `final.${run!.runId}`, T, "the final message");
    for (const id of during) await erin.waitFor(replyTo(id), T, `the reply to ${id}`);
    expect((await store.getRun(roomId, "enc_kill"))?.status).toBe("succeeded");
    await new Promise((r) => setTimeout(r, 2000));
    const counts = new Map<string, number>();
    for (const e of erin.events(roomId)) {
      const txn = txnOf(e);
      if (txn !== undefined) counts.set(txn, (counts.get(txn) ?? 0) + 1);
    }
    for (const id of [published.id, ...during]) expect(counts.get(`reply.${id}`)).toBe(1);
    expect(counts.get(`final.${run!.runId}`)).toBe(1);
    expect(counts.get(`card.${run!.runId}`)).toBe(1);
    await fleet.start(victim);
  }, 120_000);

  it("a gap longer than a sync's timeline is backfilled and its encrypted commands decrypted", async () => {
    await fleet.stop(0);
    await fleet.stop(1);
    const sent = [
      await erin.sendText(roomId, "!dag status enc_first"),
      await erin.sendText(roomId, "!dag help"),
    ];
    // More than the intake's 50 events per room per sync: the commands are behind a limited timeline.
    for (let i = 0; i < 55; i++) await erin.sendText(roomId, `chatter ${i}`);
    await fleet.startAll();
    for (const id of sent) await erin.waitFor(replyTo(id), T, `the reply to ${id} from before the gap`);
    expect(
      fleet.logLines(0, "backfilled a sync gap").length + fleet.logLines(1, "backfilled a sync gap").length,
    ).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 2000));
    for (const id of sent) {
      expect(erin.events(roomId).filter((e) => txnOf(e) === `reply.${id}`)).toHaveLength(1);
    }
  });

  it("a node whose crypto state is lost stops with a clear line; a new device (new login) recovers", async () => {
    await fleet.stop(1);
    const state = join(fleet.dir, "state");
    const dir = readdirSync(state).find((n) => n.startsWith("crypto-node2-"));
    expect(dir).toBeDefined();
    rmSync(join(state, dir ?? "", "crypto-store.idb"));
    await expect(fleet.start(1, 30_000)).rejects.toThrow(/exited before ready/);
    expect(await fleet.nodes[1]?.exited).toBe(2);
    expect(fleet.logText(1)).toMatch(/the crypto state of device ENCBOT2 is lost/);
    expect(fleet.logText(1)).toMatch(/Recover with a new device/);
    fleet.nodes[1]!.process = null;

    // The documented recovery: log in again (a new device), put the new token in, start.
    const bot2 = bots[1]!;
    const login = await new MatrixUser(fx.hs.url, bot2).request("POST", "/_matrix/client/v3/login", {
      type: "m.login.password",
      identifier: { type: "m.id.user", user: bot2.localpart },
      password: bot2.password,
      device_id: "ENCBOT2NEW",
    });
    bot2.accessToken = login.access_token;
    await fleet.start(1);
    expect(fleet.logText(1)).toMatch(/"device":"ENCBOT2NEW".*new crypto device/);
    // Alone in the fleet, the new device reads and answers the person's encrypted commands.
    await fleet.stop(0);
    const help = await command("!dag help");
    expect(help.reply.encrypted).toBe(true);
    expect(help.reply.sender).toBe(bot2.userId);
    await fleet.start(0);
  });

  it("a member who joins later reads the bot's later messages", async () => {
    const f = await fx.hs.registerUser("fred", { deviceId: "FREDLAPTOP" });
    await erinHttp.request("POST", `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/invite`, {
      user_id: f.userId,
    });
    await new MatrixUser(fx.hs.url, f).joinRoom(roomId);
    const fred = await EncryptedPerson.start(fx.hs.url, f);
    try {
      const asked = await command("!dag status enc_first");
      const seen = await fred.waitFor(replyTo(asked.id), T, "the bot's reply, read by the new member");
      expect(seen.encrypted).toBe(true);
      expect(body(seen)).toMatch(/enc_first/);
    } finally {
      fred.stop();
    }
  });
});
