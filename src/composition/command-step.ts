/**
 * Wires the command table's inbox step into an engine node (no chat): the permission oracle, the
 * policy from the node config, and the DAG library read from the config's folder. Also how the CLI
 * writes a command into the inbox "as a command would" and waits for the leader's answer.
 *
 * Local commands are told apart by their sender: Matrix user ids always start with "@" (the
 * homeserver guarantees it for every event intake stores), so a sender without it can only have
 * been written by someone with the store's own credentials: the local operator.
 */
import { randomUUID } from "node:crypto";
import { lstat, readFile, realpath } from "node:fs/promises";
import { userInfo } from "node:os";
import { isAbsolute, join, relative } from "node:path";
import type { InboxDeps } from "../app/commands/inbox-step.js";
import { inboxStep, readOutcome } from "../app/commands/inbox-step.js";
import { isLocalSender, structuredCommandContent } from "../app/commands/inbox-intent.js";
import type { CommandPolicy, DagLibrary, HandlerContext } from "../app/commands/context.js";
import { withRoomPolicy } from "../app/commands/context.js";
import type { Command } from "../app/commands/verbs/index.js";
import type { Outcome } from "../app/commands/outcome.js";
import type { InboxStep } from "../app/leader.js";
import type { NodeConfig } from "../config/node-config.js";
import type { Logger } from "../ports/logger.js";
import type { PermissionOracle, SenderStanding } from "../ports/permissions.js";
import type { InboxEvent, Store } from "../ports/store.js";

export { isLocalSender };

/** The sender recorded for commands typed on this machine's CLI, e.g. `local:alice`. */
export function localSender(): string {
  let name = "operator";
  try {
    name = userInfo().username || name;
  } catch {
    // No passwd entry (some containers): the generic name will do.
  }
  return `local:${name.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 32)}`;
}

/** Local senders may do everything; chat users on an engine-only node have only the allowlist. */
export function localPermissions(config: NodeConfig): PermissionOracle {
  return {
    standing: async (_roomId, userId): Promise<SenderStanding> =>
      isLocalSender(userId)
        ? { kind: "local-operator" }
        : {
            kind: "room-member",
            powerLevel: 0,
            allowlisted: config.permissions.allow.includes(userId),
            // No room state to read: nobody in chat owns an engine-only room (the CLI does).
            adminLevel: 100,
          },
  };
}

export function commandPolicy(config: NodeConfig): CommandPolicy {
  return {
    requiredPowerLevel: config.permissions.powerLevel,
    allowlist: config.permissions.allow,
    twoPersonRule: config.permissions.twoPersonRule,
    autoConfirm: config.permissions.autoConfirm,
    hookAutoConfirm: config.permissions.hookAutoConfirm,
    logs: config.permissions.logs,
    confirmTimeoutMs: config.limits.confirmTimeoutMs,
    nodeStaleAfterMs: config.retention.nodeGoneAfterMs,
  };
}

/** Reads `<name>`, `<name>.toml` or `<name>.json` from the library folder (the name is already checked). */
export function libraryLoader(folder: string | null): DagLibrary {
  return async (name) => {
    if (folder === null) return { ok: false, message: "this node has no DAG library folder configured" };
    const candidates = /\.(toml|json)$/i.test(name) ? [name] : [`${name}.toml`, `${name}.json`];
    for (const file of candidates) {
      const read = await readLibraryFile(folder, file);
      if (read === null) continue;
      if ("refused" in read) return { ok: false, message: read.refused };
      return { ok: true, text: read.text, format: file.toLowerCase().endsWith(".json") ? "json" : "toml" };
    }
    return { ok: false, message: `no DAG named "${name}" in the library (${candidates.join(" or ")})` };
  };
}

/**
 * Reads one library file, refusing a symlink (or a link on the way) that leads out of the library
 * folder: whoever may write a link there must not make the bot publish any file it can read. Null when
 * the file does not exist.
 */
async function readLibraryFile(
  folder: string,
  file: string,
): Promise<{ text: string } | { refused: string } | null> {
  let target: string;
  let root: string;
  try {
    root = await realpath(folder);
    target = await realpath(join(folder, file));
  } catch {
    return null;
  }
  const inside = relative(root, target);
  if (inside === "" || inside.startsWith("..") || isAbsolute(inside)) {
    return {
      refused: `"${file}" in the DAG library is a link that leads out of the library folder; refused`,
    };
  }
  try {
    const stat = await lstat(target);
    if (!stat.isFile()) return { refused: `"${file}" in the DAG library is not a regular file; refused` };
    return { text: await readFile(target, "utf8") };
  } catch {
    return null;
  }
}

/** What the inbox step of a node with this config judges and answers commands with. */
export function commandInboxDeps(config: NodeConfig, store: Store, logger: Logger): InboxDeps {
  return {
    store,
    permissions: localPermissions(config),
    policy: commandPolicy(config),
    loadDag: libraryLoader(config.dagLibrary),
    logger,
    // Without [matrix] nothing sends the room's messages: do not queue them.
    queueMessages: config.matrix !== null,
  };
}

