/**
 * Why a task waits (docs/architecture.md, "State machines"): the one rule every face
 * shows (chat card and `!dag status`, the CLI's `status` and `run`, HTTP task objects, pictures),
 * decided from what the store already knows. Pure.
 *
 * A task of a pending run awaits confirmation. Of a running run, a blocked task waits, in this order,
 * for its needs (named; a fan-out's template for its producer's list; a task with a run
 * condition, for them to end), for the room (paused by cap 0, or its cap reached), for its run's
 * `max_parallel`, for its fan-out's `max_parallel` (an instance), or for its concurrency key
 * (named, with the task holding it): the conditions
 * decideSchedule (scheduling.ts) checks before it admits a task. A queued task waits out a retry
 * backoff, or for a live node of the room that offers its action (with its labels, and the node it
 * is pinned to), or for a free slot on such a node: the conditions of a claim. A task with none of
 * these is about to move (the leader or a worker has not acted yet) and has no reason. Canceling
 * runs and running or ended tasks never wait.
 */
import type { ForEachSpec, Placement, RunStatus, TaskSpec, TaskStatus } from "./model.js";
import { isConditional, whenWords } from "./run-when.js";
import { ACTIVE_TASK_STATUSES, isTerminalTask } from "./task-states.js";
import type { GateSpec, GateState } from "./gates.js";
import { whoWords } from "./gates.js";

export type WaitReason =
  | { kind: "confirmation" }
  /**
   * The needs that have not succeeded yet, in the task's order; for a task with a run condition
   * (`when`, run-when.ts), the needs that have not ended yet, and its condition.
   */
  | { kind: "needs"; tasks: string[]; when?: ConditionalWhen }
  | { kind: "paused" }
  | { kind: "room-cap"; cap: number; active: number }
  | { kind: "run-cap"; maxParallel: number }
  /** A fan-out's template (fan-out.ts) waits for the list its producer publishes. */
  | { kind: "fan-out-items"; producer: string; output: string }
  /** An instance held by its fan-out's max_parallel. */
  | { kind: "fan-out-cap"; fanOut: string; maxParallel: number }
  /** `holder`: the active task holding the key (its run's DAG id), when known. */
  | { kind: "concurrency-key"; key: string; holder: { dagId: string; taskId: string } | null }
  /** No live node of the room offers `action` (with `labels`, and being `node` when pinned). */
  | { kind: "no-node"; action: string; labels: string[]; node: string | null }
  /** Live nodes fit it but none has a free slot. */
  | { kind: "nodes-busy"; nodes: number }
  /** A retry waits until `until` (the store's clock). */
  | { kind: "backoff"; until: number }
  /** An open approval gate (gates.ts): who may decide, who approved so far, how many it asks for. */
  | { kind: "approval"; who: string; approvedBy: string[]; approvers: number };

/** A run condition other than the default. */
type ConditionalWhen = NonNullable<TaskSpec["when"]>;

export type WaitKind = WaitReason["kind"];
export const WAIT_KINDS = [
  "confirmation",
  "needs",
  "paused",
  "room-cap",
  "run-cap",
  "fan-out-items",
  "fan-out-cap",
  "concurrency-key",
  "no-node",
  "nodes-busy",
  "backoff",
  "approval",
] as const satisfies readonly WaitKind[];

/** What of a task the rule reads; a store's task record fits as it is. */
export interface WaitTask {
  taskId: string;
  status: TaskStatus;
  needs: readonly string[];
  action: string;
  on: Placement;
  concurrencyKey: string | null;
  notBefore: number | null;
  /** An approval gate's spec and state (a task record carries both; null or absent otherwise). */
  gate?: GateSpec | null;
  gateState?: GateState | null;
  /** A fan-out's template: its for_each; an instance: its fan-out and that one's max_parallel. */
  forEach?: ForEachSpec | null;
  fanOut?: string | null;
  fanOutLimit?: number | null;
  /** Its run condition (run-when.ts) when not the default; absent otherwise. */
  when?: TaskSpec["when"];
}

/** A live node serving the room, from its heartbeat. */
export interface WaitNode {
  nodeId: string;
  actions: readonly string[];
  labels: readonly string[];
  /** Its capacity minus the tasks it runs now; may be ≤ 0. */
  free: number;
}

export interface KeyHolder {
  key: string;
  dagId: string;
  taskId: string;
}

