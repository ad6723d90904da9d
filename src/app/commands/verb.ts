/**
 * What a command verb is, declared once in its own file under verbs/ (the model is Draupnir's
 * describeCommand): its arguments as data (or its own grammar), usage, summary and help, its
 * permission, its handler, the renderers of the outcomes it answers with (chat), and its CLI
 * subcommand and HTTP route. The parser, the handler table, help, the reply renderer, the CLI's
 * subcommands and the HTTP routes (so the OpenAPI document) are all built from the list in
 * verbs/index.ts. Each outcome kind has one renderer, beside the verb that gives it (or, for the
 * answers any verb may give, in common-outcomes.ts), for chat, the CLI and HTTP alike; the outcome
 * table (outcome-table.ts) keeps only HTTP statuses and exit statuses. Adding a verb, even with an
 * outcome kind of its own: its file and one line in VERBS.
 */
import type {
  ArgSpec,
  CommandPermission,
  DataFieldCheck,
  GrammarLookup,
  Parsed,
} from "../../domain/command-grammar.js";
import { usageOf } from "../../domain/command-grammar.js";
import type { z } from "zod";
import type { Rendered } from "../render/html.js";
import type { CommandPolicy, HandlerContext } from "./context.js";
import type { Outcome, OutcomeKind } from "./outcome.js";
import type { Idiom } from "./face.js";
import type { HttpAnswer } from "./outcome-table.js";
import type * as HttpShapes from "./http-shapes.js";

/**
 * The one renderer of an outcome kind, for every face: chat reads the HTML and the plain body, the
 * CLI prints the body, HTTP gives it as a problem's detail. The face's idiom names other commands
 * (`!dag confirm x`, `dagbot confirm x`, `POST /v1/runs/x/confirm`) and says whether it is chat.
 * Null: no reply in chat (the text faces then say nothing either). `aside`: a line the CLI prints
 * beside the answer, on stderr (a next page).
 */
export type OutcomeRenderer<O> = (outcome: O, say: Idiom) => (Rendered & { readonly aside?: string }) | null;

/** The renderer of each outcome kind a verb answers with. */
export type OutcomeRenderers<K extends OutcomeKind> = {
  readonly [P in K]: OutcomeRenderer<Extract<Outcome, { kind: P }>>;
};

/**
 * An outcome kind a verb brings with it (the outcome table does not know it): its renderer, and its
 * HTTP answer and CLI exit status, which the table gives for the kinds it knows.
 */
export interface NewOutcome<O extends { kind: string }> {
  readonly render: OutcomeRenderer<O>;
  readonly http: (outcome: O) => HttpAnswer;
  readonly exit: (outcome: O) => number;
}

/** A verb's own outcome kinds, by kind. */
export type NewOutcomes<N extends { kind: string }> = {
  readonly [P in N["kind"]]: NewOutcome<Extract<N, { kind: P }>>;
};

/** A positional argument of a verb's CLI subcommand (one with its own grammar says its own). */
export interface CliArg {
  readonly name: string;
  readonly about: string;
  readonly optional?: boolean;
  /** Takes the rest of the words (`[params...]`); last only. */
  readonly variadic?: boolean;
}

/** An option of a verb's CLI subcommand besides the common ones (`--limit <n>`). */
export interface CliOption {
  /** Commander's form: `--limit <n>`. */
  readonly flags: string;
  readonly about: string;
  readonly default?: string;
}

/**
 * `dagbot <verb>` (src/cli/subcommands/verb-commands.ts builds it): its arguments, --help, --json,
 * --room and, for a verb that writes, --wait; the command it builds goes to the room's leader through
 * the inbox AS DATA (a verb that writes), or runs against the store (a read, opened only if it
 * exists). Its exit status comes from the outcome table (outcome-table.ts), its text from the
 * renderer of the outcome (outcome-faces.ts).
 */
