/**
 * What the engine subcommands (run, node, submit, status, nodes, cancel, cap) share: the node config
 * (--config, else the package's config/local.toml), the store it names, a logger, and the settings
 * of the engine loops derived from the config. Errors here are the user's to fix: printed with the
 * key path, never a stack.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { createLogger } from "../adapters/log/pino-logger.js";
import { openStore } from "../adapters/store-factory.js";
import { openWithRetry } from "./store-retry.js";
import type { ConfigOverrides } from "../config/load-config.js";
import {
  CONFIG_PRECEDENCE_HELP,
  formatConfigIssues,
  loadConfig,
  parseConfig,
} from "../config/load-config.js";
import type { LogLevel, NodeConfig } from "../config/node-config.js";
import { describeStoreLocation } from "../config/store-location.js";
import type { EngineSettings } from "../app/node.js";
import { DEFAULT_LEADER_TIMINGS } from "../app/leader.js";
import type { Logger } from "../ports/logger.js";
import type { Store } from "../ports/store.js";

/** Exit status of a config or usage problem found before anything started. */
export const EXIT_CONFIG = 2;

/** A problem the user must fix; the CLI prints its message and exits with `exitCode`. */
export class CliError extends Error {
  override readonly name = "CliError";
  constructor(
    message: string,
    readonly exitCode: number = EXIT_CONFIG,
  ) {
    super(message);
  }
}

export interface CommonOptions {
  config?: string;
  store?: string;
  logLevel?: string;
}

/** The engine-only config shipped with the package: used when --config is absent. */
export function packagedLocalConfig(): string | null {
  const path = fileURLToPath(new URL("../../config/local.toml", import.meta.url));
  return existsSync(path) ? path : null;
}

/** The actions of config/local.toml, which the example DAGs use (also the demo's nodes' actions). */
export const LOCAL_ACTIONS = {
  echo: { argv: ["echo", "{message}"], args: { message: { pattern: "[^\\r\\n]{0,200}" } }, timeout: "1m" },
  sleep: {
    argv: ["sleep", "{seconds}"],
    args: { seconds: { pattern: "[0-9]{1,3}(\\.[0-9]{1,3})?" } },
    timeout: "20m",
  },
  true: { argv: ["true"], timeout: "1m" },
  fail: { argv: ["false"], timeout: "1m" },
};

/** The built-in equivalent of config/local.toml, for an install that lacks the file. */
const BUILTIN_CONFIG: Record<string, unknown> = {
  node_id: "local",
  labels: ["linux"],
  capacity: 2,
  actions: LOCAL_ACTIONS,
};

export const CONFIG_OPTION_HELP =
  "node config file (.toml or .json); without it, the package's config/local.toml (an engine-only node with the example actions)";

/** Adds --config, --store and --log-level, and the precedence paragraph, to a subcommand. */
export function withCommonOptions(command: Command, extraHelp = ""): Command {
  return command
    .option("-c, --config <file>", CONFIG_OPTION_HELP)
    .option(
      "--store <url>",
      'store location: "sqlite:PATH" or a postgres:// URL (overrides DAGBOT_STORE and the file)',
    )
    .option(
      "--log-level <level>",
      "fatal, error, warn, info, debug, trace or silent (overrides DAGBOT_LOG_LEVEL)",
    )
    .addHelpText("after", `\n${wrap(CONFIG_PRECEDENCE_HELP)}${extraHelp === "" ? "" : `\n\n${extraHelp}`}`);
}

function wrap(text: string, width = 100): string {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line !== "" && line.length + word.length + 1 > width) {
      lines.push(line);
      line = word;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  if (line !== "") lines.push(line);
  return lines.join("\n");
}

/**
 * Loads the config with args > env > file; throws CliError naming every bad key. `storeOnly`: the
 * command never talks to the homeserver, so a bot's config needs no access token for it.
 */
export function resolveConfig(
  options: CommonOptions,
  extra: ConfigOverrides = {},
  { storeOnly = false }: { storeOnly?: boolean } = {},
): NodeConfig {
  const file = options.config ?? packagedLocalConfig() ?? undefined;
  const overrides: ConfigOverrides = { ...extra };
  if (options.store !== undefined) overrides.store = options.store;
  if (options.logLevel !== undefined) overrides.logLevel = options.logLevel;
  const result =
    file === undefined
      ? parseConfig(BUILTIN_CONFIG, { env: process.env, overrides, needsMatrixToken: !storeOnly })
      : loadConfig({ file, env: process.env, overrides, needsMatrixToken: !storeOnly });
  if (!result.ok) {
    const where = file === undefined ? "the built-in config" : file;
    throw new CliError(`invalid config (${where}):\n${indent(formatConfigIssues(result.issues))}`);
  }
  return result.config;
}

function indent(text: string): string {
  return text
    .split("\n")
    .map((l) => `  ${l}`)
    .join("\n");
}

export function makeLogger(config: NodeConfig, level?: LogLevel): Logger {
  return createLogger({ level: level ?? config.logLevel });
}

