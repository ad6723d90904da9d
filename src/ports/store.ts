/**
 * The shared store, as capabilities (docs/architecture.md §3, §4, §8). Types only: the SQLite and PostgreSQL
 * adapters implement all of them and one contract suite (test/contracts/store.contract.ts) proves
 * that they behave alike. Loops take the narrow capability they need, not the whole Store.
 *
 * Conventions for every method:
 * - Every change of state is one guarded write judged by affected rows. A lost race throws
 *   ConflictError (expected vs found), a missing row NotFoundError, a store failure StoreError
 *   (see errors.ts). Nothing else is thrown for expected outcomes.
 * - Times are epoch milliseconds on the STORE's clock (PostgreSQL `now()`; SQLite the host clock),
 *   never the caller's. Durations passed in are milliseconds.
 * - Every state change appends to the event log in the same transaction. Leader writes carry a
 *   LeaderFence and change nothing unless that fence still holds the room's unexpired lease.
 * - A task's `version` rises by one on every status change (not on a lease renewal); (taskId,
 *   version) plus the executor's session is the fencing token of the executing worker.
 */
import type { ActionTemplate } from "../domain/action-argv.js";
import type {
  ArgValue,
  ForEachSpec,
  ParsedDag,
  Placement,
  RunStatus,
  TaskSpec,
  TaskStatus,
} from "../domain/model.js";
import type { ScheduleAction, ScheduleState } from "../domain/schedule.js";
import type { GateDecisionInput, GateSpec, GateState, GateVerdict } from "../domain/gates.js";
import type { MarkInput, MarkVerdict } from "../domain/task-mark.js";
import type { OutputDeclaration, OutputValue } from "../domain/outputs.js";

/** A node's life: node_id plus a boot id chosen at start. A restart under the same name is a new session. */
export interface Session {
  nodeId: string;
  bootId: string;
}

/** Proof of leadership for one room: the lease holder's session and term. */
export interface LeaderFence {
  roomId: string;
  session: Session;
  term: number;
}

// ---------------------------------------------------------------------------------------------
// Leases (leadership)

export interface LeaseState {
  roomId: string;
  holder: Session | null;
  term: number;
  expiresAt: number;
  /** The store's clock when this was read, so callers can compute remaining time without their own clock. */
  now: number;
}

/** What a node wants of one room's lease in a syncLeases call. */
export interface LeaseWish {
  roomId: string;
  /** null: take the lease if it is free or expired; a term: renew the lease this session holds under it. */
  term: number | null;
}

/**
 * One room's answer to a syncLeases call, with the lease as it stands (holder, term, expiry and the
 * store's clock): acquired or renewed by this session, held by someone else (an acquire that found
 * it taken), or lost (a renewal whose term, holder or expiry no longer matched).
 */
export interface LeaseSync extends LeaseState {
  outcome: "acquired" | "renewed" | "held" | "lost";
}

export interface LeaseStore {
  /**
   * Take the room's lease where it is free or expired: holder = me, term + 1. One statement;
   * ConflictError when someone holds it, whose `found` carries holder, term, expiresAt and now.
   */
  acquireLease(roomId: string, session: Session, ttlMs: number): Promise<LeaderFence & { expiresAt: number }>;
  /**
   * Acquire and renew many rooms' leases in ONE statement (a node's rooms together): each wish is
   * judged as acquireLease or renewLease would judge it, the acquired ones logged as lease.acquired.
   * Answers every wish in the order given; never throws ConflictError (a lost race is an outcome).
   */
  syncLeases(session: Session, ttlMs: number, wishes: LeaseWish[]): Promise<LeaseSync[]>;
  /** Extend the lease where holder = me and term = t and it has not expired. ConflictError when deposed or expired. */
  renewLease(fence: LeaderFence, ttlMs: number): Promise<{ expiresAt: number }>;
  /** Free the lease at once (graceful stop), fenced like every other write. */
  releaseLease(fence: LeaderFence): Promise<void>;
  getLease(roomId: string): Promise<LeaseState | null>;
}

// ---------------------------------------------------------------------------------------------
// Inbox (processed_events): every command event any node saw, once, keyed by event_id.

/**
 * Key that Matrix intake adds to a stored event's content: the event's type (`m.room.message`,
 * `m.reaction`), set by intake whatever the sender wrote there. Only an `m.reaction` decides a run.
 */
export const INBOX_EVENT_TYPE_KEY = "org.dagbot.event_type";
/** Set (to the reason) on the inbox row of an encrypted event intake could not decrypt. */
export const UNDECRYPTABLE_KEY = "org.dagbot.undecryptable";

export interface InboxEventInput {
  eventId: string;
  roomId: string;
  sender: string;
  originServerTs: number;
  /** The event's content as received (body, formatted_body, relations...), stored as JSON. */
  content: Record<string, unknown>;
  /** Which node inserted it first (for the record only). */
  seenBy: string;
}

/**
 * new: not handled yet. handled: the command's effect is committed and its outcome stored in
 * `result`; its reply may not be queued yet. replied: the reply is in the outbox. A leader takes
 * rows in new or handled state, so a crash between the two steps repeats only the reply step,
 * which is idempotent (outbox transaction ids are derived from the event id).
 */
export type InboxStatus = "new" | "handled" | "replied";

export interface InboxEvent extends InboxEventInput {
  status: InboxStatus;
  receivedAt: number;
  handledTerm: number | null;
  /** An AppCommandResult as the store keeps it: JSON, opaque to the store; the app reads it (inbox-step.ts readOutcome). */
  result: Record<string, unknown> | null;
}

/**
 * What a handled command keeps as its inbox row's result: the app's outcome (src/app/commands/outcome.ts
 * owns its shape), whoever marked the row, the app itself or a store operation in the same
 * transaction as the command's effect (CommandContext.answer). Rows of 0.3.1 and earlier may hold
 * the store's own shape instead (`op`); the app reads those in src/app/commands/old-results.ts.
 * A type alias, not an interface, so that it is a Record<string, unknown> the store can keep as JSON.
 */
export type AppCommandResult = {
  dagbotOutcome: { kind: string };
  /** The thread a reaction's answer goes to, fixed when it was handled. */
  threadRoot?: string | null;
};

/** What startInboxHandling found: how many leaders started the row and lost their lease before finishing it. */
export interface InboxHandling {
  losses: number;
}

