/**
 * The one dispatcher that chat (the inbox step), the CLI and the HTTP API share: for each verb of
 * verbs/index.ts its permission and its handler. Handlers take a narrow context and return an
 * Outcome (data); rendering is separate (render/reply.ts reads the verbs' renderers).
 */
import type { SenderStanding } from "../../ports/permissions.js";
import type { CommandInput } from "../../domain/command-grammar.js";
import type { CommandPermission } from "../../domain/command-grammar.js";
import type { CommandPolicy, HandlerContext } from "./context.js";
import type { Outcome } from "./outcome.js";
import type { PermissionCheck } from "./permissions.js";
import { permissionFor } from "./permissions.js";
import { helpOutcome } from "./verbs/help.js";
import type { Command, CommandError, CommandVerb } from "./verbs/index.js";
import { COMMANDS, commandInfo, parseCommand } from "./verbs/index.js";

export interface CommandHandler {
  readonly verb: CommandVerb;
  readonly permission: CommandPermission;
  readonly handle: (ctx: HandlerContext, command: Command) => Promise<Outcome>;
}

export const COMMAND_HANDLERS = Object.fromEntries(
  COMMANDS.map((v): [CommandVerb, CommandHandler] => [
    v.verb,
    {
      verb: v.verb,
      permission: v.permission,
      // The grammar gives each verb's handler only commands of its own verb.
      handle: async (ctx, command) => v.handle(ctx, command as never, COMMANDS),
    },
  ]),
) as Readonly<Record<CommandVerb, CommandHandler>>;

/** Whether the sender may use the verb, and if not, a reason that says what they lack. */
export function checkPermission(
  verb: CommandVerb,
  standing: SenderStanding,
  policy: CommandPolicy,
): PermissionCheck {
  return permissionFor(commandInfo(verb), standing, policy);
}

/** `!dag help`: the commands the sender may use, or one explained. */
export function handleHelp(ctx: HandlerContext, topic: CommandVerb | null): Outcome {
  return helpOutcome(ctx, topic, COMMANDS);
}

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
  return COMMAND_HANDLERS[command.verb].handle(ctx, command);
}

/**
 * A malformed command's answer. When the verb was recognised and the sender may not use it, the
 * refusal comes first: someone without the power level learns that, not how to fix the syntax.
 */
export function commandErrorOutcome(ctx: HandlerContext, error: CommandError): Outcome {
  const refused = error.verb === null ? null : refusal(ctx, error.verb);
  return (
    refused ?? {
      kind: "command-error",
      message: error.message,
      helpLine: error.helpLine,
      ...(error.corrected === undefined ? {} : { corrected: error.corrected }),
    }
  );
}

/** Parses and runs one message; null when it is not a `!dag` command at all. */
export async function executeInput(ctx: HandlerContext, input: CommandInput): Promise<Outcome | null> {
  const parsed = parseCommand(input);
  if (parsed.kind === "not-a-command") return null;
  if (parsed.kind === "error") return commandErrorOutcome(ctx, parsed.error);
  return executeCommand(ctx, parsed.command);
}
