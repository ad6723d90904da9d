/**
 * What a command did, as data. An outcome is JSON: it is stored in the inbox row's `result` and the
 * reply is rendered from it, so a crash between "handled" and "replied" renders the same reply again.
 * Outcomes hold compact summaries (never a whole DAG) and everything the reply shows, including the
 * time it was taken at, so rendering needs no store.
 */
import { executedTasks } from "../../domain/params.js";
import { lastOutputLine } from "../../domain/last-line.js";
import type { RunStatus, TaskStatus } from "../../domain/model.js";
import type { TaskSummary } from "../../domain/run-status.js";
import type { RunDecision } from "../../domain/run-states.js";
import { summarizeCounts } from "../../domain/run-status.js";
import type { ExplainedWait, WaitReason } from "../../domain/wait-reasons.js";
import { explained } from "../../domain/wait-reasons.js";
import { gateDecisionWords } from "../../domain/gates.js";
import { whenNotMetWords } from "../../domain/run-when.js";
import type { MarkRecord } from "../../domain/task-mark.js";
import { isMarkWords } from "../../domain/task-mark.js";
import type {
  AppCommandResult,
  NodeRecord,
  RoomPolicy,
  RunRecord,
  RunStore,
  TaskRecord,
} from "../../ports/store.js";
import type { OutputValue } from "../../domain/outputs.js";

/** A verb of docs/architecture.md §5 (verbs/index.ts), as stored in an outcome. */
export type Verb = string;

export interface RunSummary {
  runId: string;
  dagId: string;
  status: RunStatus;
  description: string | null;
  publisher: string;
  confirmedBy: string | null;
  publishEventId: string | null;
  confirmDeadline: number | null;
  createdAt: number;
  updatedAt: number;
  taskCount: number;
  /** The DAG's content hash (absent in outcomes stored before it was recorded). */
  hash?: string;
  /** For a run started by `!dag run`: the published DAG it is a run of. */
  definition?: string;
  /** The run's parameter values, when its DAG declares parameters. */
  params?: Record<string, string>;
  /** The webhook delivery that started the run (hook id, delivery id, a link from its payload). */
  hook?: { id: string; delivery: string; link?: string };
  /** A published run that registered its definition without running it (it holds no task). */
  registered?: true;
}

/** A matrix task on a run's faces (domain/matrix.ts): its id and its instances' counts. */
export interface MatrixGroupLine {
  task: string;
  summary: TaskSummary;
}

export interface TaskLine {
  taskId: string;
  action: string;
  status: TaskStatus;
  /** node_id of the executor of the latest attempt, null if it never ran. */
  node: string | null;
  attempt: number;
  maxAttempts: number;
  startedAt: number | null;
  finishedAt: number | null;
  exitCode: number | null;
  /** The error, cut to one short line. */
  error: string | null;
  /**
   * A failed or timed-out task's last printed line (domain/last-line.ts: masked where it ran, one
   * short line); absent for other tasks and when it printed nothing.
   */
  lastLine?: string;
  /** Why a blocked or queued task waits (domain/wait-reasons.ts); absent when it does not, or unknown. */
  wait?: ExplainedWait;
  /**
   * Who decided the task's end, in words: an approval gate's decision (gates.ts gateDecisionWords),
   * an operator's mark (task-mark.ts markWords), or a run condition not met (run-when.ts
   * whenNotMetWords); absent otherwise.
   */
  decided?: string;
  /**
   * The values it published for its dependents (domain/outputs.ts), where the answer shows them (a
   * task's logs, its status, a CLI or HTTP status); absent otherwise and while it has none.
   */
  outputs?: Record<string, OutputValue>;
}

/** A run with its progress counts, for lists. */
/** One scheduled DAG as `!dag schedules` shows it. */
export interface ScheduleLine {
  dagId: string;
  cron: string;
  timezone: string;
  missed: "skip" | "run_once";
  /** The next slot (epoch ms), null when the expression has none left. */
  next: number | null;
  /** The newest slot a run was created for, null when none yet (among the latest runs). */
  last: number | null;
  /** False when its definition awaits confirmation: it fires only once confirmed. */
  active: boolean;
  /** active or paused (deleted ones are not listed); absent in outcomes stored before it was recorded. */
  state?: "active" | "paused";
  /** Who paused it, when and why (the leader's own pause says "dagbot"). */
  pausedBy?: string | null;
  pausedAt?: number | null;
  reason?: string | null;
  /** Who it runs on the authority of: its publisher, and its confirmer under the two-person rule. */
  owner?: string;
}