export interface InboxStore {
  /** Insert-or-ignore on event_id: exactly one of N concurrent inserters gets "inserted". */
  insertInboxEvent(event: InboxEventInput): Promise<"inserted" | "duplicate">;
  /** The next row of this room in new or handled state, in (origin_server_ts, event_id) order; null when none. */
  nextInboxEvent(fence: LeaderFence): Promise<InboxEvent | null>;
  /**
   * new → handled with its outcome, for commands whose effect is only a reply (errors, reads).
   * `content`, when given, replaces the stored content in the same write: a refused or malformed
   * command keeps only a short prefix of its body (its relations stay, so the reply finds its thread).
   */
  markInboxHandled(
    fence: LeaderFence,
    eventId: string,
    result: Record<string, unknown>,
    options?: { content?: Record<string, unknown> },
  ): Promise<void>;
  /**
   * Records on a new row, durably and before any of its effect, that the leader of `fence` starts
   * handling it (poison commands). A row already started under another term was left
   * unfinished by a leader that lost its lease: that counts one loss. Returns the losses so far;
   * the app decides what they mean (inbox-step.ts quarantines at 2). ConflictError when the row is
   * not new or the fence is stale.
   */
  startInboxHandling(fence: LeaderFence, eventId: string): Promise<InboxHandling>;
  /** handled → replied, enqueueing the reply messages in the same transaction (insert-or-ignore by txnId). */
  markInboxReplied(fence: LeaderFence, eventId: string, replies: OutboxMessageInput[]): Promise<void>;
  getInboxEvent(eventId: string): Promise<InboxEvent | null>;
  /** The newest event already in the inbox for a room, to know how far back a sync gap must be fetched. */
  latestInboxEvent(roomId: string): Promise<InboxEvent | null>;
}

/**
 * Leader operations that are the effect of a command accept this: when `inboxEventId` is given,
 * the same transaction also moves that inbox row new → handled, keeping as its result what `answer`
 * builds from the operation's result (the app's outcome), so the effect and the "handled" mark commit
 * together or not at all. `answer` is called inside the transaction and must be pure; it returns
 * null only for a result that changed nothing (a publish meeting other content), whose answer needs
 * more reads: the row then stays new and the caller marks it (InboxStore.markInboxHandled).
 */
export type CommandContext<R = unknown> =
  | { fence: LeaderFence; inboxEventId?: undefined }
  | {
      fence: LeaderFence;
      inboxEventId: string;
      answer: (result: R) => Record<string, unknown> | null;
    };

// ---------------------------------------------------------------------------------------------
// Runs and tasks

export interface RunRecord {
  runId: string;
  roomId: string;
  dagId: string;
  hash: string;
  status: RunStatus;
  description: string | null;
  maxParallel: number | null;
  publisher: string;
  /** The chat event that published it (the status card is a threaded reply to it); null from CLI/HTTP. */
  publishEventId: string | null;
  confirmedBy: string | null;
  /** When a pending run expires unconfirmed. */
  confirmDeadline: number | null;
  createdAt: number;
  updatedAt: number;
  /** The validated DAG as stored (canonical form). */
  dag: ParsedDag;
}

export interface TaskRecord {
  runId: string;
  taskId: string;
  /** Insertion order across the whole store: the FIFO tiebreak after priority. */
  seq: number;
  status: TaskStatus;
  version: number;
  /** 1 on the first attempt; a retry (running → queued) adds one. */
  attempt: number;
  maxAttempts: number;
  action: string;
  args: Record<string, ArgValue>;
  needs: string[];
  on: Placement;
  priority: number;
  concurrencyKey: string | null;
  timeoutMs: number | null;
  queueTimeoutMs: number | null;
  retryBackoffMs: number;
  executor: Session | null;
  leaseExpiresAt: number | null;
  notBefore: number | null;
  deadline: number | null;
  queuedAt: number | null;
  startedAt: number | null;
  finishedAt: number | null;
  exitCode: number | null;
  /**
   * Tail of the output, bounded by the executor: while the task runs, what its worker last wrote
   * (writeTaskOutput, at most about once a second); after an attempt, that attempt's. Null before
   * the current attempt wrote any (a claim clears the previous attempt's).
   */
  output: string | null;
  /** Bytes the attempt wrote in all (kept or not), of which `output` is the end; null with no output. */
  outputBytes: number | null;
  error: string | null;
  /** The outputs the task declares (name → pattern, src/domain/outputs.ts); null when none. */
  outputPatterns: Record<string, OutputDeclaration> | null;
  /**
   * The values it published for its dependents, written in the same fenced finish as its success
   * (so exactly once, and never by a stale attempt); null until then, and for a task declaring none.
   */
  outputValues: Record<string, OutputValue> | null;
  /** An approval gate's spec (src/domain/gates.ts); null for a task that runs an action. */
  gate: GateSpec | null;
  /** An approval gate's state once it opened: approvals, form values, decision; null before. */
  gateState: GateState | null;
  /** A fan-out's template, not yet expanded (src/domain/fan-out.ts): its for_each; null otherwise. */
  forEach: ForEachSpec | null;
  /** An instance of a fan-out: its fan-out's id (the template's), its max_parallel, its item; null otherwise. */
  fanOut: string | null;
  fanOutLimit: number | null;
  item: string | null;
  /** Its run condition (`when`, src/domain/run-when.ts) when not the default "succeeded"; absent otherwise. */
  when?: TaskSpec["when"];
}

export interface CreateRunInput {
  roomId: string;
  dag: ParsedDag;
  hash: string;
  publisher: string;
  publishEventId: string | null;
  /** true: the run starts pending and needs a confirm; false: it starts running (auto_confirm, CLI --confirm). */
  needsConfirmation: boolean;
  confirmTimeoutMs: number;
}

export type CreateRunResult =
  | { kind: "created"; run: RunRecord }
  | { kind: "exists"; run: RunRecord }
  | { kind: "conflict"; existing: RunRecord };

export type RunDecisionResult =
  | { kind: "done"; run: RunRecord }
  | { kind: "already"; run: RunRecord }
  | { kind: "wrong-status"; run: RunRecord };

/**
 * Where a page of runs ended, in the order lists use (newest first: created_at, then insertion
 * order). The next page starts after it, so runs created meanwhile neither shift nor repeat a page.
 */
export interface RunPosition {
  createdAt: number;
  /** The run's insertion order in the store. */
  seq: number;
}

export interface RunPageQuery {
  statuses?: RunStatus[];
  /** Only the runs of this definition (a published DAG's id): its first run and every later run of it. */
  definition?: string;
  /** Only runs after this position (the previous page's `next`). */
  after?: RunPosition;
  /** At most this many; the store caps it at MAX_RUN_PAGE. */
  limit: number;
}

export interface RunPage {
  runs: RunRecord[];
  /** Where the next page starts; null when this page holds the last of the runs asked for. */
  next: RunPosition | null;
}

/** The largest page a store reads at once, whatever a caller asks for. */
export const MAX_RUN_PAGE = 500;

/** What an operator's mark did: the domain's verdict, and the run and task after it. */
export interface MarkTaskResult {
  verdict: MarkVerdict;
  run: RunRecord;
  task: TaskRecord;
}

export interface GateDecisionResult {
  verdict: GateVerdict;
  run: RunRecord;
  task: TaskRecord;
}