export function commandStep(config: NodeConfig, store: Store, logger: Logger): InboxStep {
  return inboxStep(commandInboxDeps(config, store, logger));
}

export interface CommandAnswer {
  row: InboxEvent;
  /** What the leader answered (each face says it in its own words: outcome-table.ts). */
  outcome: Outcome | null;
  /** The run the command created or acted on, when it names one. */
  runId: string | null;
  dagId: string | null;
}

/** A command given as data (`{ verb: "confirm", id: "x", hash: null }`), as the CLI and HTTP send them. */
export type CommandData = Command;

/** The inbox row content of a command: data for the CLI's own commands, or a message's text. */
export function commandContent(command: string | CommandData): Record<string, unknown> {
  return typeof command === "string"
    ? { msgtype: "m.text", body: command }
    : structuredCommandContent(command);
}

/**
 * Writes the command into the room's inbox as one from the local operator and waits until the
 * room's leader has handled and answered it. Null when no leader answered within `timeoutMs`.
 */
export async function sendLocalCommand(
  store: Store,
  roomId: string,
  body: string | CommandData,
  timeoutMs: number,
  policy: CommandPolicy,
): Promise<CommandAnswer | null> {
  return awaitLocalCommand(store, await queueLocalCommand(store, roomId, body), timeoutMs, policy);
}

/** Writes the command into the room's inbox as one from the local operator; returns its event id. */
export async function queueLocalCommand(
  store: Store,
  roomId: string,
  body: string | CommandData,
): Promise<string> {
  const [eventId] = await queueLocalCommands(store, roomId, [body]);
  return eventId;
}

/**
 * Queues commands to be taken in the order given: a leader takes the inbox by origin time, then
 * by event id (random here), so each is stamped a millisecond after the one before it.
 */
export async function queueLocalCommands<const B extends readonly (string | CommandData)[]>(
  store: Store,
  roomId: string,
  bodies: B,
): Promise<{ [K in keyof B]: string }> {
  const at = await store.now();
  const ids: string[] = [];
  for (const [i, body] of bodies.entries()) {
    const eventId = `cli.${randomUUID()}`;
    await store.insertInboxEvent({
      eventId,
      roomId,
      sender: localSender(),
      originServerTs: at + i,
      content: commandContent(body),
      seenBy: "cli",
    });
    ids.push(eventId);
  }
  return ids as { [K in keyof B]: string };
}

/**
 * The context a read command runs in on the CLI: the local operator, the room's stored policy, no
 * fence (a read changes nothing, and writes go through the leader's inbox instead).
 */
export async function localReadContext(
  store: Store,
  roomId: string,
  config: NodeConfig,
): Promise<HandlerContext> {
  const stored = await store.getRoomPolicy(roomId);
  const policy = commandPolicy(config);
  return {
    store,
    fence: null,
    roomId,
    sender: localSender(),
    eventId: null,
    standing: { kind: "local-operator" },
    policy: stored === null ? policy : withRoomPolicy(policy, stored.policy),
    loadDag: libraryLoader(config.dagLibrary),
  };
}

/** Whether some node serving the room has a heartbeat younger than `goneAfterMs` (retention.node_gone_after). */
export async function roomHasLiveNode(store: Store, roomId: string, goneAfterMs: number): Promise<boolean> {
  const nodes = await store.listNodes();
  return nodes.some((n) => n.roomIds.includes(roomId) && n.heartbeatAgeMs <= goneAfterMs);
}

/** Waits until the room's leader has handled and answered the command; null after `timeoutMs`. */
export async function awaitLocalCommand(
  store: Store,
  eventId: string,
  timeoutMs: number,
  policy: CommandPolicy,
): Promise<CommandAnswer | null> {
  const row = await waitForInbox(store, eventId, timeoutMs);
  if (row === null) return null;
  const outcome = await readOutcome({ store, policy }, row);
  // A gate's outcome names its run by id; the others that name one carry its summary.
  const run =
    outcome === null ? null : outcome.kind === "gate" ? outcome : "run" in outcome ? outcome.run : null;
  return { row, outcome, runId: run?.runId ?? null, dagId: run?.dagId ?? null };
}

async function waitForInbox(store: Store, eventId: string, timeoutMs: number): Promise<InboxEvent | null> {
  const deadline = Date.now() + timeoutMs;
  let wake: (() => void) | null = null;
  const unsubscribe = store.onChange(
    (topic) => {
      if (topic === "inbox" || topic === "outbox") wake?.();
    },
    ["inbox", "outbox"],
  );
  try {
    for (;;) {
      const row = await store.getInboxEvent(eventId);
      if (row !== null && row.status === "replied") return row;
      const left = deadline - Date.now();
      if (left <= 0) return null;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 250));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  } finally {
    unsubscribe();
  }
}
