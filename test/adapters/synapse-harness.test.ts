/** The Synapse test harness itself: install, config, users, rooms, restart, failure reporting. */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { useSynapse } from "../support/matrix-fixture.js";
import { MatrixUser, match } from "../support/matrix-user.js";
import { RAISED_LIMITS } from "../support/synapse-config.js";
import { ensureSynapseInstalled, startSynapse } from "../support/synapse.js";

const run = promisify(execFile);
const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const fx = useSynapse();

/** Loads our rendered config with the installed Synapse's own parser and lists its rate limiters. */
const LIMITERS_PY = `
import json, sys
from synapse.config.homeserver import HomeServerConfig
from synapse.config.ratelimiting import RatelimitSettings
config = HomeServerConfig.load_config("", ["-c", sys.argv[1]])
print(json.dumps({v.key: [v.per_second, v.burst_count]
                  for v in vars(config.ratelimiting).values() if isinstance(v, RatelimitSettings)}))
`;

describe("Synapse harness", () => {
  it("serves the client and admin APIs at hs.url, running the pinned Synapse", async () => {
    const { hs } = fx;
    expect(hs.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const admin = await hs.registerUser("harness-admin", { admin: true });
    const res = await fetch(`${hs.url}/_synapse/admin/v1/server_version`, {
      headers: { authorization: `Bearer ${admin.accessToken}` },
    });
    const { version } = await ensureSynapseInstalled();
    expect(await res.json()).toMatchObject({ server_version: version });
  });

  it("raises every rate limiter that the installed Synapse reads from our config", async () => {
    const { python } = await ensureSynapseInstalled();
    const { stdout } = await run(python, ["-c", LIMITERS_PY, join(fx.hs.dataDir, "homeserver.yaml")]);
    const limiters = JSON.parse(stdout.trim().split("\n").pop()!) as Record<string, [number, number]>;
    // Every key we write is one Synapse reads (a typo would silently keep the tight default)...
    for (const key of RAISED_LIMITS) expect(Object.keys(limiters)).toContain(key);
    // ...and nothing it reads was left tight (a limiter added by a newer Synapse would show here).
    const tight = Object.entries(limiters).filter(
      ([, [perSecond, burst]]) => perSecond < 1000 || burst < 1000,
    );
    expect(tight).toEqual([]);
  });

  it("registers users with the shared secret: tokens work, admin only when asked", async () => {
    const { hs } = fx;
    const admin = await hs.registerUser("reg-admin", { admin: true });
    const alice = await hs.registerUser("Reg-Alice", { deviceId: "ALICEDEV" });
    expect(alice).toMatchObject({
      userId: "@reg-alice:localhost",
      deviceId: "ALICEDEV",
      password: "pw-Reg-Alice",
    });
    const whoami = await new MatrixUser(hs.url, alice).request("GET", "/_matrix/client/v3/account/whoami");
    expect(whoami).toMatchObject({ user_id: alice.userId, device_id: "ALICEDEV" });

    const adminView = await new MatrixUser(hs.url, admin).request(
      "GET",
      `/_synapse/admin/v2/users/${encodeURIComponent(alice.userId)}`,
    );
    expect(adminView).toMatchObject({ name: alice.userId, admin: false });
    await expect(
      new MatrixUser(hs.url, alice).request(
        "GET",
        `/_synapse/admin/v2/users/${encodeURIComponent(admin.userId)}`,
      ),
    ).rejects.toMatchObject({ status: 403 });

    await expect(hs.registerUser("reg-alice")).rejects.toThrow(/M_USER_IN_USE/);
  });

  it("creates a room with invites and power levels that invited users can join", async () => {
    const { hs } = fx;
    const owner = new MatrixUser(hs.url, await hs.registerUser("room-owner"));
    const bot = new MatrixUser(hs.url, await hs.registerUser("room-bot"));
    const roomId = await hs.createRoom(owner.accessToken, {
      invite: [bot.userId],
      name: "harness room",
      powerLevels: { users: { [owner.userId]: 100, [bot.userId]: 50 } },
    });
    await bot.joinRoom(roomId);
    expect((await owner.joinedMembers(roomId)).sort()).toEqual([owner.userId, bot.userId].sort());
    const pl = await owner.request(
      "GET",
      `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/state/m.room.power_levels/`,
    );
    expect(pl.users).toEqual({ [owner.userId]: 100, [bot.userId]: 50 });
    await owner.setPowerLevel(roomId, bot.userId, 20);
    const lowered = await owner.request(
      "GET",
      `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/state/m.room.power_levels/`,
    );
    expect(lowered.users).toEqual({ [owner.userId]: 100, [bot.userId]: 20 });
    const name = await owner.request(
      "GET",
      `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/state/m.room.name/`,
    );
    expect(name.name).toBe("harness room");
  });

  it("scripted users send text, HTML, replies and reactions, and see each other's events", async () => {
    const { hs } = fx;
    const alice = await hs.registerUser("chat-alice");
    const bob = await hs.registerUser("chat-bob");
    const a = new MatrixUser(hs.url, alice);
    const b = new MatrixUser(hs.url, bob);
    const roomId = await hs.createRoom(alice.accessToken, { invite: [bob.userId] });
    await b.joinRoom(roomId);
    b.startSync();
    try {
      const first = await a.sendText(roomId, "hello *bob*", { formattedBody: "hello <em>bob</em>" });
      const reply = await a.sendText(roomId, "a reply", { replyTo: first });
      const inThread = await a.sendText(roomId, "in a thread", { threadRoot: first });
      const reaction = await a.sendReaction(roomId, first, "✅");

      const seenFirst = await b.waitFor(match.body(roomId, "hello *bob*"), 20_000, "first message");
      expect(seenFirst).toMatchObject({
        event_id: first,
        sender: alice.userId,
        content: {
          msgtype: "m.text",
          format: "org.matrix.custom.html",
          formatted_body: "hello <em>bob</em>",
        },
      });
      expect((await b.waitFor(match.id(reply))).content["m.relates_to"]).toEqual({
        "m.in_reply_to": { event_id: first },
      });
      expect((await b.waitFor(match.id(inThread))).content["m.relates_to"]).toMatchObject({
        rel_type: "m.thread",
        event_id: first,
      });
      expect(await b.waitFor(match.id(reaction))).toMatchObject({
        type: "m.reaction",
        content: { "m.relates_to": { rel_type: "m.annotation", event_id: first, key: "✅" } },
      });
      // /messages, the server's own record, agrees with what /sync delivered.
      const bodies = (await b.messages(roomId))
        .filter((e) => e.type === "m.room.message")
        .map((e) => e.content["body"]);
      expect(bodies).toEqual(["hello *bob*", "a reply", "in a thread"]);
    } finally {
      await b.stopSync();
    }
  });

  it("the scripted user backfills a limited timeline, so it misses nothing while it was not polling", async () => {
    const { hs } = fx;
    const erin = await hs.registerUser("gap-erin");
    const e = new MatrixUser(hs.url, erin, { timelineLimit: 3 });
    const roomId = await hs.createRoom(erin.accessToken);
    e.startSync();
    await e.sendText(roomId, "before the gap");
    await e.waitFor(match.body(roomId, "before the gap"));
    await e.stopSync();
    const sent = [];
    for (let i = 0; i < 10; i++) sent.push(await e.sendText(roomId, `gap ${i}`));
    e.startSync();
    await e.waitFor(match.id(sent[9]!));
    try {
      const got = e.events(roomId).filter((ev) => /^gap \d$/.test(ev.content["body"] ?? ""));
      expect(got.map((ev) => ev.event_id)).toEqual(sent);
    } finally {
      await e.stopSync();
    }
  });

  it("waitFor rejects with a summary of what it saw when nothing matches", async () => {
    const { hs } = fx;
    const carol = await hs.registerUser("wait-carol");
    const c = new MatrixUser(hs.url, carol);
    const roomId = await hs.createRoom(carol.accessToken);
    await c.sendText(roomId, "something else");
    c.startSync();
    try {
      await c.waitFor(match.body(roomId, "something else"));
      await expect(c.waitFor(match.body(roomId, "never sent"), 300, "the impossible")).rejects.toThrow(
        /waiting for the impossible; saw:[\s\S]*"something else"/,
      );
    } finally {
      await c.stopSync();
    }
  });

  it("restarts on the same port and data: tokens, rooms and messages survive", async () => {
    const { hs } = fx;
    const dave = await hs.registerUser("restart-dave");
    const d = new MatrixUser(hs.url, dave);
    const roomId = await hs.createRoom(dave.accessToken, { name: "survives" });
    const eventId = await d.sendText(roomId, "before restart");
    const pidBefore = hs.pid();

    await hs.restart();

    expect(hs.pid()).not.toBe(pidBefore);
    expect(hs.pid()).toBeTypeOf("number");
    const after = await d.messages(roomId);
    expect(after.map((e) => e.event_id)).toContain(eventId);
    expect(await d.request("GET", "/_matrix/client/v3/account/whoami")).toMatchObject({
      user_id: dave.userId,
    });
  });

  it("fails fast with the log tail when Synapse cannot start, and keeps its data dir", async () => {
    const parentDir = mkdtempSync(join(tmpdir(), "dagbot-bad-synapse-"));
    try {
      const err: Error = await startSynapse({
        parentDir,
        extraConfig: { database: { name: "no-such-engine" } },
      }).then(
        () => new Error("started unexpectedly"),
        (e: Error) => e,
      );
      expect(err.message).toMatch(/exited with code \d+ before it was ready/);
      expect(err.message).toMatch(/no-such-engine/);
      const logPath = /log (\S+synapse\.log)/.exec(err.message)?.[1];
      expect(logPath && existsSync(logPath)).toBe(true);
    } finally {
      rmSync(parentDir, { recursive: true, force: true });
    }
  });
});

describe("install-synapse.sh", () => {
  const script = join(root, "scripts/install-synapse.sh");

  it("returns the existing venv's python when the pinned version is installed", async () => {
    const { python } = await ensureSynapseInstalled();
    const { stdout, stderr } = await run("bash", [script]);
    expect(stdout.trim()).toBe(python);
    expect(stderr).not.toMatch(/installing/);
  });

  it("fails with a message naming the problem when Python is missing", async () => {
    const venv = join(mkdtempSync(join(tmpdir(), "dagbot-novenv-")), "venv");
    const err = await run("bash", [script], {
      env: { ...process.env, DAGBOT_SYNAPSE_VENV: venv, DAGBOT_PYTHON: "/nonexistent/python3" },
    }).then(
      () => undefined,
      (e: { code: number; stderr: string }) => e,
    );
    expect(err?.code).toBe(2);
    expect(err?.stderr).toMatch(/'\/nonexistent\/python3' was not found.*Python >= 3\.10 with pip/);
    expect(existsSync(venv)).toBe(false);
    rmSync(dirname(venv), { recursive: true, force: true });
  });
});