export interface RunStore {
  /**
   * All-or-nothing; deduplicated on (room, dag_id) and content hash. A DAG without `definition`
   * creates (or adopts) the definition of its id in the same transaction; one with `definition`
   * references that definition (NotFoundError when it does not exist) and moves its lastSlotAt /
   * lastRunNumber when the run is a slot run / an `<id>.N` run.
   */
  createRun(ctx: CommandContext<CreateRunResult>, input: CreateRunInput): Promise<CreateRunResult>;
  /** pending → running (recording who confirmed); "already" when it is running or further. NotFoundError if no such run. */
  confirmRun(
    ctx: CommandContext<RunDecisionResult>,
    roomId: string,
    dagId: string,
    by: string,
  ): Promise<RunDecisionResult>;
  /** pending → rejected. */
  rejectRun(
    ctx: CommandContext<RunDecisionResult>,
    roomId: string,
    dagId: string,
    by: string,
  ): Promise<RunDecisionResult>;
  /**
   * running/pending → canceling: blocked and queued tasks → canceled (no side effect), running →
   * canceling (the executing worker stops it). A run with nothing left running ends canceled at once.
   */
  cancelRun(
    ctx: CommandContext<RunDecisionResult>,
    roomId: string,
    dagId: string,
    by: string,
  ): Promise<RunDecisionResult>;
  getRun(roomId: string, dagId: string): Promise<RunRecord | null>;
  getRunById(runId: string): Promise<RunRecord | null>;
  listRuns(roomId: string, options?: { statuses?: RunStatus[]; limit?: number }): Promise<RunRecord[]>;
  /**
   * One page of the room's runs, newest first, filtered by status and definition. A keyset read:
   * each filter has an index ordered like the list, so a page costs its own rows, not the room's.
   */
  pageRuns(roomId: string, query: RunPageQuery): Promise<RunPage>;
  /**
   * A run's tasks in seq order, each with only the last 4,096 characters of its kept output
   * (LISTED_OUTPUT_CHARS): enough for the last line a card, a progress view or a summary shows. A
   * card or a progress view reads the whole run on each refresh, and 1,000 tasks' whole outputs
   * (64 KiB each by default) are 64 MB a read; getTask gives a task's whole output.
   */
  listTasks(runId: string): Promise<TaskRecord[]>;
  /**
   * Each run's tasks counted by status, in one query for all of them: what a list of runs shows
   * (`!dag list` read every task row of 15 runs, outputs included, to count them). A run
   * without tasks, or unknown, is absent from the map.
   */
  countTaskStatuses(runIds: readonly string[]): Promise<Map<string, Partial<Record<TaskStatus, number>>>>;
  getTask(runId: string, taskId: string): Promise<TaskRecord | null>;
  /**
   * Approve or deny an open approval gate (task `taskId` of run `dagId`, by its name): the domain's
   * decideGate on the task as read in the transaction, applied with a guarded UPDATE (open → still
   * open with one more approval, succeeded, or failed), its events logged, and the inbox row marked
   * with the result, all in one fenced transaction. NotFoundError when there is no such run or task.
   */
  decideGate(
    ctx: CommandContext<GateDecisionResult>,
    roomId: string,
    dagId: string,
    taskId: string,
    input: GateDecisionInput,
  ): Promise<GateDecisionResult>;
  /**
   * An operator's mark of task `taskId` of run `dagId` (by its name) as succeeded or skipped: the
   * domain's decideMark on the run and its tasks as read, locked, in the transaction; the task's
   * move and the dependents it lets go on applied with guarded UPDATEs, logged, and the inbox row
   * marked with the result, all in one fenced transaction. A refusal changes nothing but the row.
   * NotFoundError when there is no such run or task.
   */
  markTask(
    ctx: CommandContext<MarkTaskResult>,
    roomId: string,
    dagId: string,
    taskId: string,
    input: MarkInput,
  ): Promise<MarkTaskResult>;
}

// ---------------------------------------------------------------------------------------------
// Definitions: a published DAG, keyed by (room, dag id). Publishing creates or adopts it
// in the same transaction as its first run (the run named like it); every later run of it (`<id>.N`,
// schedule slots `<id>.s<time>`, retries of those) references it. Lookups by definition are indexed,
// however many runs of other DAGs the room has.

export interface DefinitionRecord {
  roomId: string;
  dagId: string;
  /**
   * The content hash publishing compares (same: exists, other: conflict). Empty when unknown: a
   * definition back-filled from runs whose first run was already pruned; the next publish of its
   * id adopts it.
   */
  hash: string;
  /** The definition document as published (no run values, definition or slot). */
  dag: ParsedDag;
  schedule: NonNullable<ParsedDag["schedule"]> | null;
  publisher: string;
  /**
   * The run publishing created (its dag id is the definition's): its approval is the definition's,
   * so a schedule fires only once that run was confirmed (or auto-confirmed). Null when it is gone.
   */
  origin: Pick<RunRecord, "runId" | "status" | "confirmedBy" | "confirmDeadline"> | null;
  /** The newest slot a run of it was created for (it never goes back); null before the first. */
  lastSlotAt: number | null;
  /**
   * The newest slot fired or skipped (never goes back): no slot at or before it fires. Null before
   * the first; a resume sets it to the resume's time, so the slots of a pause never fire.
   */
  slotsThrough: number | null;
  /** The schedule's state (meaningless without `schedule`): who paused, resumed or deleted it last, when, why. */
  scheduleState: ScheduleStatus;
  /** The highest N of the `<id>.N` runs started of it; 1 when there are none but the first. */
  lastRunNumber: number;
  createdAt: number;
  updatedAt: number;
}

/** A schedule's state and the actions on it (src/domain/schedule.ts holds the rule). */
export type { ScheduleAction, ScheduleState } from "../domain/schedule.js";

export interface ScheduleStatus {
  state: ScheduleState;
  /** Who changed it last (a user id, or "dagbot" when the leader paused it); null: never changed. */
  by: string | null;
  at: number | null;
  reason: string | null;
}

export interface ScheduleChange {
  action: ScheduleAction;
  by: string;
  reason: string | null;
}

/**
 * done: the state changed. already: it was in that state (pause of a paused one, delete of a
 * deleted one). wrong-state: a deleted schedule cannot be paused or resumed.
 */
export type ScheduleChangeResult = { kind: "done" | "already" | "wrong-state"; definition: DefinitionRecord };

/** Slots the leader passed over without a run, and why (the missed-slot policy, an owner no longer allowed). */
export interface SkippedSlots {
  /** The oldest and newest slot skipped. */
  first: number;
  last: number;
  count: number;
  reason: string;
}

