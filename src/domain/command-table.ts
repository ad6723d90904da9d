/**
 * The `!dag` commands as data (DESIGN.md §5): verb, usage, summary and who may use it. Help text
 * for chat, the CLI and HTTP is rendered from this one table.
 */

export const COMMAND_VERBS = [
  "help",
  "publish",
  "run",
  "confirm",
  "reject",
  "cancel",
  "status",
  "list",
  "schedules",
  "logs",
  "graph",
  "retry",
  "nodes",
  "cap",
  "policy",
] as const;
export type CommandVerb = (typeof COMMAND_VERBS)[number];

/** `operator`: a room power level (default 50) or an allowlisted user id; `open`: any room member. */
export type CommandPermission = "open" | "operator";

/**
 * One positional argument of a verb, as data: the parser (commands.ts), the usage line and help all
 * read it, so a verb's arguments are declared once.
 */
export interface ArgSpec {
  /** Its name in the usage line (`<id>`) and its field in the parsed command. */
  readonly name: "id" | "task" | "hash" | "n";
  readonly kind: "run-id" | "task-id" | "hash" | "cap";
  /** What it is, said when it is missing: `missing <id>, the id of a DAG run`. */
  readonly about: string;
  /** Optional arguments come last; absent they parse as null. */
  readonly optional?: boolean;
}

export interface CommandInfo {
  readonly verb: CommandVerb;
  /** The help line: how to type it (derived from `args` where the verb declares them). */
  readonly usage: string;
  /** Its arguments; absent for the verbs with a grammar of their own (help, publish, nodes, policy). */
  readonly args?: readonly ArgSpec[];
  readonly summary: string;
  readonly permission: CommandPermission;
  /** Extra lines for `!dag help <verb>`. */
  readonly details: readonly string[];
}

/** The largest `!dag cap`: far above any real room, low enough that a typo like 1000000 is refused. */
export const MAX_CAP = 10_000;

const RUN_ID: ArgSpec = { name: "id", kind: "run-id", about: "the id of a DAG run" };

/** A verb whose usage line is its arguments: `!dag logs <id> <task>`, `!dag status [<id>]`. */
function withArgs(info: Omit<CommandInfo, "usage" | "args">, args: readonly ArgSpec[]): CommandInfo {
  const shown = args.map((a) => (a.optional === true ? ` [<${a.name}>]` : ` <${a.name}>`)).join("");
  return { ...info, usage: `!dag ${info.verb}${shown}`, args };
}

export const COMMANDS: readonly CommandInfo[] = [
  {
    verb: "help",
    usage: "!dag help [<command>]",
    summary: "list the commands, or explain one",
    permission: "open",
    details: [],
  },
  {
    verb: "publish",
    usage: "!dag publish <name> | !dag publish + a ```json or ```toml code block",
    summary: "publish a DAG from the library folder or inline; it waits for confirm",
    permission: "operator",
    details: [
      "The code block goes after the command, in the same message:",
      "!dag publish",
      "```toml",
      'id = "hello"',
      "[[tasks]]",
      'id = "greet"',
      'action = "echo"',
      "```",
      "A block without a language is read as JSON when it starts with { and as TOML otherwise.",
      "<name> is a DAG file of the node's library folder (letters, digits, _ . -).",
    ],
  },
  {
    verb: "run",
    usage: "!dag run <id> [<name>=<value> ...]",
    summary: "start a new run of a published DAG, with values for its parameters",
    permission: "operator",
    details: [
      "The run gets its own id (<id>.2, <id>.3, ...), status card and history (`!dag list <id>`);",
      "<id> may also name one of its runs (<id>.2): the new run is of the same published DAG.",
      "Each <name> is a parameter the DAG declares ([params.NAME] with a pattern and maybe a default);",
      "a value is one word (no spaces) that must match the whole pattern. Parameters with a default",
      "may be left out. Nothing is stored when a value is refused. The run awaits confirmation as a",
      "published DAG does (auto_confirm and the two-person rule apply).",
    ],
  },
  withArgs(
    {
      verb: "confirm",
      summary: "start a published DAG run",
      permission: "operator",
      details: [
        "<hash> is the content hash its status card shows (8 or more of its first hex digits).",
        "Given, the run starts only if its content has that hash: what you confirm is what you saw.",
      ],
    },
    [RUN_ID, { name: "hash", kind: "hash", about: "the content hash", optional: true }],
  ),
  withArgs(
    {
      verb: "reject",
      summary: "drop a published DAG run that waits for confirmation",
      permission: "operator",
      details: [],
    },
    [RUN_ID],
  ),
  withArgs(
    {
      verb: "cancel",
      summary: "cancel a running DAG run; running tasks are stopped",
      permission: "operator",
      details: [],
    },
    [RUN_ID],
  ),
  withArgs(
    {
      verb: "status",
      summary: "show one run's tasks, or the room's active runs",
      permission: "open",
      details: [],
    },
    [{ ...RUN_ID, optional: true }],
  ),
  withArgs(
    {
      verb: "list",
      summary: "list the room's recent DAG runs, or the runs of one published DAG",
      permission: "open",
      details: ["With <id>, the runs of that published DAG: the one publishing started and each `!dag run`."],
    },
    [{ name: "id", kind: "run-id", about: "the id of a published DAG", optional: true }],
  ),
  withArgs(
    {
      verb: "schedules",
      summary: "list the room's scheduled DAGs and when each fires next",
      permission: "open",
      details: [
        'A DAG declares schedule = "<cron>" (5 fields, or 6 with seconds first), timezone (default UTC)',
        'and missed = "skip" or "run_once". Only the leader fires it, each slot once.',
      ],
    },
    [],
  ),
  withArgs(
    {
      verb: "logs",
      summary: "show the captured output of a task",
      // Output can hold what an action printed about its host; `!dag policy logs anyone` opens it.
      permission: "operator",
      details: ["Operators only, unless the room's policy says `logs anyone` (see `!dag help policy`)."],
    },
    [RUN_ID, { name: "task", kind: "task-id", about: "the id of a task" }],
  ),
  withArgs(
    {
      verb: "graph",
      summary: "post a picture of a run: its DAG, each task in its state's colour",
      permission: "open",
      details: ["The picture goes into the run's thread. `dagbot graph <id>` draws the same on a node."],
    },
    [RUN_ID],
  ),
  withArgs(
    {
      verb: "retry",
      summary: "start a new run of the part of a run that did not succeed",
      permission: "operator",
      details: [],
    },
    [RUN_ID],
  ),
  {
    verb: "nodes",
    usage: "!dag nodes [verbose]",
    summary: "show nodes, labels, heartbeats, running tasks and the leader",
    permission: "open",
    details: ["`verbose` adds the leader's term and how long its lease is valid."],
  },
  withArgs(
    {
      verb: "cap",
      summary: "set the room's cap on active tasks",
      permission: "operator",
      details: [
        `<n> is a whole number from 0 to ${MAX_CAP}; 0 pauses the room (nothing new starts).`,
        "Raising the cap starts waiting tasks at once; lowering it never interrupts a running task.",
      ],
    },
    [{ name: "n", kind: "cap", about: `a whole number from 0 to ${MAX_CAP}` }],
  ),
  {
    verb: "policy",
    usage: "!dag policy | !dag policy <setting> <value>",
    summary: "show or change the room's permissions, which every node enforces",
    permission: "operator",
    details: [
      "Settings: power_level <0-100>, two_person_rule on|off, logs operators|anyone,",
      "allow +@user:server / -@user:server, auto_confirm +@user:server / -@user:server.",
      "The policy lives in the store: the first node sets it from its [permissions]; a node whose",
      "config then disagrees says so in its log and does not lead. Update the configs to match.",
    ],
  },
];

