/** The shared vocabulary of dagbot: the parsed DAG and the state names every layer speaks. */
import type { OutputDeclaration } from "./outputs.js";

/** A task's life, docs/architecture.md §3. The transition table lives in task-states.ts. */
export const TASK_STATUSES = [
  "blocked",
  "queued",
  "running",
  "canceling",
  "succeeded",
  "failed",
  "timed_out",
  "canceled",
  "skipped",
] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** A DAG run's life, docs/architecture.md §3. The transition table lives in run-states.ts. */
export const RUN_STATUSES = [
  "pending",
  "running",
  "canceling",
  "succeeded",
  "failed",
  "canceled",
  "rejected",
  "expired",
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** A value a DAG may pass to an action argument; the executor renders it as a string. */
export type ArgValue = string | number | boolean;

/** Where a task may run: every label must be on the node; `node` pins it to one node_id. */
export interface Placement {
  labels: string[];
  node: string | null;
}

/** One task of a validated DAG, with every default filled in. Durations are milliseconds. */
export interface TaskSpec {
  id: string;
  action: string;
  args: Record<string, ArgValue>;
  needs: string[];
  on: Placement;
  /** Run time limit; null means the action's own timeout from the node config. */
  timeoutMs: number | null;
  /** How long the task may wait in the queue before it times out; null means no limit. */
  queueTimeoutMs: number | null;
  retries: number;
  /** Base of the exponential backoff between attempts. */
  retryBackoffMs: number;
  /** At most one active (queued-for-claim or running) task per key across the room, FIFO behind it. */
  concurrencyKey: string | null;
  /** Higher is claimed first; ties go first in, first out. */
  priority: number;
  /**
   * The values it publishes for its dependents (outputs.ts): name → RE2 pattern of the whole value,
   * or a list output (`{ pattern, list: true, maxItems }`). Absent when it declares none, so older
   * DAGs keep their hash.
   */
  outputs?: Record<string, OutputDeclaration>;
  /**
   * `false` when an attempt whose node was lost must not run again (`rerun_if_lost = false`: an
   * action that must never run twice); absent otherwise, so older DAGs keep their hash.
   */
  rerunIfLost?: false;
  /**
   * Set on an approval gate (`approve = { ... }`, gates.ts): it runs no action (`action` is
   * "approve"), it waits for people; its form's fields are its `outputs`. Absent on every other
   * task, so their DAGs keep their hash.
   */
  gate?: GateSpec;
  /**
   * Its run condition (`when`, run-when.ts) when not the default "succeeded": it waits for its needs
   * to end and runs if one failed, an approval it needs was denied, or whatever they ended as.
   * Absent otherwise, so older DAGs keep their hash.
   */
  when?: "failed" | "denied" | "done";
  /**
   * Set on a fan-out's template (`for_each`, fan-out.ts): it never runs itself; when its producer
   * succeeds the leader writes one instance per item of the list. Absent on every other task, so
   * their DAGs keep their hash.
   */
  forEach?: ForEachSpec;
}

/** A task's `for_each`, defaults filled in: the list it fans out over, and how its instances run. */
export interface ForEachSpec {
  /** The task whose list output gives the items (a need of the template). */
  producer: string;
  /** The list output's name. */
  output: string;
  /** At most this many of its instances active at once (queued, running, canceling); null: no own limit. */
  maxParallel: number | null;
  /** true: once an instance ends failed or timed out, its instances that have not started are skipped. */
  failFast: boolean;
}

/** A DAG that passed the schema and the graph checks. Tasks keep the document's order. */
export interface ParsedDag {
  id: string;
  description: string | null;
  /** Per-run cap on running tasks; null means only the room's global cap applies. */
  maxParallel: number | null;
  tasks: TaskSpec[];
  /**
   * Parameters a run gives values for (`[params.NAME]`), substituted into task arguments where they
   * say `{params.NAME}`. Absent when the document declares none, so older DAGs keep their hash.
   */
  params?: Record<string, ParamSpec>;
  /**
   * A run's parameter values (every declared one, defaults filled in); absent when none are declared.
   * Stored with the run, not part of the definition's hash (see params.ts).
   */
  values?: Record<string, string>;
  /** For a run started by `!dag run` / `dagbot trigger`: the id of the definition it is a run of. */
  definition?: string;
  /** A definition's schedule (`schedule`, `timezone`, `missed`); absent when it has none. */
  schedule?: { cron: string; timezone: string; missed: "skip" | "run_once" };
  /**
   * For a run its leader's schedule started: the slot it fired for (see schedule.ts). `quiet`: it
   * has no status card or final message in chat (its schedule fires more often than once a minute).
   */
  slot?: { at: number; covers: number; firstCovered: number; quiet?: true };
  /** A definition's `after` declaration (after.ts): it runs when a run of another DAG ends so. */
  after?: AfterSpec;
  /** For a run the leader started after another DAG's run: which run, how it ended (after.ts). */
  trigger?: RunTrigger;
  /** For a run a webhook delivery started: the hook, the delivery id, a link from its payload (webhook.ts). */
  hook?: { id: string; delivery: string; link?: string };
  /**
   * A definition's published run that registers it without running it (publish's register
   * choice): it is confirmed like any publish, holds no task, and ends succeeded once confirmed,
   * so its schedule, `after` and webhooks run on that confirmation (docs/dag-format.md, "Publishing
   * without running"). Not part of the definition (params.ts definitionOf).
   */
  registered?: true;
}

/** One declared parameter: the whole value must match `pattern` (RE2); no default means required. */
export interface ParamSpec {
  pattern: string;
  default: string | null;
}

/** What a declaration may name: an end status, or `finished` for any of them. */
export const AFTER_STATUSES = ["succeeded", "failed", "canceled", "finished"] as const;
export type AfterStatus = (typeof AFTER_STATUSES)[number];

/** A definition's `after` declaration, defaults filled in. */
export interface AfterSpec {
  /** The upstream definition's DAG id (in the same room). */
  dag: string;
  /** The statuses that fire it, in the order given; `finished` stands for every end status. */
  status: AfterStatus[];
  /** This DAG's parameter → where its value comes from in the upstream run (`params.X`, `tasks.T.outputs.N`). */
  params: Record<string, string>;
}

/** What started a run the leader fired after another (kept in the run's DAG, shown in its picture's title). */
export interface RunTrigger {
  /** The upstream definition's id. */
  dag: string;
  /** The upstream run's name (`build.3`) and uuid. */
  run: string;
  runId: string;
  /** The status it ended in. */
  status: RunStatus;
  /** How many `after` links lead to this run: 1 after a run started otherwise (MAX_AFTER_DEPTH bounds it). */
  depth: number;
}

/** Who may approve: the room's operators, a list of user ids, or everyone at or above a power level. */
export type GateWho = "operators" | readonly string[] | number;

/** A gate as the DAG declares it, every default filled in. Durations in milliseconds. */
export interface GateSpec {
  who: GateWho;
  /** Distinct approvals needed. */
  approvers: number;
  /**
   * The run's publisher and confirmer may approve only when this is true AND the room's two-person
   * rule is off; the document cannot loosen the room's rule.
   */
  publisherMayApprove: boolean;
  /** Null: the gate waits until someone decides (or the run is canceled). */
  timeoutMs: number | null;
  onTimeout: "fail" | "skip";
  description: string | null;
  /** Field name → RE2 pattern the whole value must match; the approved values are the gate's outputs. */
  form: Record<string, string>;
}
