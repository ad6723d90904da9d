/**
 * The one table of what each outcome kind means outside chat: its HTTP status (a success, or a
 * problem type) and the CLI's exit status. Nothing else: the words of every outcome, on every face,
 * are its one renderer's, beside the verb that gives it (verb.ts OutcomeRenderer; outcome-faces.ts
 * finds it). A verb's own outcome kind, which this table does not know, declares its statuses beside
 * its renderer (verb.ts NewOutcome; docs/architecture.md §5).
 */
import type { Outcome, OutcomeKind, RunSummary } from "./outcome.js";
import { gateSucceeded } from "./gate-decisions.js";
import type { AnyVerb } from "./verb.js";
import { newOutcomeOf } from "./outcome-faces.js";

export type { Idiom } from "./face.js";

/** The problem codes outcomes map to (the HTTP layer adds its own). */
export type OutcomeProblemCode =
  | "refused"
  | "hash-mismatch"
  | "run-not-found"
  | "task-not-found"
  | "conflict"
  | "invalid-dag"
  | "library-error"
  | "wrong-status"
  | "nothing-to-retry"
  | "command-error"
  | "not-leader"
  | "quarantined"
  | "schedule-not-found"
  | "schedule-deleted"
  | "rate-limited"
  | "internal";

export type HttpAnswer =
  | { readonly ok: true; readonly status: 200 | 201 }
  | {
      readonly ok: false;
      readonly status: number;
      readonly problem: OutcomeProblemCode;
      readonly extra?: Readonly<Record<string, unknown>>;
    };

/** The CLI's exit statuses (README "Commands"): 0 success, 1 refused / not found / failed. */
export const EXIT_OK = 0;
export const EXIT_REFUSED = 1;

interface Entry<K extends OutcomeKind> {
  http(o: Extract<Outcome, { kind: K }>): HttpAnswer;
  exit(o: Extract<Outcome, { kind: K }>): number;
}

export const ok200: HttpAnswer = { ok: true, status: 200 };
export const created201: HttpAnswer = { ok: true, status: 201 };
const success = (): number => EXIT_OK;
const refused = (): number => EXIT_REFUSED;
export const problem = (
  status: number,
  code: OutcomeProblemCode,
  extra?: Record<string, unknown>,
): HttpAnswer => ({
  ok: false,
  status,
  problem: code,
  ...(extra === undefined ? {} : { extra }),
});

/** A success on every face: 200, exit 0. */
const ANSWER = { http: () => ok200, exit: success } as const;
const CREATED = { http: () => created201, exit: success } as const;
/** An outcome no face but chat shows: a command from chat that HTTP and the CLI never send. */
const CHAT_ONLY = { http: () => problem(500, "internal"), exit: refused } as const;

const TABLE: { readonly [K in OutcomeKind]: Entry<K> } = {
  help: ANSWER,
  "command-error": { http: () => problem(400, "command-error"), exit: refused },
  refused: { http: () => problem(403, "refused"), exit: refused },
  "hash-mismatch": {
    http: (o) => problem(409, "hash-mismatch", { hash: o.run.hash ?? null, given: o.given, run: o.run }),
    exit: refused,
  },
  published: CREATED,
  exists: ANSWER,
  conflict: {
    http: (o) => problem(409, "conflict", { dagId: o.dagId, existing: o.existing, suggestion: o.suggestion }),
    exit: refused,
  },
  "invalid-dag": {
    http: (o) => problem(422, "invalid-dag", { issues: o.issues, moreIssues: o.moreIssues }),
    exit: refused,
  },
  "library-error": { http: () => problem(422, "library-error"), exit: refused },
  decision: {
    http: (o) => (o.result === "wrong-status" ? problem(409, "wrong-status", { run: o.run }) : ok200),
    exit: (o) => (o.result === "wrong-status" ? EXIT_REFUSED : EXIT_OK),
  },
  gate: {
    http: (o) =>
      gateSucceeded(o)
        ? ok200
        : o.result === "form"
          ? problem(422, "command-error", { message: o.message ?? null })
          : problem(409, "wrong-status", { gate: o.gate, result: o.result }),
    exit: (o) => (gateSucceeded(o) ? EXIT_OK : EXIT_REFUSED),
  },
  mark: {
    http: (o) =>
      o.result === "marked" ? ok200 : problem(409, "wrong-status", { task: o.taskId, status: o.status }),
    exit: (o) => (o.result === "marked" ? EXIT_OK : EXIT_REFUSED),
  },
  "not-found": {
    http: (o) =>
      problem(404, o.taskId === null ? "run-not-found" : "task-not-found", {
        didYouMean: o.didYouMean,
        ...(o.taskId === null ? {} : { knownTasks: o.known }),
      }),
    exit: refused,
  },
  status: ANSWER,
  overview: ANSWER,
  list: ANSWER,
  schedules: ANSWER,
  triggers: ANSWER,
  "schedule-changed": {
    http: (o) => (o.result === "wrong-state" ? problem(409, "schedule-deleted", { state: o.state }) : ok200),
    exit: (o) => (o.result === "wrong-state" ? EXIT_REFUSED : EXIT_OK),
  },
  "no-schedule": { http: () => problem(404, "schedule-not-found"), exit: refused },
  logs: ANSWER,
  graph: ANSWER,
  retried: CREATED,
  "nothing-to-retry": {
    http: (o) => problem(409, "nothing-to-retry", { why: o.why, run: o.run }),
    exit: refused,
  },
  nodes: ANSWER,
  cap: ANSWER,
  policy: ANSWER,
  "policy-proposed": ANSWER,
  "not-leader": { http: () => problem(503, "not-leader"), exit: refused },
  "edit-not-applied": CHAT_ONLY,
  undecryptable: CHAT_ONLY,
  ignored: CHAT_ONLY,
  "rate-limited": { http: () => problem(429, "rate-limited"), exit: refused },
  quarantined: { http: (o) => problem(422, "quarantined", { losses: o.losses }), exit: refused },
};

type AnyEntry = { http(o: Outcome): HttpAnswer; exit(o: Outcome): number };

/** The table's entry, or a verb's own kind's statuses; an unknown kind is an internal error. */
function entryOf(o: Outcome, verbs?: readonly AnyVerb[]): AnyEntry {
  if (Object.hasOwn(TABLE, o.kind)) return TABLE[o.kind] as unknown as AnyEntry;
  return (newOutcomeOf(o.kind, verbs) as AnyEntry | null) ?? CHAT_ONLY;
}

/**
 * What the outcome is over HTTP: a success status, or a problem's status, code and extension members.
 * `verbs`: the list the face was built from (the node's own by default).
 */
export function httpAnswerOf(o: Outcome, verbs?: readonly AnyVerb[]): HttpAnswer {
  return entryOf(o, verbs).http(o);
}

/** The CLI's exit status for the outcome. */
export function exitStatusOf(o: Outcome, verbs?: readonly AnyVerb[]): number {
  return entryOf(o, verbs).exit(o);
}

/** Where a created run can be read over HTTP (the Location of a 201). */
export function createdRunOf(o: Outcome): RunSummary | null {
  return o.kind === "published" || o.kind === "retried" ? o.run : null;
}

export { asideOf, plainTextOf } from "./outcome-faces.js";
