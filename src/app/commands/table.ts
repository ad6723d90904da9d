/**
 * The one command table that chat (the inbox step), the CLI and the HTTP API share: for each verb
 * of DESIGN.md §5 its permission (from the domain command table) and its handler. Handlers take a
 * narrow context and return an Outcome (data); rendering is separate (src/app/render).
 */
import type { CommandPermission, CommandVerb } from "../../domain/command-table.js";
import { commandInfo } from "../../domain/command-table.js";
import type { Command, CommandError, CommandInput } from "../../domain/commands.js";
import { parseCommand } from "../../domain/commands.js";
import type { HandlerContext } from "./context.js";
import { handleCap, handleDecision } from "./handlers/decisions.js";
import { handlePolicy } from "./handlers/policy.js";
import { handlePublish, handleRetry, handleRun } from "./handlers/publish.js";
import {
  handleGraph,
  handleHelp,
  handleList,
  handleLogs,
  handleNodes,
  handleSchedules,
  handleStatus,
} from "./handlers/reads.js";
import type { Outcome } from "./outcome.js";
import { checkPermission } from "./permissions.js";

export interface CommandHandler<V extends CommandVerb> {
  readonly verb: V;
  readonly permission: CommandPermission;
  readonly handle: (ctx: HandlerContext, command: Extract<Command, { verb: V }>) => Promise<Outcome>;
}

function entry<V extends CommandVerb>(
  verb: V,
  handle: (ctx: HandlerContext, command: Extract<Command, { verb: V }>) => Promise<Outcome> | Outcome,
): CommandHandler<V> {
  return {
    verb,
    permission: commandInfo(verb).permission,
    handle: async (ctx, command) => handle(ctx, command),
  };
}

export const COMMAND_HANDLERS: { readonly [V in CommandVerb]: CommandHandler<V> } = {
  help: entry("help", (ctx, c) => handleHelp(ctx, c.topic)),
  publish: entry("publish", (ctx, c) => handlePublish(ctx, c.source)),
  run: entry("run", (ctx, c) => handleRun(ctx, c.id, c.params)),
  confirm: entry("confirm", (ctx, c) => handleDecision(ctx, "confirm", c.id, c.hash)),
  reject: entry("reject", (ctx, c) => handleDecision(ctx, "reject", c.id)),
  cancel: entry("cancel", (ctx, c) => handleDecision(ctx, "cancel", c.id)),
  status: entry("status", (ctx, c) => handleStatus(ctx, c.id)),
  list: entry("list", (ctx, c) => handleList(ctx, c.id ?? null)),
  schedules: entry("schedules", (ctx) => handleSchedules(ctx)),
  logs: entry("logs", (ctx, c) => handleLogs(ctx, c.id, c.task)),
  graph: entry("graph", (ctx, c) => handleGraph(ctx, c.id)),
  retry: entry("retry", (ctx, c) => handleRetry(ctx, c.id)),
  nodes: entry("nodes", (ctx, c) => handleNodes(ctx, c.verbose === true)),
  cap: entry("cap", (ctx, c) => handleCap(ctx, c.n)),
  policy: entry("policy", (ctx, c) => handlePolicy(ctx, c.change)),
};

/** Is this sender allowed the verb? A refusal is an outcome and nothing is stored. */
export function refusal(ctx: HandlerContext, verb: CommandVerb): Outcome | null {
  const check = checkPermission(verb, ctx.standing, ctx.policy);
  return check.ok
    ? null
    : { kind: "refused", verb, reason: check.reason, helpLine: `usage: ${commandInfo(verb).usage}` };
}

/** Runs a parsed command: permission first, then its handler. */
export async function executeCommand(ctx: HandlerContext, command: Command): Promise<Outcome> {
  const refused = refusal(ctx, command.verb);
  if (refused !== null) return refused;
  const handler = COMMAND_HANDLERS[command.verb] as CommandHandler<CommandVerb>;
  return handler.handle(ctx, command as never);
}

/**
 * A malformed command's answer. When the verb was recognised and the sender may not use it, the
 * refusal comes first: someone without the power level learns that, not how to fix the syntax.
 */
export function commandErrorOutcome(ctx: HandlerContext, error: CommandError): Outcome {
  const refused = error.verb === null ? null : refusal(ctx, error.verb);
  return refused ?? { kind: "command-error", message: error.message, helpLine: error.helpLine };
}

/** Parses and runs one message; null when it is not a `!dag` command at all. */
export async function executeInput(ctx: HandlerContext, input: CommandInput): Promise<Outcome | null> {
  const parsed = parseCommand(input);
  if (parsed.kind === "not-a-command") return null;
  if (parsed.kind === "error") return commandErrorOutcome(ctx, parsed.error);
  return executeCommand(ctx, parsed.command);
}