export interface WaitFacts {
  runStatus: RunStatus;
  maxParallel: number | null;
  /** Every task of the run (the run's own active count and the needs' statuses come from them). */
  tasks: readonly WaitTask[];
  /** The room's cap on active tasks (0: paused). */
  roomCap: number;
  /** Active tasks (queued, running, canceling) of the whole room. */
  roomActive: number;
  /** Concurrency keys held by active tasks of the room. */
  keysHeld: readonly KeyHolder[];
  /** Live nodes serving the room; null when unknown (then queued tasks get no node reason). */
  nodes: readonly WaitNode[] | null;
  now: number;
}

/** The reason of each task that waits for one, by task id; a task absent from the map does not wait. */
export function explainWaits(facts: WaitFacts): Map<string, WaitReason> {
  const reasons = new Map<string, WaitReason>();
  const waiting = facts.tasks.filter((t) => t.status === "blocked" || t.status === "queued");
  if (facts.runStatus === "pending") {
    for (const t of waiting) reasons.set(t.taskId, { kind: "confirmation" });
    return reasons;
  }
  if (facts.runStatus !== "running") return reasons;
  const statusOf = new Map(facts.tasks.map((t) => [t.taskId, t.status]));
  const runActive = facts.tasks.filter((t) => ACTIVE_TASK_STATUSES.has(t.status)).length;
  const holders = new Map<string, KeyHolder>();
  for (const h of facts.keysHeld) if (!holders.has(h.key)) holders.set(h.key, h);
  for (const t of waiting) {
    const reason =
      t.status === "blocked" ? blockedReason(t, facts, statusOf, runActive, holders) : queuedReason(t, facts);
    if (reason !== null) reasons.set(t.taskId, reason);
  }
  return reasons;
}

function blockedReason(
  t: WaitTask,
  facts: WaitFacts,
  statusOf: ReadonlyMap<string, TaskStatus>,
  runActive: number,
  holders: ReadonlyMap<string, KeyHolder>,
): WaitReason | null {
  // A conditional task waits for its needs to end, whatever they end as (run-when.ts).
  if (t.when !== undefined && isConditional(t.when)) {
    const open = t.needs.filter((n) => {
      const s = statusOf.get(n);
      return s === undefined || !isTerminalTask(s);
    });
    if (open.length > 0) return { kind: "needs", tasks: open, when: t.when };
  } else {
    const unmet = t.needs.filter((n) => statusOf.get(n) !== "succeeded");
    const producer = t.forEach?.producer;
    if (producer !== undefined && unmet.length === 1 && unmet[0] === producer)
      return { kind: "fan-out-items", producer, output: t.forEach!.output };
    if (unmet.length > 0) return { kind: "needs", tasks: unmet };
  }
  // A template whose needs succeeded is replaced by its instances at the next step: no cap holds it.
  if (t.forEach !== undefined && t.forEach !== null) return null;
  // A gate holds no slot: no cap or key holds it, only people (once the scheduler opened it).
  if (t.gate !== undefined && t.gate !== null) {
    const state = t.gateState ?? null;
    if (state === null || state.decision !== null) return null;
    return {
      kind: "approval",
      who: whoWords(t.gate.who),
      approvedBy: state.approvals.map((a) => a.by),
      approvers: t.gate.approvers,
    };
  }
  if (facts.roomCap === 0) return { kind: "paused" };
  if (facts.roomActive >= facts.roomCap)
    return { kind: "room-cap", cap: facts.roomCap, active: facts.roomActive };
  if (facts.maxParallel !== null && runActive >= facts.maxParallel)
    return { kind: "run-cap", maxParallel: facts.maxParallel };
  const fanOut = t.fanOut ?? null;
  const limit = t.fanOutLimit ?? null;
  if (fanOut !== null && limit !== null) {
    const active = facts.tasks.filter(
      (o) => o.fanOut === fanOut && ACTIVE_TASK_STATUSES.has(o.status),
    ).length;
    if (active >= limit) return { kind: "fan-out-cap", fanOut, maxParallel: limit };
  }
  if (t.concurrencyKey !== null) {
    const holder = holders.get(t.concurrencyKey);
    if (holder !== undefined)
      return {
        kind: "concurrency-key",
        key: t.concurrencyKey,
        holder: { dagId: holder.dagId, taskId: holder.taskId },
      };
  }
  return null;
}

function queuedReason(t: WaitTask, facts: WaitFacts): WaitReason | null {
  if (t.notBefore !== null && t.notBefore > facts.now) return { kind: "backoff", until: t.notBefore };
  if (facts.nodes === null) return null;
  const fitting = facts.nodes.filter(
    (n) =>
      n.actions.includes(t.action) &&
      t.on.labels.every((l) => n.labels.includes(l)) &&
      (t.on.node === null || t.on.node === n.nodeId),
  );
  if (fitting.length === 0)
    return { kind: "no-node", action: t.action, labels: [...t.on.labels], node: t.on.node };
  if (fitting.every((n) => n.free <= 0)) return { kind: "nodes-busy", nodes: fitting.length };
  return null;
}