/** One DAG declaring `after` as `!dag triggers` shows it, with its newest firing. */
export interface TriggerLine {
  dagId: string;
  /** The upstream DAG and the statuses that fire it ("succeeded", "failed", "canceled", "finished"). */
  after: string;
  status: string[];
  /** This DAG's parameter → its source in the upstream run. */
  params: Record<string, string>;
  /** False while its published run awaits confirmation: it fires only once confirmed. */
  active: boolean;
  /** Who its runs run on the authority of. */
  owner: string;
  /** Its newest firing: the upstream run, how it ended, the run it started or why none; null before the first. */
  last: {
    upstream: string;
    status: string;
    run: string | null;
    reason: string | null;
    at: number;
  } | null;
}

export interface RunProgress {
  run: RunSummary;
  summary: TaskSummary;
}

/** One line of `!dag help`: a group's title and its verbs. */
export interface HelpGroup {
  title: string;
  verbs: Array<{ verb: Verb; operator: boolean }>;
}

export interface HelpEntry {
  verb: Verb;
  usage: string;
  summary: string;
}

export interface NodeLine {
  nodeId: string;
  labels: string[];
  capacity: number;
  runningTasks: number;
  actions: string[];
  heartbeatAgeMs: number;
  serves: boolean;
  /** Encrypted events this node could not decrypt since it started. */
  undecryptable: number;
  /** Why the last of them was not decrypted, in words; null when none was or it did not say. */
  undecryptableReason: string | null;
  /** Whether its Matrix device is cross-signed by its account; null: its crypto is not loaded. */
  deviceSigned: boolean | null;
  /** Its dagbot release; null for one before 0.2.0, which did not say (docs/architecture.md §11). */
  release: string | null;
  /** The fleet protocol it speaks (1 before 0.2.0). */
  protocol: number;
}