/** Opens the config's store; a failure is a CliError (exit 1) whose message holds no password. */
export async function openConfiguredStore(config: NodeConfig): Promise<Store> {
  try {
    return await openStore(config.store, { poolSize: config.storePoolSize });
  } catch (err) {
    throw new CliError(
      `cannot open the store ${describeStoreLocation(config.store)}: ${storeErrorText(err)}`,
      1,
    );
  }
}

function storeErrorText(err: unknown): string {
  return scrub(err instanceof Error ? err.message : String(err));
}

/**
 * A node's store: a store that cannot be reached yet is retried with backoff (logged per attempt)
 * until it opens or `stopped` resolves (then null); one that refuses this config is a CliError (exit 2).
 */
export async function openNodeStore(
  config: NodeConfig,
  logger: Logger,
  stopped: Promise<void>,
): Promise<Store | null> {
  try {
    return await openWithRetry(
      () => openStore(config.store, { poolSize: config.storePoolSize }),
      logger.child({ store: describeStoreLocation(config.store) }),
      storeErrorText,
      stopped,
    );
  } catch (err) {
    throw new CliError(
      `cannot open the store ${describeStoreLocation(config.store)}: ${storeErrorText(err)}`,
      EXIT_CONFIG,
    );
  }
}

function scrub(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/[^:/?#@\s]*:)[^@/?#\s]+@/gi, "$1[redacted]@");
}

/** The engine loop settings a node config implies. */
export function engineSettings(config: NodeConfig, overrides: Partial<EngineSettings> = {}): EngineSettings {
  return {
    nodeId: config.nodeId,
    labels: config.labels,
    capacity: config.capacity,
    roomIds: config.rooms,
    actions: new Map(Object.entries(config.actions)),
    lease: { ...config.lease },
    leader: {
      ...DEFAULT_LEADER_TIMINGS,
      wakeLiveWithinMs: 3 * Math.max(config.lease.renewEveryMs, Math.floor(config.lease.ttlMs / 2)),
    },
    // A task lease as long as the room lease: a killed worker's task is retried after the same TTL
    // a killed leader's room is taken over after.
    taskLeaseMs: config.lease.ttlMs,
    // Renewed like the room lease; the config guarantees renew_every + margin + kill_grace < ttl.
    taskRenewEveryMs: config.lease.renewEveryMs,
    taskMarginMs: config.lease.marginMs,
    // Twice per lease TTL (`nodes --check` wants a heartbeat younger than the TTL): a follower's
    // idle cost is mostly this, its lease attempts at the holder's expiry and the claim tick.
    heartbeatEveryMs: Math.max(config.lease.renewEveryMs, Math.floor(config.lease.ttlMs / 2)),
    // The slow safety tick: work arrives by the leader's targeted wake-ups (issue 16).
    workerPollMs: 10_000,
    work: true,
    initialCap: config.limits.globalCap,
    retention: {
      finishedMs: config.retention.finishedMs,
      forgetNodesAfterMs: config.retention.forgetNodesAfterMs,
      // A tenth of the shorter retention, between 1 s and a minute: a row outlives its retention by
      // at most that, and a leader with nothing to prune reads a few rows a minute.
      everyMs: Math.min(
        60_000,
        Math.max(
          1_000,
          Math.floor(Math.min(config.retention.finishedMs, config.retention.forgetNodesAfterMs) / 10),
        ),
      ),
    },
    policy: {
      wanted: {
        powerLevel: config.permissions.powerLevel,
        allow: config.permissions.allow,
        twoPersonRule: config.permissions.twoPersonRule,
        autoConfirm: config.permissions.autoConfirm,
        logs: config.permissions.logs,
      },
      stated: config.permissions.stated,
    },
    ...overrides,
  };
}

/**
 * Whether output to `stream` may be coloured: only on a terminal, and not when NO_COLOR is set to
 * anything but the empty string (https://no-color.org).
 */
export function colorFor(stream: { isTTY?: boolean }): boolean {
  return stream.isTTY === true && (process.env["NO_COLOR"] ?? "") === "";
}

/** Runs a subcommand body, turning CliError into its message and exit status. */
export async function runCli(name: string, body: () => Promise<number | void>): Promise<void> {
  try {
    const code = await body();
    if (typeof code === "number") process.exitCode = code;
  } catch (err) {
    if (err instanceof CliError) {
      process.stderr.write(`dagbot ${name}: ${err.message}\n`);
      process.exitCode = err.exitCode;
      return;
    }
    throw err;
  }
}

/** The one room a command acts on: --room, else the config's only room, else an error listing them. */
export function pickRoom(config: NodeConfig, room: string | undefined): string {
  if (room !== undefined) {
    if (!config.rooms.includes(room)) {
      throw new CliError(`room ${room} is not one of this node's rooms (${config.rooms.join(", ")})`);
    }
    return room;
  }
  const [only, ...rest] = config.rooms;
  if (only === undefined) throw new CliError("the config names no room");
  if (rest.length > 0)
    throw new CliError(`the config names several rooms; pick one with --room (${config.rooms.join(", ")})`);
  return only;
}