export interface VerbCli<C> {
  /** The subcommand's name when it is not the verb's (`run` is `dagbot trigger`). */
  readonly name?: string;
  readonly description: string;
  /** Help after the options, before the exit statuses. */
  readonly about?: string;
  /** Its own positional arguments, and the command they and its options make. */
  readonly args?: readonly CliArg[];
  readonly options?: readonly CliOption[];
  /**
   * The command (checked by the grammar's rules for data). A read may make another read verb's
   * command (`dagbot status` without a run is the list): that verb handles it.
   */
  readonly command?: (
    values: ReadonlyArray<string | readonly string[] | undefined>,
    options?: Readonly<Record<string, unknown>>,
  ) => C | { verb: string };
  /**
   * The JSON data of a success outcome, when it is not the outcome's own (kept field names); the
   * CLI adds `ok`, `answer` and `room`. A failure's JSON is always the outcome's own data.
   */
  readonly json?: (outcome: Outcome) => Record<string, unknown> | null;
  /** A usage error in the command it made, found before the store is read (exit 2), or null. */
  readonly check?: (command: { verb: string }) => string | null;
  /** Offers --confirm: a new run the answer creates awaiting confirmation is confirmed at once. */
  readonly confirmOption?: boolean;
  /**
   * While no node of the room runs, the command is queued and that is success (exit 0): the first
   * leader applies it before it schedules anything (cap). Otherwise that is exit 3.
   */
  readonly queuesWithoutNode?: boolean;
  /**
   * While no node leads the room (its nodes' [permissions] disagree with the room's policy), the CLI
   * handles the command itself under the room's lease, as a leader would: the way out of that room.
   */
  readonly selfLeads?: boolean;
}

/** The shape of an HTTP request's parts once its schemas have checked them. */
/**
 * The zod shapes of HTTP inputs and answers (http-shapes.ts). A verb's routes are made from them
 * when the HTTP API is built, which hands them over: no other face builds the schemas, so a command
 * that serves no HTTP starts without them (bench/README.md, "`dagbot run` of a one-task DAG").
 */
export type Shapes = typeof HttpShapes;

export interface HttpInput {
  readonly params: Readonly<Record<string, string>>;
  readonly body: unknown;
  readonly query: Readonly<Record<string, unknown>>;
}

/**
 * The verb's HTTP route (src/adapters/http/verb-routes.ts builds it, and so its OpenAPI entry): the
 * method and path, the schemas of its path parameters, query and body, the command they make, and
 * the answer's data for each outcome that is a success (the outcome table gives the status; every
 * other outcome is a problem the table names).
 */
export interface VerbHttp<C, N extends { kind: string } = never> {
  readonly method: "GET" | "POST" | "PUT" | "DELETE";
  /** Fastify's form: `/v1/runs/:id/confirm`; a `:room` parameter names the room. */
  readonly path: string;
  readonly summary: string;
  readonly params?: z.ZodType;
  readonly query?: z.ZodType;
  readonly body?: z.ZodType;
  /** The success answer's schema (the OpenAPI document shows it). */
  readonly response: z.ZodType;
  readonly command: (input: HttpInput) => C;
  /** The answer's data for a success outcome; null for one that is not (then it is a problem). */
  readonly answer: (outcome: Outcome | N) => Record<string, unknown> | null;
  /** Headers of a success answer (a read's Link to its next page). */
  readonly headers?: (outcome: Outcome | N, input: HttpInput) => Readonly<Record<string, string>>;
}

/**
 * What people do with a verb: `!dag help` lists the verbs by these, in this order (the help verb's
 * own group is said by help's last line).
 */
export const VERB_GROUPS = {
  run: "Run DAGs",
  follow: "Follow runs",
  room: "Schedules and the room",
  help: "Help",
} as const;
export type VerbGroup = keyof typeof VERB_GROUPS;