export type Outcome =
  | {
      kind: "help";
      entries: HelpEntry[];
      /** Extra lines when help on one command was asked for. */
      details: string[];
      /** Verbs left out (or, for one command, not allowed) because the sender lacks the power level. */
      hiddenVerbs: Verb[];
      requiredPowerLevel: number;
      /**
       * The list: every verb by what people do with it, each marked when the room keeps it to
       * operators (absent in outcomes stored before help was grouped, which list `entries`).
       */
      groups?: HelpGroup[];
      /** Whether the sender is an operator of the room. */
      operator?: boolean;
      /** One command explained: whether the room keeps it to operators. */
      operatorOnly?: boolean;
    }
  | {
      kind: "command-error";
      message: string;
      helpLine: string;
      /** A mistyped verb's correction: the whole command as meant, to copy (domain/command-grammar.ts). */
      corrected?: { command: string; partial: boolean };
    }
  | { kind: "refused"; verb: Verb; reason: string; helpLine: string }
  /** A confirmation for other content than the run's: `given` is the hash it named, the run has its own. */
  | { kind: "hash-mismatch"; run: RunSummary; given: string }
  | { kind: "published"; run: RunSummary; needsConfirmation: boolean; twoPersonRule: boolean }
  | { kind: "exists"; run: RunSummary }
  | { kind: "conflict"; dagId: string; existing: RunSummary; suggestion: string }
  | { kind: "invalid-dag"; source: string; issues: string[]; moreIssues: number }
  | { kind: "library-error"; name: string; message: string }
  | {
      kind: "decision";
      verb: RunDecision;
      result: "done" | "already" | "wrong-status";
      run: RunSummary;
      by: string;
    }
  /** approve / deny on an approval gate: the domain's verdict (gates.ts) and what it needs still. */
  | {
      kind: "gate";
      verb: "approve" | "deny";
      result: "recorded" | "approved" | "denied" | "already" | "closed" | "not-open" | "form";
      runId: string;
      dagId: string;
      /** The run's thread in chat, where the answer goes. */
      publishEventId: string | null;
      gate: string;
      by: string;
      /** Approvals still needed after a recorded one. */
      missing?: number;
      /** Why the form refused the approval. */
      message?: string;
      /** The form's values once approved: the gate's outputs. */
      values?: Record<string, string>;
    }
  /** mark: the verdict of decideMark (task-mark.ts) as the store kept it, and the run's thread. */
  | ({ kind: "mark"; result: MarkRecord["kind"]; publishEventId: string | null } & Omit<MarkRecord, "kind">)
  | {
      kind: "not-found";
      dagId: string;
      /** Set when the run exists but has no such task. */
      taskId: string | null;
      /** A close id: a recent run's for a run, the run's task for a task. */
      didYouMean: string | null;
      /** For a missing task: the run's task ids (the first few). */
      known: string[];
      /** A published DAG's id was asked for (a list of its runs): neither a DAG nor a run has it. */
      dag?: boolean;
    }
  | {
      kind: "status";
      run: RunSummary;
      summary: TaskSummary;
      tasks: TaskLine[];
      at: number;
      /** The room's cap when the status was read (absent in outcomes stored before it was recorded). */
      roomCap?: number;
      /** The room the run is in (absent in outcomes stored before it was recorded). */
      room?: string;
      /**
       * A failed run's failures in words, from every task (domain/failure-words.ts): "`migrate`
       * failed (exit 1); `rollout`, `smoke_test` skipped". Absent for any other run.
       */
      failure?: string;
      /** Its matrix tasks, each with its instances' counts; absent for a run without one. */
      groups?: MatrixGroupLine[];
    }
  | { kind: "overview"; runs: RunProgress[]; at: number }
  | { kind: "schedules"; schedules: ScheduleLine[]; at: number }
  /** `schedules`: how many schedules the room has (listed by `!dag schedules`). */
  | { kind: "triggers"; triggers: TriggerLine[]; schedules: number; at: number }
  /** `of`: the published DAG whose runs these are (`!dag list <id>`); absent for the room's latest. */
  | {
      kind: "list";
      runs: RunProgress[];
      at: number;
      of?: string;
      /** The cursor of the next page (CLI --cursor, HTTP ?cursor=); absent on the last page. */
      next?: string;
      /** The room listed (absent in outcomes stored before it was recorded). */
      room?: string;
      /** The statuses the list was filtered by, when it was. */
      statuses?: RunStatus[];
      /**
       * An empty filtered first page: how many runs the filter left out (of the room, or of `of`),
       * counted up to a page of the most a list reads; `more` when there are more than that.
       */
      others?: { count: number; more: boolean };
    }
  | {
      kind: "logs";
      run: RunSummary;
      task: TaskLine;
      output: string | null;
      omittedChars: number;
      at: number;
      /** Bytes the attempt wrote before the kept tail began (output_limit); absent in older outcomes. */
      droppedBytes?: number;
      /** All the bytes the attempt wrote, kept or not. */
      outputBytes?: number;
    }
  /** The picture itself is drawn and posted by the outbox (app/pictures.ts), from the run as it is then. */
  | { kind: "graph"; run: RunSummary }
  | {
      kind: "retried";
      from: RunSummary;
      run: RunSummary;
      taskIds: string[];
      needsConfirmation: boolean;
    }
  | { kind: "nothing-to-retry"; run: RunSummary; why: "succeeded" | "not-ended" | "never-confirmed" }
  | {
      kind: "nodes";
      nodes: NodeLine[];
      leader: { nodeId: string; term: number; expiresInMs: number } | null;
      /** A node whose heartbeat is older than this is shown as gone (retention.node_gone_after). */
      staleAfterMs: number;
      at: number;
      /** Also the leader's term and lease (`!dag nodes verbose`); absent in outcomes stored before it. */
      verbose?: boolean;
    }
  | { kind: "cap"; cap: number; previous: number }
  /** `!dag schedule pause|resume|delete`: what the command did to the schedule, and its state after. */
  | {
      kind: "schedule-changed";
      action: "pause" | "resume" | "delete";
      result: "done" | "already" | "wrong-state";
      dagId: string;
      state: "active" | "paused" | "deleted";
      by: string;
    }
  /** A schedule command naming a DAG id that has no schedule in the room. */
  | { kind: "no-schedule"; dagId: string }
  /**
   * The room's policy after the command. `changed` says what a change did (`two_person_rule on →
   * off`; null: shown only), `by` who applied it, `proposal` whose proposal a confirmation applied.
   */
  | {
      kind: "policy";
      policy: RoomPolicy;
      changed: string | null;
      by?: string;
      proposal?: { changeId: string; proposedBy: string };
    }
  /** A room admin's change under the two-person rule: it applies once another admin confirms it. */
  | {
      kind: "policy-proposed";
      changeId: string;
      /** The change as typed after `!dag policy`, e.g. `two_person_rule off`. */
      change: string;
      by: string;
      proposedAt: number;
      expiresAt: number;
    }
  /** A write asked of a node that does not lead the room (CLI/HTTP on a follower). */
  | { kind: "not-leader"; roomId: string }
  /** An edit of a command: edits are never applied (the command ran, or was answered, as first sent). */
  | { kind: "edit-not-applied" }
  /**
   * A command that leaders lost their lease while handling, `losses` times: answered with this and
   * never handled again (src/domain/inbox-handling.ts).
   */
  | { kind: "quarantined"; losses: number }
  /**
   * Over a rate limit (pictures: app/picture-budget.ts) after its sender was told in words when to
   * ask again: answered with a ⏳ reaction on the ask, not a message, so a flood of asks floods
   * nothing, and no ask goes unanswered.
   */
  | { kind: "rate-limited"; verb: string; retryAfterMs: number }
  /** An encrypted message no node could decrypt: the sender is asked to send it again. */
  | { kind: "undecryptable" }
  /** A reaction that is not a decision on a card awaiting confirmation: no reply at all. */
  | { kind: "ignored"; why: string };

