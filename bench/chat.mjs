/**
 * Section 4: three `dagbot start` bots (SQLite store, the embedded default) in a room of a local
 * Synapse. Per sample, interleaved: the bare homeserver one-way trip (alice sends, bob receives),
 * the bare echo round trip (alice sends, bob answers at once, alice receives the answer: the same
 * two homeserver hops a command and its reply take), `!dag status` → its reply, and a publish of a
 * one-task DAG (alice is auto-confirmed) → its status card, all timed on this process's clock.
 * Then a calm room: the bot events in the main timeline (not in a thread, not an edit)
 * for one run of 20 tasks that bob publishes and alice confirms, and one that alice's publish starts
 * at once. Memory: the bots' VmRSS once idle, and that of a fourth bot alone in an
 * encrypted room (the only one that loads the WASM crypto).
 */
import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import process from "node:process";
import { clearInterval, setInterval, setTimeout } from "node:timers";
import { track } from "./lib/children.mjs";
import { CLI, cliNodeFlags, load } from "./lib/dist.mjs";
import { rssKb, treeRssKb, waitFor } from "./lib/cluster.mjs";
import { BenchClient } from "./lib/matrix.mjs";
import { percentile } from "./lib/stats.mjs";

const READY = '"msg":"matrix intake ready"';
/**
 * How long after the last bot is ready its idle memory is read. V8 shrinks the heap left by start-up
 * (its memory reducer) about 8-15 s after the allocations stop; one second after ready, RSS is still
 * 10-40 MB above where an idle bot stays.
 */
const IDLE_SETTLE_MS = 25_000;
const TXN_KEY = "org.dagbot.txn";
const CARD_KEY = "org.dagbot.card";

/** Whether the built CLI has `dagbot start` (the Matrix bot); the section waits for it to exist. */
export function hasStartCommand() {
  return existsSync(join(CLI, "..", "cli", "subcommands", "start.js"));
}

function botConfig({ nodeId, hsUrl, userId, roomId, storePath, alice, bob }) {
  return {
    node_id: nodeId,
    labels: ["linux"],
    capacity: 2,
    store: `sqlite:${storePath}`,
    // Encryption on (the default): the crypto is loaded by a bot whose room is encrypted.
    matrix: { homeserver_url: hsUrl, user_id: userId, rooms: [roomId], encryption: true },
    // bob is an operator who is not on auto_confirm: his publishes wait for a confirmation.
    permissions: { power_level: 50, allow: [bob], auto_confirm: [alice] },
    actions: { true: { argv: ["true"], timeout: "1m" } },
    log_level: "info",
  };
}

const pct = (xs) => ({ p50: percentile(xs, 50), p95: percentile(xs, 95), n: xs.length });

/** Twenty `true` tasks, a tree three wide. */
function twentyTasks(id) {
  const tasks = Array.from({ length: 20 }, (_, i) => ({
    id: `t${i}`,
    action: "true",
    ...(i > 0 ? { needs: [`t${Math.floor((i - 1) / 3)}`] } : {}),
  }));
  return { id, tasks };
}

/**
 * One run of 20 tasks from its publish to its final message (and 2 s more for late edits): how many
 * bot events went to the main timeline, how many into a thread, how many were edits.
 */
async function calmRun({ publisher, confirmer, watcher, botIds, id }) {
  watcher.forget();
  const publishId = await publisher.say(
    `!dag publish\n\`\`\`json\n${JSON.stringify(twentyTasks(id))}\n\`\`\``,
  );
  const txn = (e) => String(e.content?.[TXN_KEY] ?? "");
  let confirmId = null;
  if (confirmer !== null) {
    await watcher.waitFor((e) => txn(e) === `reply.${publishId}`, 60_000, "the acknowledgement");
    confirmId = await confirmer.say(`!dag confirm ${id}`);
  }
  const isFinal = (e) => txn(e).startsWith("final.") && (e.content?.body ?? "").includes(id);
  await watcher.waitFor((e) => botIds.has(e.sender) && isFinal(e), 120_000, "the final message");
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  // This run's events only: the answers to its publish and confirm, its card and edits, its final
  // message (the samples' last runs may still be ending beside it).
  const ours = (e) =>
    txn(e) === `reply.${publishId}` ||
    (confirmId !== null && txn(e) === `reply.${confirmId}`) ||
    isFinal(e) ||
    e.content?.[CARD_KEY]?.dagId === id ||
    e.content?.["m.new_content"]?.[CARD_KEY]?.dagId === id;
  const rel = (e) => e.content?.["m.relates_to"]?.rel_type;
  const bot = watcher.seen.map((s) => s.event).filter((e) => botIds.has(e.sender) && ours(e));
  return {
    main: bot.filter((e) => rel(e) !== "m.thread" && rel(e) !== "m.replace").length,
    thread: bot.filter((e) => rel(e) === "m.thread").length,
    edits: bot.filter((e) => rel(e) === "m.replace").length,
  };
}

