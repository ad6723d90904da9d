/**
 * What a command verb is, declared once in its own file under verbs/ (the model is Draupnir's
 * describeCommand): its arguments as data (or its own grammar), usage, summary and help, its
 * permission, its handler, the renderers of the outcomes it answers with, and how the CLI types it.
 * The parser, the handler table, help, the reply renderer and the CLI's inbox subcommands are all
 * built from the list in verbs/index.ts.
 */
import type { ArgSpec, CommandPermission, GrammarLookup, Parsed } from "../../domain/command-grammar.js";
import { usageOf } from "../../domain/command-grammar.js";
import type { Rendered } from "../render/html.js";
import type { CommandPolicy, HandlerContext } from "./context.js";
import type { Outcome, OutcomeKind } from "./outcome.js";

/** The renderer of each outcome kind a verb answers with. */
export type OutcomeRenderers<K extends OutcomeKind> = {
  readonly [P in K]: (outcome: Extract<Outcome, { kind: P }>) => Rendered | null;
};

/**
 * How `dagbot <verb>` types the command on a node and hands it to the room's leader through the
 * inbox (src/cli/subcommands/inbox-verbs.ts). Only for a verb whose arguments are declared.
 */
export interface VerbCli {
  readonly description: string;
  /** Help after the options, before the exit statuses. */
  readonly about?: string;
  /** What exit status 0 means: `0 ${took}`. */
  readonly took: string;
  /** Whether the answer means the command took effect (or had already): exit status 0. */
  readonly tookEffect: (outcome: Outcome | null) => boolean;
  /** Offers --json (the answer as one JSON object). */
  readonly json: boolean;
}

interface VerbBase<C extends { verb: string }, K extends OutcomeKind> {
  readonly verb: C["verb"];
  /** The help line: what it does. */
  readonly summary: string;
  readonly permission: CommandPermission;
  /** An operator verb that the room's policy may open to everyone (logs: `!dag policy logs anyone`). */
  readonly openWhen?: (policy: CommandPolicy) => boolean;
  /** Extra lines for `!dag help <verb>`. */
  readonly details: readonly string[];
  /** `verbs`: the whole list, for the verb that describes the others (help). */
  handle(ctx: HandlerContext, command: C, verbs: readonly AnyVerb[]): Promise<Outcome> | Outcome;
  readonly render: OutcomeRenderers<K>;
  readonly cli?: VerbCli;
}

/** A verb with its arguments declared as data: the parser, usage and help read them. */
interface DeclaredArgs {
  readonly args: readonly ArgSpec[];
}

/** A verb with a grammar of its own (help, publish, run, nodes, policy). */
interface OwnGrammar<C> {
  /** How to type it: the help line. */
  readonly usage: string;
  readonly parse: (args: string[], after: string, grammar: GrammarLookup) => Parsed<C>;
  readonly takesCodeBlock?: boolean;
  readonly same?: (a: C, b: C) => boolean;
}

export type VerbDeclaration<C extends { verb: string }, K extends OutcomeKind> = VerbBase<C, K> &
  (DeclaredArgs | OwnGrammar<C>);

/** A declared verb: everything the grammar, the table, help and the CLI read. */
export interface Verb<C extends { verb: string }, K extends OutcomeKind> extends VerbBase<C, K> {
  readonly usage: string;
  readonly args?: readonly ArgSpec[];
  readonly parse?: (args: string[], after: string, grammar: GrammarLookup) => Parsed;
  readonly takesCodeBlock?: boolean;
  readonly same?: (a: { verb: string }, b: { verb: string }) => boolean;
}

/** Any verb of the list, as the table and help see it. */
export type AnyVerb = Verb<{ verb: string }, never>;

/** The command a verb parses into. */
export type CommandOf<T> = T extends Verb<infer C, infer _K> ? C : never;
/** The outcome kinds a verb renders. */
export type RenderedKindOf<T> = T extends Verb<infer _C, infer K> ? K : never;

export function defineVerb<C extends { verb: string }, K extends OutcomeKind>(
  declaration: VerbDeclaration<C, K>,
): Verb<C, K> {
  if ("args" in declaration) return { ...declaration, usage: usageOf(declaration.verb, declaration.args) };
  // The grammar calls `same` only with two commands of this verb.
  return declaration as Verb<C, K>;
}