export type OutcomeKind = Outcome["kind"];

/**
 * What a handled command's inbox row keeps, whoever marked it (the app, or a store operation in the
 * transaction of the command's effect: ports/store.ts CommandContext): the outcome every face renders.
 */
export function wrapOutcome(outcome: Outcome, threadRoot?: string | null): AppCommandResult {
  return threadRoot === undefined ? { dagbotOutcome: outcome } : { dagbotOutcome: outcome, threadRoot };
}

/**
 * The outcome a row keeps; null while it has none, or when an older release's store wrote its own
 * shape there (old-results.ts reads those).
 */
export function unwrapOutcome(result: Record<string, unknown> | null): Outcome | null {
  const outcome = result?.["dagbotOutcome"];
  if (typeof outcome !== "object" || outcome === null || Array.isArray(outcome)) return null;
  // Written from an Outcome (wrapOutcome), by this release or an older one: its shape is ours.
  return typeof (outcome as { kind?: unknown }).kind === "string" ? (outcome as Outcome) : null;
}

/** The thread a reaction's answer goes to, as kept with the outcome; undefined when none was kept. */
export function storedThreadRoot(result: Record<string, unknown> | null): string | null | undefined {
  const root = unwrapOutcome(result) === null ? undefined : result?.["threadRoot"];
  return typeof root === "string" || root === null ? root : undefined;
}

export function summarizeRun(run: RunRecord): RunSummary {
  return {
    runId: run.runId,
    dagId: run.dagId,
    status: run.status,
    description: run.description,
    publisher: run.publisher,
    confirmedBy: run.confirmedBy,
    publishEventId: run.publishEventId,
    confirmDeadline: run.confirmDeadline,
    createdAt: run.createdAt,
    updatedAt: run.updatedAt,
    taskCount: executedTasks(run.dag).length,
    hash: run.hash,
    ...(run.dag.definition === undefined ? {} : { definition: run.dag.definition }),
    ...(run.dag.values === undefined ? {} : { params: run.dag.values }),
    ...(run.dag.hook === undefined ? {} : { hook: run.dag.hook }),
    ...(run.dag.registered === true ? { registered: true as const } : {}),
  };
}

const MAX_ERROR_CHARS = 200;

