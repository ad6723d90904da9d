/**
 * The node config a command runs with: the given file (else the package's config/local.toml, else a
 * built-in equivalent), store and log level overrides over the environment over the file, and the
 * room a command acts on. Errors name the key path (SetupError, exit 2). The CLI's options map onto
 * CommonOptions (src/cli/config-options.ts); this module never sees argv.
 */
import { existsSync } from "node:fs";
import type { ConfigOverrides } from "../config/load-config.js";
import { formatConfigIssues, loadConfig, parseConfig } from "../config/load-config.js";
import type { NodeConfig } from "../config/node-config.js";
import { SetupError } from "./setup-error.js";
import { packageFile } from "../package-files.js";

export interface CommonOptions {
  config?: string;
  store?: string;
  logLevel?: string;
}

/** The engine-only config shipped with the package: used when --config is absent. */
export function packagedLocalConfig(): string | null {
  const path = packageFile("config/local.toml");
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

/**
 * Loads the config with args > env > file; throws SetupError naming every bad key. `storeOnly`: the
 * command never talks to the homeserver, so a bot's config needs no access token for it. `edge`:
 * the command runs an edge node's config (only `dagbot node`); every other command needs a store,
 * which an edge's config does not name (docs/operations.md, "Edge nodes").
 */
export function resolveConfig(
  options: CommonOptions,
  extra: ConfigOverrides = {},
  { storeOnly = false, edge = false }: { storeOnly?: boolean; edge?: boolean } = {},
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
    throw new SetupError(`invalid config (${where}):\n${indent(formatConfigIssues(result.issues))}`);
  }
  if (result.config.edge !== null && !edge)
    throw new SetupError(
      `${file ?? "the config"} is an edge node's ([edge]): it names no store, and only 'dagbot node' runs it; give this command a core node's config`,
    );
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
      throw new SetupError(`room ${room} is not one of this node's rooms (${config.rooms.join(", ")})`);
    }
    return room;
  }
  const [only, ...rest] = config.rooms;
  if (only === undefined) throw new SetupError("the config names no room");
  if (rest.length > 0)
    throw new SetupError(`the config names several rooms; pick one with --room (${config.rooms.join(", ")})`);
  return only;
}