export interface DefinitionStore {
  getDefinition(roomId: string, dagId: string): Promise<DefinitionRecord | null>;
  /** The room's definitions that declare a schedule, by dag id; at most `limit` (default 1,000). */
  listScheduledDefinitions(roomId: string, options?: { limit?: number }): Promise<DefinitionRecord[]>;
  /**
   * Pause, resume or delete a definition's schedule, fenced; logs `schedule.paused|resumed|deleted`
   * ({ dagId, by, reason }). A resume moves slotsThrough to now. `notices` are enqueued in the same
   * transaction, only when the state changed (insert-or-ignore by txnId). Given an inbox event id,
   * that row is marked handled with `{ op: "schedule", … }` in the same transaction. NotFoundError
   * when the room has no definition of that id with a schedule.
   */
  changeSchedule(
    ctx: CommandContext<ScheduleChangeResult>,
    roomId: string,
    dagId: string,
    change: ScheduleChange,
    notices?: OutboxMessageInput[],
  ): Promise<ScheduleChangeResult>;
  /**
   * Record slots passed over without a run: moves slotsThrough to `skipped.last` and logs
   * `schedule.skipped` ({ dagId, first, last, count, reason }), fenced. A slot run's creation moves
   * slotsThrough itself and logs `schedule.fired` ({ dagId, slot, covers }) with its run.
   */
  skipScheduleSlots(fence: LeaderFence, roomId: string, dagId: string, skipped: SkippedSlots): Promise<void>;
  /** Runs of one definition (its first run included), newest first; at most `limit` (default 100). */
  listDefinitionRuns(roomId: string, dagId: string, options?: { limit?: number }): Promise<RunRecord[]>;
}

// --- The worker's side

export interface NodeOffer {
  session: Session;
  /** Rooms whose tasks this node serves. */
  roomIds: string[];
  labels: string[];
  /** Actions this node's config defines; a task whose action is not here is not claimed. */
  actions: string[];
  leaseMs: number;
}

/** The executing worker's fencing token. */
export interface TaskToken {
  runId: string;
  taskId: string;
  version: number;
  session: Session;
  /**
   * The claimed attempt and its retry settings as the claim found them (fixed while the claim
   * holds): what the domain needs to decide a failed finish's retry before the store is asked, so
   * PostgreSQL applies a finish in one statement (finishAnswers in src/domain/task-states.ts). A
   * token made without a claim leaves it out, and the store reads it first.
   */
  claim?: { attempt: number; retryBackoffMs: number };
}

export interface ClaimedTask {
  token: TaskToken;
  task: TaskRecord;
}

export interface TaskResult {
  /** canceled only from canceling; timed_out when the worker's own deadline fired. */
  outcome: "succeeded" | "failed" | "timed_out" | "canceled";
  exitCode: number | null;
  output: string;
  /** Bytes the action wrote in all, of which `output` is the end; default: the output's own size. */
  outputBytes?: number;
  error: string | null;
  /**
   * The values the attempt published (checked against the task's declared outputs by the worker):
   * kept only when the finish makes the task succeeded, in the same fenced write.
   */
  outputs?: Record<string, OutputValue>;
}

/** What one batch claim took, and what it saw left for this node. */
export interface ClaimBatch {
  /** queued → running, in claim order (priority, then first in); at most the number asked for. */
  claimed: ClaimedTask[];
  /** Whether queued tasks that fit this node and are ready now were left (the batch was full). */
  more: boolean;
  /** Store-clock ms until the soonest queued task that fits this node passes its not_before; null when none waits. */
  nextReadyInMs: number | null;
}

/** A node that serves a room, as the leader sees it when choosing whom to wake for ready tasks. */
export interface NodeSlots {
  nodeId: string;
  /** capacity minus the tasks its session runs now (any room); may be ≤ 0. */
  free: number;
  /** Ready queued tasks of the room this node could run (labels, actions, pin). */
  fits: number;
}

/**
 * Queued tasks of a room that need the same of a node (action, pin, labels): what a core reads, once
 * for many edges' claims, to answer a claim that nothing fits without a claim transaction
 * (src/app/claim-gate.ts; docs/operations.md, "Edge nodes").
 */
export interface QueuedShape {
  roomId: string;
  action: string;
  /** The node the tasks are pinned to (`on.node`); null: any node. */
  pin: string | null;
  labels: string[];
  /** How many of them are ready now (not_before passed). */
  ready: number;
  /** Store-clock ms until the soonest of the others is ready; null when none waits. */
  nextReadyInMs: number | null;
}

/** The queue as claims see it, read without a transaction. */
export interface QueueReader {
  /** The queued tasks of these rooms, grouped by what a node needs to claim them (QueuedShape). */
  queuedShapes(roomIds: readonly string[]): Promise<QueuedShape[]>;
}

/** The room's ready work and the live nodes that could take it (Scheduler.claimDemand). */
export interface ClaimDemand {
  /** Queued tasks of the room whose not_before has passed. */
  ready: number;
  /** Store-clock ms until the soonest queued task of the room passes its not_before; null when none waits. */
  nextReadyInMs: number | null;
  /** Live nodes serving the room (heartbeat within the window); empty when nothing is ready. */
  nodes: NodeSlots[];
}

/**
 * What a worker reads of a task besides its own claim: whether a cancel reached its attempt
 * (status, attempt, executor) and a producer's published outputs for its arguments (a fan-in's:
 * its fan-out's instances, found by `fanOut` and their ids). An edge node is answered this much of
 * a task and no more (src/adapters/http/edge-routes.ts): no other task's output, error or arguments.
 */
export type WorkerTaskView = Pick<
  TaskRecord,
  "runId" | "taskId" | "status" | "attempt" | "executor" | "fanOut" | "outputPatterns" | "outputValues"
>;

/** The worker's reads of the store (WorkerTaskView): a task, a run's tasks. */
export interface WorkerTaskReader {
  getTask(runId: string, taskId: string): Promise<WorkerTaskView | null>;
  listTasks(runId: string): Promise<WorkerTaskView[]>;
}