export function taskLine(task: TaskRecord, wait?: WaitReason, withOutputs = false): TaskLine {
  const error = task.error === null ? null : firstLine(task.error, MAX_ERROR_CHARS);
  const lastLine =
    task.status === "failed" || task.status === "timed_out" ? lastOutputLine(task.output) : null;
  return {
    taskId: task.taskId,
    action: task.action,
    status: task.status,
    node: task.executor?.nodeId ?? null,
    attempt: task.attempt,
    maxAttempts: task.maxAttempts,
    startedAt: task.startedAt,
    finishedAt: task.finishedAt,
    exitCode: task.exitCode,
    error,
    ...(lastLine === null ? {} : { lastLine }),
    ...(wait === undefined ? {} : { wait: explained(wait) }),
    ...(withOutputs && task.outputValues !== null ? { outputs: task.outputValues } : {}),
    ...decidedOf(task),
  };
}

/**
 * Who decided the task's end, in words: an operator's mark (task-mark.ts), a gate's decision, or,
 * for a task with a run condition the scheduler skipped, that its condition was not met (run-when.ts).
 */
function decidedOf(task: TaskRecord): { decided?: string } {
  if (isMarkWords(task.status, task.error)) return { decided: firstLine(task.error ?? "", MAX_ERROR_CHARS) };
  if (task.gateState?.decision != null) return { decided: gateDecisionWords(task.gateState) };
  if (task.status === "skipped" && task.when !== undefined) return { decided: whenNotMetWords(task.when) };
  return {};
}

function firstLine(value: string, max: number): string {
  const line = value.split("\n", 1)[0] ?? "";
  const points = Array.from(line);
  const more = line.length < value.length || points.length > max;
  return more ? `${points.slice(0, max).join("")}…` : line;
}

/** Statuses a reader wants to see first when a run has too many tasks to list them all. */
const NOTEWORTHY: ReadonlySet<TaskStatus> = new Set<TaskStatus>([
  "running",
  "canceling",
  "queued",
  "failed",
  "timed_out",
  "canceled",
]);

/**
 * At most `max` task lines, in the DAG's order. When there are more tasks than that, the noteworthy
 * ones (active or failed) are kept first, then the rest fill the remaining places.
 */
export function selectTaskLines(
  tasks: readonly TaskRecord[],
  max: number,
  waits?: ReadonlyMap<string, WaitReason>,
  withOutputs = false,
): TaskLine[] {
  return selectNoteworthy(tasks, max).map((t) => taskLine(t, waits?.get(t.taskId), withOutputs));
}

/** The selection rule of selectTaskLines, for records or lines alike. */
export function selectNoteworthy<T extends { status: TaskStatus }>(items: readonly T[], max: number): T[] {
  if (items.length <= max) return [...items];
  const keep = new Set<T>();
  for (const t of items) if (keep.size < max && NOTEWORTHY.has(t.status)) keep.add(t);
  for (const t of items) if (keep.size < max) keep.add(t);
  return items.filter((t) => keep.has(t));
}

/**
 * The progress of several runs from one count query: a list of 15 runs of 1,000 tasks
 * read all 15,000 task rows, outputs included, to count them (600 ms of the leader's time).
 */
export async function progressOfRuns(
  store: Pick<RunStore, "countTaskStatuses">,
  runs: readonly RunRecord[],
): Promise<RunProgress[]> {
  const counts = await store.countTaskStatuses(runs.map((r) => r.runId));
  return runs.map((run) => ({
    run: summarizeRun(run),
    summary: summarizeCounts(counts.get(run.runId) ?? {}),
  }));
}

export function nodeLine(node: NodeRecord, roomId: string): NodeLine {
  return {
    nodeId: node.session.nodeId,
    labels: node.labels,
    capacity: node.capacity,
    runningTasks: node.runningTasks,
    actions: node.actions,
    heartbeatAgeMs: node.heartbeatAgeMs,
    serves: node.roomIds.includes(roomId),
    undecryptable: node.undecryptable,
    undecryptableReason: node.undecryptableReason,
    deviceSigned: node.deviceSigned,
    release: node.release,
    protocol: node.protocol ?? 1,
  };
}
