/**
 * The node config of a subcommand: --config (else the package's config/local.toml, else a built-in
 * equivalent), --store and --log-level over the environment over the file, and the room a command
 * acts on. Errors name the key path (CliError, exit 2).
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import type { ConfigOverrides } from "../config/load-config.js";
import {
  CONFIG_PRECEDENCE_HELP,
  formatConfigIssues,
  loadConfig,
  parseConfig,
} from "../config/load-config.js";
import type { NodeConfig } from "../config/node-config.js";
import { CliError } from "./cli-error.js";

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