export interface TaskClaimer {
  /**
   * Like claimTask for up to `max` tasks in ONE statement (a node claims up to its free slots),
   * reporting whether more fitting tasks were left and when the next waiting one becomes ready.
   */
  claimTasks(offer: NodeOffer, max: number): Promise<ClaimBatch>;
  /**
   * queued → running for ONE task that fits: its room is in roomIds, not_before ≤ now, its labels ⊆
   * the node's labels, `on.node` is null or this node, its action is one the node has. Highest
   * priority first, then first in. Sets executor, lease expiry and deadline. Null when nothing fits.
   * The caller keeps its own count of free slots; it calls this only when it has one.
   */
  claimTask(offer: NodeOffer): Promise<ClaimedTask | null>;
  /** Extend the lease; ConflictError when the task was reclaimed, canceled or finished by someone else. */
  renewTaskLease(token: TaskToken, leaseMs: number): Promise<{ leaseExpiresAt: number; status: TaskStatus }>;
  /**
   * Give up a running attempt whose action the worker stopped because it could not renew the lease
   * in time (the store unreachable past the bound), once the store answers again: decided as a lost
   * attempt (domain/task-states.ts decideLost) with the worker's words `why`, as the reaper would
   * once the lease expired, but at once. Only for an attempt whose action has ended. ConflictError
   * when the token no longer holds a running task (the reaper came first, a cancel).
   */
  releaseTask(token: TaskToken, why: string): Promise<{ status: TaskStatus }>;
  /**
   * While the attempt runs: replace the task's kept output with the tail written so far and the
   * bytes written in all. Fenced like a renewal (ConflictError when the token no longer holds the
   * task, so a stale executor cannot write); not a change of state: no version, event-log line or
   * change notification.
   */
  writeTaskOutput(token: TaskToken, output: string, outputBytes: number): Promise<void>;
  /**
   * Record the end of an attempt, fenced by the token. A failure or timeout with attempts left goes
   * back to queued (attempt + 1, not_before = now + backoff); otherwise the outcome is final.
   */
  finishTask(token: TaskToken, result: TaskResult): Promise<{ status: TaskStatus }>;
  /**
   * finishTask, then claimTasks(offer, max), in ONE transaction and one commit: a worker whose slot
   * frees while fitting tasks are ready hands it straight to the next one (one commit per
   * task instead of two). The finish is fenced and decided exactly as finishTask, and its log line
   * comes before the claim's. When the finish is refused the error is finishTask's and nothing is
   * claimed. The claim picks from the tasks as they were before this finish, so a failure that
   * goes back to the queue is not claimed again by the same call.
   */
  finishAndClaim(
    token: TaskToken,
    result: TaskResult,
    offer: NodeOffer,
    max: number,
  ): Promise<{ status: TaskStatus; batch: ClaimBatch }>;
}

// --- The leader's side

export interface ScheduleResult {
  queued: number;
  skipped: number;
  /** Approval gates opened (src/domain/gates.ts): they stay blocked, awaiting people. */
  opened?: number;
  /** Fan-out templates replaced by their instances (src/domain/fan-out.ts): the next step schedules them. */
  expanded?: number;
}

export interface ReapResult {
  /** running with an expired lease or past its deadline, attempts left → queued. */
  requeued: number;
  failed: number;
  timedOut: number;
  /** canceling with an expired lease → canceled. */
  canceled: number;
  /** pending runs past their confirmation deadline → expired. */
  expiredRuns: number;
  /**
   * Whether the room still holds something a later reap could move, as seen before this one:
   * queued, running or canceling tasks, or runs awaiting confirmation with a deadline. False:
   * nothing can expire until a change (which the feed announces) adds it, so the leader may sleep long.
   */
  open: boolean;
}

export interface RunOutcome {
  runId: string;
  dagId: string;
  from: RunStatus;
  to: RunStatus;
}

/** What the room's cap counts now, for saying why a task waits (src/domain/wait-reasons.ts). */
export interface RoomLoad {
  /** The room's cap on active tasks (getRoomCap). */
  cap: number;
  /** Active tasks (queued, running, canceling) of the room. */
  active: number;
  /** Each concurrency key an active task of the room holds, with that task and its run's DAG id. */
  keys: { key: string; dagId: string; taskId: string }[];
}

export interface Scheduler {
  /**
   * One scheduling step for the fence's room: blocked → skipped where a need ended badly; blocked →
   * queued where every need succeeded, in priority then FIFO order, while the number of active
   * (queued + running + canceling) tasks stays within the room's global cap and the run's
   * max_parallel, and at most one active task per concurrency_key. `incremental`: only workers'
   * claims and finishes may have changed the room since this fence's last step, so the store may
   * decide from what it kept of that step (src/domain/schedule-view.ts) where that still explains
   * the room; a store may always read the whole room instead.
   */
  scheduleStep(fence: LeaderFence, incremental?: boolean): Promise<ScheduleResult>;
  /**
   * The room's ready queued tasks and, when there are any, the live nodes serving the room with
   * their free slots and how many of the ready tasks each could run: whom the leader should wake.
   * `liveWithinMs`: a node whose heartbeat is older than this is left out.
   */
  claimDemand(roomId: string, liveWithinMs: number): Promise<ClaimDemand>;
  /**
   * Wake these nodes' workers for the room's ready tasks (a targeted "wake" change, delivered to the
   * named nodes only where the feed can carry names; elsewhere every worker hears it). A name may
   * say how many tasks the node is woken for, as `nodeId/N` (wakeTarget), so that two nodes woken
   * for one task each do not both claim a batch.
   */
  wakeNodes(roomId: string, nodeIds: readonly string[]): Promise<void>;
  /** Expired task leases, deadlines, queue timeouts and confirmation windows. */
  reap(fence: LeaderFence): Promise<ReapResult>;
  /** Runs whose task set now decides their outcome: running → succeeded/failed, canceling → canceled. */
  deriveRunOutcomes(fence: LeaderFence): Promise<RunOutcome[]>;
  /**
   * The room's global cap on active tasks: raising it lets the next step queue more, lowering never
   * touches running tasks. Sets the room's cap and returns the one it replaced. With a command context the write is fenced
   * and, given an inbox event id, that row is marked handled in the same transaction (result
   * `{ op: "cap", kind: "set", cap, previous }`), so a crash cannot apply one command twice.
   */
  setRoomCap(
    roomId: string,
    cap: number,
    ctx?: CommandContext<{ previous: number }>,
  ): Promise<{ previous: number }>;
  getRoomCap(roomId: string): Promise<number>;
  /** The room's cap, active count and held concurrency keys, read together (one round trip). */
  roomLoad(roomId: string): Promise<RoomLoad>;
  /**
   * Sets the room's cap only where none was ever set (insert-or-ignore): a node applies its
   * configured `limits.global_cap` at start, and a cap changed at run time is never overwritten by
   * a node restarting. True when this call set it.
   */
  initRoomCap(roomId: string, cap: number): Promise<boolean>;
}

// ---------------------------------------------------------------------------------------------
// Room policy: who may do what in a room. It lives in the store so that every node of the room
// enforces the same rules, whatever its own config says.

export interface RoomPolicy {
  /** Room power level needed for the operator commands. */
  powerLevel: number;
  /** User ids allowed the operator commands whatever their power level. */
  allow: string[];
  /** When true, nobody may confirm a run they published. */
  twoPersonRule: boolean;
  /** Publishers whose runs start without a confirmation step. */
  autoConfirm: string[];
  /**
   * Webhooks (hook ids) whose deliveries start runs without a confirmation step; absent (a policy
   * stored before it existed) or empty: every webhook's run awaits confirmation.
   */
  hookAutoConfirm?: string[];
  /** Who may read task output with `logs`. */
  logs: "operators" | "anyone";
  /** Who may ask for pictures with `graph`; absent (a policy stored before it existed): anyone. */
  graph?: "operators" | "anyone";
}

export interface StoredRoomPolicy {
  roomId: string;
  policy: RoomPolicy;
  /** Who set it last: a node id at first start, a user id after a command. */
  setBy: string;
  updatedAt: number;
}