export const GENERAL_HELP_LINE = `usage: !dag <command> — commands: ${COMMAND_VERBS.join(", ")}; !dag help <command> explains one`;

export function commandInfo(verb: CommandVerb): CommandInfo {
  // COMMANDS lists every verb; the fallback only satisfies the type checker.
  return COMMANDS.find((c) => c.verb === verb) ?? COMMANDS[0]!;
}

/** The help line a command error carries: the verb's usage, or the general line. */
export function helpLineFor(verb: CommandVerb | null): string {
  return verb === null ? GENERAL_HELP_LINE : `usage: ${commandInfo(verb).usage}`;
}

export function isCommandVerb(word: string): word is CommandVerb {
  return (COMMAND_VERBS as readonly string[]).includes(word);
}

/**
 * Help as plain lines: every command (optionally only those of one permission), or one command in
 * detail. Adapters add their own formatting.
 */
export function renderHelp(filter?: CommandVerb | CommandPermission): string[] {
  if (filter !== undefined && isCommandVerb(filter)) {
    const c = commandInfo(filter);
    const who = c.permission === "operator" ? "operators only" : "anyone in the room";
    return [c.usage, `${c.summary} (${who})`, ...c.details];
  }
  const shown = COMMANDS.filter((c) => filter === undefined || c.permission === filter);
  return [
    "dagbot commands (* = operators only):",
    ...shown.map((c) => `${c.usage}${c.permission === "operator" ? " *" : ""} — ${c.summary}`),
  ];
}

/** Edit distance with adjacent transpositions (optimal string alignment), for "did you mean". */
function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[] = new Array<number>(rows * cols).fill(0);
  const at = (i: number, j: number): number => d[i * cols + j] ?? 0;
  for (let i = 0; i < rows; i += 1) d[i * cols] = i;
  for (let j = 0; j < cols; j += 1) d[j] = j;
  for (let i = 1; i < rows; i += 1) {
    for (let j = 1; j < cols; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, at(i - 2, j - 2) + 1);
      d[i * cols + j] = best;
    }
  }
  return at(a.length, b.length);
}

/** The verb a mistyped word most likely meant, or null when none is close. */
export function suggestVerb(word: string): CommandVerb | null {
  const w = word.toLowerCase();
  if (w.length === 0 || w.length > 32) return null;
  const prefixed = COMMAND_VERBS.filter((v) => w.length >= 3 && v.startsWith(w));
  if (prefixed.length === 1) return prefixed[0] ?? null;
  let best: CommandVerb | null = null;
  let bestDistance = Infinity;
  for (const v of COMMAND_VERBS) {
    const dist = editDistance(w, v);
    // Short verbs (cap, list) tolerate one slip; longer ones two.
    const allowed = v.length <= 4 ? 1 : 2;
    if (dist <= allowed && dist < bestDistance) {
      best = v;
      bestDistance = dist;
    }
  }
  return best;
}