/** A room alice creates with encryption on from its first event, inviting `botUserId`. */
async function createEncryptedRoom(hsUrl, accessToken, botUserId) {
  const res = await fetch(`${hsUrl}/_matrix/client/v3/createRoom`, {
    method: "POST",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json" },
    body: JSON.stringify({
      preset: "private_chat",
      name: "bench encrypted",
      invite: [botUserId],
      initial_state: [
        { type: "m.room.encryption", state_key: "", content: { algorithm: "m.megolm.v1.aes-sha2" } },
      ],
    }),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`createRoom (encrypted): HTTP ${res.status} ${JSON.stringify(json)}`);
  return json.room_id;
}

export async function benchChat(scratch, { samples, log }) {
  const { startSynapse } = await load("harness/local-synapse.js");
  (await load("harness/child-reaper.js")).installChildReaper();
  const dir = scratch.dir("chat");
  const hs = await startSynapse({ parentDir: dir });
  const children = [];
  const clients = [];
  try {
    const a = await hs.registerUser("bench-alice");
    const b = await hs.registerUser("bench-bob");
    const bots = [];
    for (const n of [1, 2, 3]) bots.push(await hs.registerUser(`benchbot${n}`, { deviceId: `BENCHBOT${n}` }));
    const roomId = await hs.createRoom(a.accessToken, {
      name: "bench",
      invite: [b.userId, ...bots.map((x) => x.userId)],
    });
    // The fourth bot, alone in an encrypted room: the memory of a bot with the WASM crypto loaded.
    const encBot = await hs.registerUser("benchbot4", { deviceId: "BENCHBOT4" });
    const encRoomId = await createEncryptedRoom(hs.url, a.accessToken, encBot.userId);
    const alice = new BenchClient(hs.url, a, roomId);
    const bob = new BenchClient(hs.url, b, roomId);
    clients.push(alice, bob);
    await bob.join();

    const storePath = join(dir, "bots.db");
    mkdirSync(join(dir, "state"));
    const botRooms = [...bots.map(() => roomId), encRoomId];
    for (const [i, bot] of [...bots, encBot].entries()) {
      const nodeId = `bot${i + 1}`;
      const configPath = join(dir, `${nodeId}.json`);
      writeFileSync(
        configPath,
        JSON.stringify(
          botConfig({
            nodeId,
            hsUrl: hs.url,
            userId: bot.userId,
            roomId: botRooms[i],
            storePath,
            alice: a.userId,
            bob: b.userId,
          }),
        ),
      );
      const logPath = join(dir, `${nodeId}.log`);
      const fd = openSync(logPath, "a");
      const child = track(
        spawn(
          process.execPath,
          [...cliNodeFlags(), CLI, "start", "--config", configPath, "--state-dir", join(dir, "state")],
          {
            env: { ...process.env, DAGBOT_ACCESS_TOKEN: bot.accessToken },
            stdio: ["ignore", fd, fd],
          },
        ),
      );
      closeSync(fd);
      children.push(child);
      await waitFor(
        `${nodeId} to be ready`,
        () => {
          if (child.exitCode !== null)
            throw new Error(`${nodeId} exited with ${child.exitCode}; see ${logPath}`);
          return existsSync(logPath) && readFileSync(logPath, "utf8").includes(READY);
        },
        60_000,
        100,
      );
    }
    const lastReadyAt = performance.now();
    await alice.start();
    await bob.start();
    // The bots' memory: one second after all are ready, once idle (IDLE_SETTLE_MS after), then the
    // largest seen during the commands; the plain room's three bots, and the encrypted room's one.
    const plainBots = children.slice(0, 3);
    const encChild = children[3];
    const botRss = () => Math.max(...plainBots.map((c) => rssKb(c.pid) ?? 0));
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, lastReadyAt + 1000 - performance.now())));
    const readyRssKb = botRss();
    const readyEncRssKb = rssKb(encChild.pid) ?? 0;
    await new Promise((resolve) =>
      setTimeout(resolve, Math.max(0, lastReadyAt + IDLE_SETTLE_MS - performance.now())),
    );
    const idleRssKb = botRss();
    const idleEncRssKb = rssKb(encChild.pid) ?? 0;
    let busyRssKb = idleRssKb;
    const rssTimer = setInterval(() => (busyRssKb = Math.max(busyRssKb, botRss())), 100);

    const oneWay = [];
    const echo = [];
    const status = [];
    const card = [];
    const body = (e) => (typeof e.content?.body === "string" ? e.content.body : "");
    const warmup = 3;
    for (let i = 0; i < samples + warmup; i++) {
      const keep = i >= warmup;
      const tag = `${scratch.id}-${i}`;

      let t0 = performance.now();
      const seenByBob = bob.waitFor((e) => body(e) === `ping ${tag}`, 30_000, "the ping");
      await alice.say(`ping ${tag}`);
      if (keep) oneWay.push((await seenByBob).at - t0);
      else await seenByBob;

      const answered = bob
        .waitFor((e) => body(e) === `echo ${tag}`, 30_000, "the echo")
        .then(() => bob.say(`echo-reply ${tag}`));
      t0 = performance.now();
      await alice.say(`echo ${tag}`);
      const back = await alice.waitFor((e) => body(e) === `echo-reply ${tag}`, 30_000, "the echo reply");
      await answered;
      if (keep) echo.push(back.at - t0);

      t0 = performance.now();
      const statusId = await alice.say("!dag status");
      const reply = await alice.waitFor(
        (e) => e.content?.[TXN_KEY] === `reply.${statusId}`,
        60_000,
        "the status reply",
      );
      if (keep) status.push(reply.at - t0);

      const dagId = `card_${i}`;
      const doc = { id: dagId, tasks: [{ id: "a", action: "true" }] };
      t0 = performance.now();
      await alice.say(`!dag publish\n\`\`\`json\n${JSON.stringify(doc)}\n\`\`\``);
      const theCard = await alice.waitFor(
        (e) =>
          e.content?.[CARD_KEY]?.dagId === dagId && e.content?.["m.relates_to"]?.rel_type !== "m.replace",
        60_000,
        "the status card",
      );
      if (keep) card.push(theCard.at - t0);
      alice.forget();
      bob.forget();
    }
    clearInterval(rssTimer);
    const botIds = new Set(bots.map((x) => x.userId));
    const calmConfirmed = await calmRun({
      publisher: bob,
      confirmer: alice,
      watcher: alice,
      botIds,
      id: "calm_confirmed",
    });
    const calmAtOnce = await calmRun({
      publisher: alice,
      confirmer: null,
      watcher: alice,
      botIds,
      id: "calm_at_once",
    });
    // A node's idle memory with its action supervisor, after it ran actions (the calm runs
    // above): the supervisor is let go 10 s after the last action, V8 shrinks its heap meanwhile.
    await new Promise((resolve) => setTimeout(resolve, IDLE_SETTLE_MS));
    const nodeIdleAfterWorkRssKb = Math.max(...plainBots.map((c) => treeRssKb(c.pid)));
    const out = {
      oneWay: pct(oneWay),
      echo: pct(echo),
      status: pct(status),
      card: pct(card),
      botReadyRssMB: Math.round(readyRssKb / 1024),
      botIdleRssMB: Math.round(idleRssKb / 1024),
      botReadyEncryptedRssMB: Math.round(readyEncRssKb / 1024),
      botIdleEncryptedRssMB: Math.round(idleEncRssKb / 1024),
      botBusyRssMB: Math.round(busyRssKb / 1024),
      nodeIdleAfterWorkRssMB: Math.round(nodeIdleAfterWorkRssKb / 1024),
      calm: { confirmed: calmConfirmed, atOnce: calmAtOnce },
    };
    log(
      `  chat: one-way p50 ${out.oneWay.p50.toFixed(1)} ms, echo p50 ${out.echo.p50.toFixed(1)} ms, ` +
        `status reply p50 ${out.status.p50.toFixed(1)} p95 ${out.status.p95.toFixed(1)} ms, ` +
        `card p50 ${out.card.p50.toFixed(1)} p95 ${out.card.p95.toFixed(1)} ms; ` +
        `main-timeline bot events per 20-task run: ${calmConfirmed.main} confirmed, ${calmAtOnce.main} started at once; ` +
        `idle bot RSS ${out.botIdleRssMB} MB (${out.botReadyRssMB} MB 1 s after ready), ` +
        `in an encrypted room ${out.botIdleEncryptedRssMB} MB (${out.botReadyEncryptedRssMB} MB); ` +
        `idle after running actions, with its supervisor ${out.nodeIdleAfterWorkRssMB} MB`,
    );
    return out;
  } finally {
    for (const c of clients) await c.stop();
    await Promise.all(
      children.map(
        (c) =>
          new Promise((resolve) => {
            if (c.exitCode !== null) return resolve();
            c.once("exit", resolve);
            c.kill("SIGKILL");
          }),
      ),
    );
    await hs.dispose();
  }
}