export interface PolicyStore {
  /**
   * Sets the room's policy only where none was ever set (insert-or-ignore): the first node to start
   * in a room sets it from its config. Returns the policy the store holds afterwards.
   */
  initRoomPolicy(
    roomId: string,
    policy: RoomPolicy,
    setBy: string,
  ): Promise<{ set: boolean; stored: StoredRoomPolicy }>;
  getRoomPolicy(roomId: string): Promise<StoredRoomPolicy | null>;
  /**
   * Replaces the room's policy, fenced by the leader's term; given an inbox event id, that row is
   * marked handled in the same transaction (with the answer to a PolicySet).
   * Logged as a `policy.set` event with who, from what and to what.
   */
  setRoomPolicy(
    ctx: CommandContext<PolicySet>,
    roomId: string,
    policy: RoomPolicy,
    by: string,
    options?: SetPolicyOptions,
  ): Promise<
    { kind: "set"; previous: RoomPolicy | null } | { kind: "not-pending"; proposal: PolicyProposal | null }
  >;
  /**
   * Keeps a change a room admin proposed under the two-person rule, fenced by the leader's term; it
   * waits for another admin's confirmation (setRoomPolicy with `confirms`) until `ttlMs` from now on
   * the store's clock. Given an inbox event id, that row is marked handled in the same transaction
   * (with the answer to the proposal as kept). Logged as a `policy.proposed` event.
   */
  proposePolicyChange(
    ctx: CommandContext<PolicyProposal>,
    roomId: string,
    proposal: { changeId: string; change: Record<string, unknown>; by: string; ttlMs: number },
  ): Promise<PolicyProposal>;
  getPolicyProposal(roomId: string, changeId: string): Promise<PolicyProposal | null>;
}

/** What a policy write did, as its command's answer reads it: the policy before, and the proposal it applied. */
export interface PolicySet {
  policy: RoomPolicy;
  previous: RoomPolicy | null;
  /** Set when the change was a proposal that this write confirmed. */
  proposal?: { changeId: string; proposedBy: string };
}

export interface SetPolicyOptions {
  /** What changed, as the app describes it (kept in the `policy.set` event with who and from what). */
  change?: Record<string, unknown>;
  /**
   * The proposal this write applies: it must be pending, not expired, and proposed by someone other
   * than `by`, or nothing is written (`not-pending`); it is marked applied in the same transaction.
   */
  confirms?: string;
}

/** A policy change a room admin proposed under the two-person rule; another admin applies it. */
export interface PolicyProposal {
  roomId: string;
  /** The short id a confirmation names: `!dag policy confirm <id>`. */
  changeId: string;
  /** The change as the app describes it; the store keeps it as given. */
  change: Record<string, unknown>;
  proposedBy: string;
  proposedAt: number;
  /** Store-clock time from which it can no longer be confirmed. */
  expiresAt: number;
  status: "pending" | "applied";
  confirmedBy: string | null;
  confirmedAt: number | null;
}

// ---------------------------------------------------------------------------------------------
// Nodes

export interface NodeHeartbeat {
  session: Session;
  labels: string[];
  capacity: number;
  actions: string[];
  roomIds: string[];
  /**
   * What each action accepts (argv template, argument patterns), so the leader can check a DAG's
   * arguments when it is published. Absent from an older node: its actions' arguments go unchecked.
   */
  actionSpecs?: Record<string, ActionTemplate>;
  /** Encrypted events in its rooms this life of the node could not decrypt (absent: 0). */
  undecryptable?: number;
  /** Why the last of those could not be decrypted, in words (absent: null). */
  undecryptableReason?: string | null;
  /**
   * Whether the node's Matrix device is cross-signed by its account (docs/architecture.md §12);
   * null (or absent) while no room of the node is encrypted, so its crypto is not loaded.
   */
  deviceSigned?: boolean | null;
  /** The release the node runs and the fleet protocol it speaks (src/domain/release.ts). */
  release?: string | null;
  protocol?: number | null;
}

export interface NodeRecord extends NodeHeartbeat {
  actionSpecs: Record<string, ActionTemplate>;
  undecryptable: number;
  undecryptableReason: string | null;
  deviceSigned: boolean | null;
  /** Null for a node of a release before 0.2.0, which recorded neither (docs/architecture.md §11). */
  release: string | null;
  protocol: number | null;
  heartbeatAt: number;
  /** Store clock minus heartbeatAt at read time. */
  heartbeatAgeMs: number;
  /** Tasks in running or canceling held by this session. */
  runningTasks: number;
  startedAt: number;
}

