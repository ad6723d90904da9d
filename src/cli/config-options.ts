/**
 * The options every subcommand shares: --config, --store and --log-level, with the precedence
 * paragraph in its help. Resolving them into a NodeConfig is the composition's
 * (src/composition/config-resolve.ts).
 */
import type { Command } from "commander";
import { CONFIG_PRECEDENCE_HELP } from "../config/load-config.js";

export type { CommonOptions } from "../composition/config-resolve.js";
export { pickRoom, resolveConfig } from "../composition/config-resolve.js";

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