/** A piece of a reason's words: plain text, or a name to show as code. */
export type WaitWord = string | { code: string };

/**
 * The reason in words, names apart so each face can mark them (chat as code, the terminal in
 * backticks). Stable while the reason holds: no counts that move on their own.
 */
export function waitWords(reason: WaitReason): WaitWord[] {
  switch (reason.kind) {
    case "confirmation":
      return ["awaits confirmation"];
    case "needs":
      return reason.when === undefined
        ? ["needs ", ...names(reason.tasks)]
        : ["waits for ", ...names(reason.tasks), " to end; ", whenWords(reason.when)];
    case "paused":
      return ["room paused (cap 0)"];
    case "room-cap":
      return [`room cap reached (${reason.cap} active)`];
    case "run-cap":
      return [`the run's max_parallel reached (${reason.maxParallel} active)`];
    case "fan-out-items":
      return [
        "fans out over the list ",
        { code: reason.output },
        " of ",
        { code: reason.producer },
        " once it succeeds",
      ];
    case "fan-out-cap":
      return ["fan-out ", { code: reason.fanOut }, `'s max_parallel reached (${reason.maxParallel} active)`];
    case "concurrency-key":
      return [
        "concurrency key ",
        { code: reason.key },
        ...(reason.holder === null
          ? []
          : [" held by ", { code: `${reason.holder.dagId}/${reason.holder.taskId}` }]),
      ];
    case "no-node": {
      const words: WaitWord[] = ["no live node "];
      if (reason.node !== null) words.push({ code: reason.node }, " ");
      if (reason.labels.length > 0) words.push("with labels ", ...names(reason.labels), " ");
      words.push("offers action ", { code: reason.action });
      return words;
    }
    case "nodes-busy":
      return [
        reason.nodes === 1 ? "its one fitting node is busy" : `all ${reason.nodes} fitting nodes are busy`,
      ];
    case "backoff":
      return ["retry backoff"];
    case "approval": {
      const words: WaitWord[] = [`awaits approval by ${reason.who}`];
      if (reason.approvers > 1 || reason.approvedBy.length > 0) {
        words.push(` (${reason.approvedBy.length} of ${reason.approvers}`);
        if (reason.approvedBy.length > 0) words.push(": ", ...names(reason.approvedBy));
        words.push(")");
      }
      return words;
    }
  }
}

function names(list: readonly string[]): WaitWord[] {
  const out: WaitWord[] = [];
  list.forEach((n, i) => {
    if (i > 0) out.push(", ");
    out.push({ code: n });
  });
  return out;
}

const backticks = (name: string): string => `\`${name}\``;

/** The reason as one line of plain text, names in backticks (or marked by `mark`). */
export function waitText(reason: WaitReason, mark: (name: string) => string = backticks): string {
  return waitWords(reason)
    .map((w) => (typeof w === "string" ? w : mark(w.code)))
    .join("");
}

/** A reason with its words, as task objects carry it in JSON. */
export type ExplainedWait = WaitReason & { text: string };

export function explained(reason: WaitReason): ExplainedWait {
  return { ...reason, text: waitText(reason) };
}

export interface WaitGroup {
  text: string;
  taskIds: string[];
}

/**
 * The run's waits grouped by their words, most tasks first, for one line about a run. `needs` is
 * left out: waiting for a task of the same run is the run making progress, not being held.
 */
export function groupWaits(
  reasons: ReadonlyMap<string, WaitReason>,
  mark: (name: string) => string = backticks,
): WaitGroup[] {
  const groups = new Map<string, string[]>();
  for (const [taskId, reason] of reasons) {
    if (reason.kind === "needs") continue;
    const text = waitText(reason, mark);
    const list = groups.get(text);
    if (list === undefined) groups.set(text, [taskId]);
    else list.push(taskId);
  }
  return [...groups.entries()]
    .map(([text, taskIds]) => ({ text, taskIds }))
    .sort((a, b) => b.taskIds.length - a.taskIds.length || (a.text < b.text ? -1 : a.text > b.text ? 1 : 0));
}

/** `3 tasks wait: no live node offers action \`deploy\`; 1 task waits: room paused (cap 0)`; "" when none. */
export function waitsLine(groups: readonly WaitGroup[]): string {
  return groups
    .map((g) => `${g.taskIds.length} ${g.taskIds.length === 1 ? "task waits" : "tasks wait"}: ${g.text}`)
    .join("; ");
}