interface VerbBase<C extends { verb: string }, K extends OutcomeKind, N extends { kind: string } = never> {
  readonly verb: C["verb"];
  /** The help line: what it does. */
  readonly summary: string;
  /** Where `!dag help` lists it. */
  readonly group: VerbGroup;
  readonly permission: CommandPermission;
  /** An operator verb that the room's policy may open to everyone (logs: `!dag policy logs anyone`). */
  readonly openWhen?: (policy: CommandPolicy) => boolean;
  /**
   * An open verb that the room's policy may keep to operators (graph: `!dag policy graph operators`);
   * its handler refuses with its own reason, help marks it as an operator's.
   */
  readonly closedWhen?: (policy: CommandPolicy) => boolean;
  /** Extra lines for `!dag help <verb>`. */
  readonly details: readonly string[];
  /** `verbs`: the whole list, for the verb that describes the others (help). */
  handle(ctx: HandlerContext, command: C, verbs: readonly AnyVerb[]): Promise<Outcome | N> | Outcome | N;
  readonly render: OutcomeRenderers<K>;
  /**
   * Outcome kinds of its own, which no other verb gives and the outcome table does not know: a new
   * kind is declared here, in the verb's file, and nowhere else (docs/architecture.md §5).
   */
  readonly outcomes?: NewOutcomes<N>;
  /** It changes the room (through the leader's inbox): the CLI and HTTP send it there, never run it. */
  readonly writes?: boolean;
  /**
   * A command of a verb that writes which only reads (`policy` without a change): the CLI runs it
   * on the store as a read, and its HTTP route is a GET. Absent: every command of the verb writes.
   */
  readOnly?(command: C): boolean;
  readonly cli?: VerbCli<C>;
  /** Its route; a verb with sub-actions (schedule pause|resume|delete) may have one per action. */
  readonly http?: (shapes: Shapes) => VerbHttp<C, N> | readonly VerbHttp<C, N>[];
  /**
   * How an HTTP answer names a command of this verb given its words as the CLI takes them, when its
   * first route's path cannot say it (a verb whose routes differ by what its words are: policy).
   */
  readonly httpWords?: (args: readonly string[]) => string;
}

/** The HTTP routes a verb declares, none, one or several, made with the shapes of http-shapes.ts. */
export function httpRoutesOf<C extends { verb: string }>(
  verb: { readonly http?: (shapes: Shapes) => VerbHttp<C> | readonly VerbHttp<C>[] },
  shapes: Shapes,
): readonly VerbHttp<C>[] {
  const http = verb.http?.(shapes);
  if (http === undefined) return [];
  return Array.isArray(http) ? (http as readonly VerbHttp<C>[]) : [http as VerbHttp<C>];
}

/** A verb with its arguments declared as data: the parser, usage and help read them. */
interface DeclaredArgs {
  readonly args: readonly ArgSpec[];
  /** Fields only the CLI and HTTP give (a page size, every task), each with its check. */
  readonly dataFields?: Readonly<Record<string, DataFieldCheck>>;
}

/** A verb with a grammar of its own (help, publish, run, nodes, policy). */
interface OwnGrammar<C> {
  /** How to type it: the help line. */
  readonly usage: string;
  readonly parse: (args: string[], after: string, grammar: GrammarLookup) => Parsed<C>;
  readonly takesCodeBlock?: boolean;
  readonly same?: (a: C, b: C) => boolean;
  /** The command given as data (CLI, HTTP): checked as strictly as its text. */
  readonly fromData?: (data: Readonly<Record<string, unknown>>) => Parsed<C>;
}

export type VerbDeclaration<
  C extends { verb: string },
  K extends OutcomeKind,
  N extends { kind: string } = never,
> = VerbBase<C, K, N> & (DeclaredArgs | OwnGrammar<C>);

/** A declared verb: everything the grammar, the table, help and the CLI read. */
export interface Verb<
  C extends { verb: string },
  K extends OutcomeKind,
  N extends { kind: string } = never,
> extends VerbBase<C, K, N> {
  readonly usage: string;
  readonly args?: readonly ArgSpec[];
  readonly dataFields?: Readonly<Record<string, DataFieldCheck>>;
  readonly parse?: (args: string[], after: string, grammar: GrammarLookup) => Parsed;
  readonly takesCodeBlock?: boolean;
  readonly same?: (a: { verb: string }, b: { verb: string }) => boolean;
  readonly fromData?: (data: Readonly<Record<string, unknown>>) => Parsed;
}

/** Any verb of the list, as the table and help see it. */
export type AnyVerb = Verb<{ verb: string }, never>;

/** The command a verb parses into. */
export type CommandOf<T> = T extends Verb<infer C, infer _K, infer _N> ? C : never;
/** The outcome kinds a verb renders. */
export type RenderedKindOf<T> = T extends Verb<infer _C, infer K, infer _N> ? K : never;

export function defineVerb<
  C extends { verb: string },
  K extends OutcomeKind,
  N extends { kind: string } = never,
>(declaration: VerbDeclaration<C, K, N>): Verb<C, K, N> {
  if ("args" in declaration) return { ...declaration, usage: usageOf(declaration.verb, declaration.args) };
  // The grammar calls `same` only with two commands of this verb.
  return declaration as Verb<C, K, N>;
}
