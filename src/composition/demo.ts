/**
 * What `dagbot demo` runs (demo.ts registers it, and imports this only then): the whole thing on
 * one machine. Starts a local Synapse (the harness the tests use), registers three bot accounts and
 * one person, creates a room, starts three `dagbot start` nodes on a shared SQLite store, publishes
 * and confirms an example DAG as the person, and prints the room's messages as they arrive. Ctrl-C
 * stops everything it started.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSynapse, type SynapseHandle } from "../harness/local-synapse.js";
import { startNodeProcess, type NodeProcess } from "../harness/node-process.js";
import { installChildReaper } from "../harness/child-reaper.js";
import { RoomWatcher, type WatchedEvent } from "../harness/room-watcher.js";
import { SetupError } from "./setup-error.js";
import { LOCAL_ACTIONS } from "./config-resolve.js";
import { onStopSignals } from "./stop-signals.js";
import { packageFile } from "../package-files.js";

export interface DemoOptions {
  dag: string;
  keep?: boolean;
}

const NODES = 3;
const CARD_KEY = "org.dagbot.card";

const out = (line = ""): void => {
  process.stdout.write(`${line}\n`);
};

function packagePath(relative: string): string {
  return packageFile(relative);
}

export async function runDemo(options: DemoOptions): Promise<number> {
  // The demo installs Synapse with the repository's script (and Python); the container image ships
  // neither, so there it says so before starting anything.
  const installScript = packagePath("scripts/install-synapse.sh");
  if (!existsSync(installScript))
    throw new SetupError(
      `the demo installs a local Synapse with ${installScript}, which this installation does not have ` +
        "(the container image ships no scripts/ and no Python): run `dagbot demo` from a checkout of the repository",
    );
  // Synapse and the demo's node die with this process, however it ends.
  installChildReaper();
  out(
    "Starting a local Synapse (the first run installs it into ~/.cache/dagbot, which takes a few minutes)…",
  );
  let hs: SynapseHandle;
  try {
    hs = await startSynapse();
  } catch (err) {
    throw new SetupError(err instanceof Error ? err.message : String(err), 1);
  }
  const dir = mkdtempSync(join(tmpdir(), "dagbot-demo-"));
  const nodes: NodeProcess[] = [];
  let watcher: RoomWatcher | null = null;
  // The one stop rule of every long-running command (stop-signals.ts): here any stage ends the demo.
  let stopListening = (): void => {};
  const interrupted = new Promise<void>((resolve) => {
    // A second signal while stopping ends the demo at once (its child reaper stops what it started).
    stopListening = onStopSignals((stage) => (stage === "graceful" ? resolve() : process.exit(130)));
  });
  try {
    const bots = [];
    for (let i = 1; i <= NODES; i++)
      bots.push(await hs.registerUser(`dagbot${i}`, { deviceId: `DAGBOT${i}` }));
    const password = randomBytes(9).toString("base64url");
    const person = await hs.registerUser("alice", { password, displayName: "Alice" });
    const roomId = await hs.createRoom(person.accessToken, {
      name: "dagbot demo",
      invite: bots.map((b) => b.userId),
    });

    mkdirSync(join(dir, "state"));
    for (const [i, bot] of bots.entries()) {
      const nodeId = `node${i + 1}`;
      const configPath = join(dir, `${nodeId}.json`);
      writeFileSync(
        configPath,
        JSON.stringify(
          {
            node_id: nodeId,
            labels: ["linux"],
            capacity: 2,
            store: `sqlite:${join(dir, "dagbot.db")}`,
            dag_library: packagePath("config/examples"),
            matrix: { homeserver_url: hs.url, user_id: bot.userId, rooms: [roomId] },
            actions: LOCAL_ACTIONS,
            log_level: "info",
          },
          null,
          2,
        ),
      );
      nodes.push(
        startNodeProcess({
          cli: packagePath("dist/cli.js"),
          args: ["start", "--config", configPath, "--state-dir", join(dir, "state")],
          env: { DAGBOT_ACCESS_TOKEN: bot.accessToken },
          logPath: join(dir, `${nodeId}.log`),
        }),
      );
    }
    await Promise.race([Promise.all(nodes.map((n) => n.ready(60_000))), interrupted]);

    out();
    out(`Synapse:   ${hs.url}  (pid ${hs.pid() ?? "?"}, data ${hs.dataDir})`);
    out(`Room:      ${roomId}  ("dagbot demo")`);
    out(`Person:    ${person.userId}  password ${password}`);
    out(`           Log in with a Matrix client at ${hs.url} and type !dag help in the room.`);
    out(`Nodes:     ${nodes.map((n, i) => `node${i + 1} (pid ${n.pid ?? "?"})`).join(", ")}; logs in ${dir}`);
    out("Ctrl-C stops everything.");
    out();

    let confirmed = false;
    const room = new RoomWatcher(
      hs.url,
      person.accessToken,
      roomId,
      (event) => {
        out(describe(event));
        const card = event.content[CARD_KEY] as { dagId?: unknown } | undefined;
        if (!confirmed && card?.dagId === options.dag && String(event.content["body"]).includes("awaiting")) {
          confirmed = true;
          void room.say(`!dag confirm ${options.dag}`).catch(() => undefined);
        }
      },
      (err) => out(`(watching the room failed: ${String(err)}; retrying)`),
    );
    watcher = room;
    room.start();
    await room.say(`!dag publish ${options.dag}`);
    await interrupted;
    return 0;
  } finally {
    out();
    out("Stopping the nodes and Synapse…");
    await watcher?.stop();
    await Promise.all(nodes.map((n) => n.stop()));
    if (options.keep === true) {
      hs.keepDataDir();
      out(`Kept the nodes' data in ${dir}`);
    } else rmSync(dir, { recursive: true, force: true });
    await hs.dispose();
    out("Stopped everything the demo started.");
    stopListening();
  }
}

/** `12:00:01 dagbot1  text…`, with edits marked and later lines indented. */
function describe(event: WatchedEvent): string {
  const time = new Date(event.originServerTs).toTimeString().slice(0, 8);
  const who = event.sender.replace(/^@/, "").replace(/:.*$/, "");
  const relation = event.content["m.relates_to"] as { rel_type?: unknown } | undefined;
  const edit = relation?.rel_type === "m.replace";
  const content = edit ? ((event.content["m.new_content"] ?? {}) as Record<string, unknown>) : event.content;
  const body = typeof content["body"] === "string" ? content["body"] : "";
  const [first = "", ...rest] = body.split("\n");
  const head = `${time} ${who.padEnd(8)} ${edit ? "✎ " : ""}${first}`;
  return [head, ...rest.map((l) => `${" ".repeat(18)}${l}`)].join("\n");
}