export interface NodeStore {
  /** Upsert by node_id; a new boot id replaces the old session's row. */
  heartbeat(beat: NodeHeartbeat): Promise<void>;
  /**
   * Many nodes' heartbeats in one commit, each as heartbeat() writes it (a core's batch of its edges'
   * beats, docs/operations.md "Edge nodes"). A node named twice is written as its last beat; a bad
   * beat (capacity) refuses the batch and writes nothing.
   */
  heartbeats(beats: readonly NodeHeartbeat[]): Promise<void>;
  listNodes(): Promise<NodeRecord[]>;
  /** Remove the row of this session at a graceful stop (fenced by boot id). */
  removeNode(session: Session): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Outbox: what the leader must send or edit, each with a stable transaction id.

export interface OutboxMessageInput {
  /** Stable and unique: derived from what caused the message (e.g. `reply.<event_id>`), reused on every retry. */
  txnId: string;
  roomId: string;
  eventType: string;
  content: Record<string, unknown>;
  /** When set, this is an edit of the message sent under that txnId; the sender fills in its event id. */
  replacesTxnId?: string | null;
  /**
   * Messages with the same coalesce key supersede each other while unsent: only the newest is
   * sent (status-card edits, so a burst of task changes becomes one edit).
   */
  coalesceKey?: string | null;
}

export type OutboxStatus = "pending" | "sent" | "superseded" | "failed";

export interface OutboxMessage extends OutboxMessageInput {
  seq: number;
  status: OutboxStatus;
  sentEventId: string | null;
  createdAt: number;
  attempts: number;
}

export interface OutboxStore {
  /** Insert-or-ignore on txnId; older pending rows with the same coalesce key become superseded. */
  enqueueOutbox(fence: LeaderFence, messages: OutboxMessageInput[]): Promise<void>;
  /** Pending rows of the fence's room in seq order. */
  pendingOutbox(fence: LeaderFence, limit: number): Promise<OutboxMessage[]>;
  markOutboxSent(fence: LeaderFence, txnId: string, sentEventId: string): Promise<void>;
  markOutboxFailed(fence: LeaderFence, txnId: string, error: string): Promise<void>;
  getOutbox(txnId: string): Promise<OutboxMessage | null>;
}

// ---------------------------------------------------------------------------------------------
// Idempotency keys (confirmations, HTTP API calls)

export interface IdempotencyStore {
  /** Insert-or-ignore: the first caller stores its result; later callers get the stored one back. */
  rememberIdempotencyKey(
    scope: string,
    key: string,
    result: Record<string, unknown>,
  ): Promise<{ kind: "new" } | { kind: "existing"; result: Record<string, unknown> }>;
  /** The result stored under the key, or null when none is: a read that stores nothing. */
  readIdempotencyKey(scope: string, key: string): Promise<Record<string, unknown> | null>;
}

// ---------------------------------------------------------------------------------------------
// Event log: append-only, one sequence increasing within each room.

export interface LogEvent {
  seq: number;
  roomId: string;
  at: number;
  /** e.g. "run.created", "task.queued", "task.running", "lease.acquired", "inbox.handled". */
  kind: string;
  runId: string | null;
  taskId: string | null;
  /** The leader term a leader write was fenced by; null for a worker's write. */
  term: number | null;
  /** The session that wrote it, "nodeId/bootId". */
  actor: string | null;
  data: Record<string, unknown>;
}

export interface EventLogStore {
  readEvents(roomId: string, sinceSeq: number, limit?: number): Promise<LogEvent[]>;
  /**
   * Who canceled or rejected the run (the `by` of its latest run.canceling, run.canceled or
   * run.rejected event), for the words that say how it ended; null when no person did (it expired,
   * or its events were pruned).
   */
  runEndedBy(roomId: string, runId: string): Promise<string | null>;
}

// ---------------------------------------------------------------------------------------------
// Retention: what a leader forgets (docs/configuration.md, "Retention"). Every delete is fenced like any leader
// write, and one call deletes at most one small batch of each kind, so it never holds the write
// lock long; the caller repeats it while a batch came back full.

export interface PruneLimits {
  /**
   * Age (on the store's clock) past which finished things go: runs in a terminal status not
   * updated for this long, with their tasks, their events and their status-card messages (but a
   * definition's first run stays while other runs of it remain or its schedule is approved, and a
   * definition goes with its last run); inbox
   * rows in `replied` state whose receipt AND origin_server_ts are both older (the origin time is
   * what intake's command window is measured against, so a row is kept as long as its event could
   * still be accepted again: the caller keeps this above the window); outbox rows no longer pending
   * (sent, superseded, failed) that are replies (`reply.*`) or belong to a run already pruned
   * (`card.<run>*`, `final.<run>`); and the room's events that belong to no run. Other outbox
   * rows (the one-per-room notices, whose insert-or-ignore must keep them from being sent twice)
   * are kept.
   */
  olderThanMs: number;
  /** Nodes whose last heartbeat is older than this are deleted. */
  nodesOlderThanMs: number;
  /**
   * Idempotency keys (HTTP writes) stored longer ago than this are deleted, whatever their scope: a
   * repeat of such a key afterwards is a new request. Callers keep this at least `olderThanMs`, so a
   * key outlives the command it answered.
   */
  keysOlderThanMs: number;
  /** At most this many runs (each with all its tasks and events) per call. */
  runs: number;
  /** At most this many rows of each other kind per call. */
  rows: number;
}

export interface PruneResult {
  runs: number;
  tasks: number;
  events: number;
  inbox: number;
  outbox: number;
  nodes: number;
  keys: number;
  /** Definitions whose last run went (they are deleted with it). */
  definitions: number;
}

/** A PruneResult of nothing deleted: where a batch's or a round's counts start. */
export const noneDeleted = (): PruneResult => ({
  runs: 0,
  tasks: 0,
  events: 0,
  inbox: 0,
  outbox: 0,
  nodes: 0,
  keys: 0,
  definitions: 0,
});

export interface RetentionStore {
  /** One batch of deletes for the fence's room (and the node list), in one fenced transaction. */
  pruneBatch(fence: LeaderFence, limits: PruneLimits): Promise<PruneResult>;
}

// ---------------------------------------------------------------------------------------------
// Change feed: loops wake on change instead of sleeping (PostgreSQL LISTEN/NOTIFY; SQLite polls cheaply).

/**
 * `ready`: tasks may have become claimable without the scheduler (a retry requeued by its worker),
 * for the leader to look. `wake`: the leader asks some nodes' workers to claim (Scheduler.wakeNodes).
 * `done`: a task ended for good (besides its `tasks` change): its dependents may be ready and its
 * place under the room cap is free, so the leader schedules at once rather than after its debounce.
 */
export type ChangeTopic = "inbox" | "tasks" | "runs" | "outbox" | "lease" | "cap" | "ready" | "wake" | "done";

/**
 * A change heard: its topic, its room (null: any room) and the nodes it names where the feed can
 * carry names: for a `wake` the nodes it is meant for (undefined: everyone, e.g. after a lost
 * connection or where the feed cannot say), for a `tasks` change made by a claim the claimer,
 * prefixed with CLAIM_LEFT_MORE when its batch left fitting tasks behind (it claims again by itself
 * as its slots free, so the leader need not wake it).
 */
export const CLAIM_LEFT_MORE = "+";

/** A wake's name for a node woken for `take` tasks. */
export const wakeTarget = (nodeId: string, take: number): string => `${nodeId}/${take}`;

/** What a wake's names ask of `nodeId`: null when not named, else how many tasks (null count: any). */
export function wakeFor(nodeId: string, names: readonly string[]): { take: number | null } | null {
  for (const name of names) {
    if (name === nodeId) return { take: null };
    if (name.startsWith(`${nodeId}/`)) {
      const take = Number(name.slice(nodeId.length + 1));
      return { take: Number.isInteger(take) && take > 0 ? take : null };
    }
  }
  return null;
}

/**
 * The nodes one of a wake's names names: wakeFor's rule read from the name's side (`a/b/2` names
 * the nodes `a/b/2`, `a/b` and `a`), for a holder of many nodes' streams that looks each name up.
 */
export function nodesNamedBy(name: string): string[] {
  const nodes: string[] = [];
  for (let end = name.indexOf("/"); ; end = name.indexOf("/", end + 1)) {
    nodes.push(end < 0 ? name : name.slice(0, end));
    if (end < 0) return nodes;
  }
}

export type ChangeListener = (topic: ChangeTopic, roomId: string | null, nodes?: readonly string[]) => void;

export interface ChangeFeed {
  /**
   * Calls back (possibly coalesced, possibly spuriously) after a change; returns an unsubscribe
   * function. `topics`: the ones the listener acts on (absent: all); a feed may then leave the
   * others undelivered (PostgreSQL: a process where nobody wants the hot path's topics does not
   * receive the notification of every claim and finish).
   */
  onChange(listener: ChangeListener, topics?: readonly ChangeTopic[]): () => void;
  /**
   * Where this process's writes share a commit (SQLite's group commit): calls `joiner` inside each
   * commit, after its writes ran and before it is durable, with the writes that succeeded; the
   * writes the joiner asks for then, synchronously, join that commit (docs/architecture.md §8, "One
   * commit a step"). Nothing is heard before the commit: a joined write settles after it like any
   * other. A joiner may only ask for writes. Absent where a commit cannot take more (PostgreSQL).
   */
  joinCommits?(joiner: CommitJoiner): () => void;
}

/** A write a commit carried, as a joiner hears it: its operation and the changes it made. */
export interface CommittedWrite {
  operation: string;
  touched: ReadonlyArray<readonly [ChangeTopic, string | null, (readonly string[])?]>;
}

export type CommitJoiner = (writes: readonly CommittedWrite[]) => void;

/**
 * Whether a write may have left tasks of `roomId` claimable: it changed the room's tasks without
 * naming a claimer and ended none, or requeued a retry. A scheduling step, a reap or a retry, that
 * is; a run's creation, confirmation or cancel passes too, and the claim it brings finds nothing. Not
 * a claim (it names its claimer) nor a task's end (its dependents are queued by the leader's step,
 * which joins after it).
 */
export function madeClaimable(write: CommittedWrite, roomId: string): boolean {
  let tasks = false;
  for (const [topic, room, nodes] of write.touched) {
    if (room !== roomId && room !== null) continue;
    if (topic === "done") return false;
    if (topic === "ready" || (topic === "tasks" && nodes === undefined)) tasks = true;
  }
  return tasks;
}

/** Whether a write ended a task of `roomId` (its dependents may be ready now). */
export function endedTask(write: CommittedWrite, roomId: string): boolean {
  return write.touched.some(([topic, room]) => topic === "done" && (room === roomId || room === null));
}

/**
 * The hot path's topics: every claim and finish announces one. Only the room's leader and what
 * follows a room's progress (status cards, `dagbot run`/`logs`, the HTTP event stream) want them.
 */
export const HOT_TOPICS: readonly ChangeTopic[] = ["tasks", "done", "ready"];

// ---------------------------------------------------------------------------------------------
// Triggers: a definition declaring `after` is fired by the leader once per upstream run
// that ended. The store's key (room, definition, upstream run) holds it to once, whoever leads.

/** One upstream run considered for a definition: fired (a run of it) or skipped (why not). */
export interface AfterFiringRecord {
  roomId: string;
  /** The downstream definition. */
  dagId: string;
  upstreamRunId: string;
  /** The upstream run's name (`build.3`) and the status it ended in. */
  upstreamDagId: string;
  upstreamStatus: RunStatus;
  /** The run it started (uuid and name); null when skipped. */
  runId: string | null;
  runDagId: string | null;
  /** Why it was skipped; null when fired. */
  reason: string | null;
  at: number;
  term: number;
}

export interface AfterFiringInput {
  roomId: string;
  /** The downstream definition. */
  dagId: string;
  upstream: Pick<RunRecord, "runId" | "dagId" | "status">;
  /**
   * The run to start: its DAG without an id (the store names it `<dagId>.N`, the next free number,
   * and takes its hash), and the user it runs on the authority of. Null: skipped, for `reason`.
   */
  fire: { dag: Omit<ParsedDag, "id">; publisher: string } | null;
  reason: string | null;
}

/**
 * fired: the run was created, the firing recorded, `after.fired` logged on both runs. skipped: the
 * firing recorded with its reason, `after.skipped` logged on the upstream run. exists: this
 * definition already had a firing for that upstream run (another leader's, or a repeat): nothing
 * was written.
 */
export type AfterFiringResult =
  | { kind: "fired"; run: RunRecord; firing: AfterFiringRecord }
  | { kind: "skipped"; firing: AfterFiringRecord }
  | { kind: "exists"; firing: AfterFiringRecord };

export interface AfterStore {
  /** The room's definitions whose document declares `after`, by dag id; at most `limit` (default 1,000). */
  listAfterDefinitions(roomId: string, options?: { limit?: number }): Promise<DefinitionRecord[]>;
  /**
   * Runs of definition `upstream` that ended (succeeded, failed, canceled) at or after `since` and
   * have no firing recorded for `dagId` yet, the earliest ended first; at most `limit` (default 100).
   */
  unfiredUpstreamRuns(
    roomId: string,
    dagId: string,
    upstream: string,
    since: number,
    options?: { limit?: number },
  ): Promise<RunRecord[]>;
  /**
   * Fenced, in one transaction: records the firing under its key (room, dagId, upstream run) and,
   * when `fire` is given, creates the run (running at once: the definition's approval and its
   * owner's authority stand for a confirmation, as for a schedule's slot).
   */
  recordAfterFiring(fence: LeaderFence, input: AfterFiringInput): Promise<AfterFiringResult>;
  /** The room's firings, newest first, optionally of one definition; at most `limit` (default 100). */
  listAfterFirings(
    roomId: string,
    options?: { dagId?: string; limit?: number },
  ): Promise<AfterFiringRecord[]>;
}

// ---------------------------------------------------------------------------------------------

export interface Store
  extends
    AfterStore,
    LeaseStore,
    InboxStore,
    RunStore,
    DefinitionStore,
    TaskClaimer,
    QueueReader,
    Scheduler,
    PolicyStore,
    NodeStore,
    OutboxStore,
    IdempotencyStore,
    EventLogStore,
    RetentionStore,
    ChangeFeed {
  readonly kind: "sqlite" | "postgres";
  /** The store's clock now, in epoch ms. */
  now(): Promise<number>;
  close(): Promise<void>;
}

/** A node as a store's nodes table shows it to `dagbot migrate`, whatever release wrote the row. */
export interface StoreNodeSeen {
  nodeId: string;
  /** Null for a node of a release before 0.2.0, which recorded neither. */
  release: string | null;
  protocol: number | null;
  heartbeatAgeMs: number;
}

/** What a store holds before a migration: its schema, the steps to this release's, the nodes it has heard of. */
export interface StoreInspection {
  /** 0: no dagbot tables yet. */
  schema: number;
  /** This release's schema. */
  latest: number;
  steps: { version: number; summary: string; fleetProtocol: number | null }[];
  nodes: StoreNodeSeen[];
}

/** Options every adapter's open function accepts. */
export interface StoreOptions {
  /**
   * Open only a store that already holds dagbot's schema: never create the database file, the
   * schema or the tables (StoreMissingError instead). Read-only commands open so (docs/architecture.md,
   * "Faces"): `dagbot status --store sqlite:./typo.db` must not leave an empty store behind.
   */
  existing?: boolean;
  /**
   * Bring a store of an older schema up to this release's. Without it such a store is refused
   * (SchemaTooOldError) and left as it was: only `dagbot migrate`, or a node that finds no other node
   * live, migrates (docs/architecture.md §11). An empty store is always given the schema.
   */
  migrate?: boolean;
  /**
   * Replaces the store's clock (tests of lease expiry and takeover). Production leaves it unset so
   * PostgreSQL's now() is the one clock all hosts agree on.
   */
  clock?: () => number;
}
