/**
 * The shapes of outcomes and of command inputs as zod schemas, for the faces that speak data: the
 * HTTP routes the verb files declare (request validation, response serialisation, the OpenAPI
 * document) read them. The compile-time checks at the end keep them the same as the outcome types
 * of outcome.ts: a field added to one and not the other does not compile.
 */
import { z } from "zod";
import {
  COMMAND_ID_PATTERN,
  isTaskId,
  LIBRARY_NAME_PATTERN,
  MAX_CAP,
  MAX_COMMAND_BYTES,
} from "../../domain/command-grammar.js";
import { RUN_STATUSES, TASK_STATUSES } from "../../domain/model.js";
import type { MatrixGroupLine, RunSummary, ScheduleLine, TaskLine } from "./outcome.js";
import { MAX_LIST_LIMIT } from "../run-list.js";

export const idParam = z.string().regex(COMMAND_ID_PATTERN, { error: "use 1-64 of A-Z a-z 0-9 _ . -" });

/** Room ids are Matrix ids ("!abc:server") or "local": printable, bounded. */
export const roomParam = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[\x21-\x7e]+$/, { error: "a room id is printable ASCII without spaces" });

export const runParams = z.strictObject({ id: idParam });
/** A task id in a path: an id, or a matrix instance's (`deploy[region=eu]`, percent-encoded or not). */
export const taskIdParam = z.string().refine(isTaskId, {
  error: "use 1-64 of A-Z a-z 0-9 _ . -, or a matrix instance's id like deploy[region=eu]",
});
export const taskParams = z.strictObject({ id: idParam, task: taskIdParam });
export const roomParams = z.strictObject({ room: roomParam });

const runStatus = z.enum(RUN_STATUSES);
const taskStatus = z.enum(TASK_STATUSES);

export const runSummarySchema = z
  .object({
    runId: z.string(),
    dagId: z.string(),
    status: runStatus,
    description: z.string().nullable(),
    publisher: z.string(),
    confirmedBy: z.string().nullable(),
    publishEventId: z.string().nullable(),
    confirmDeadline: z.number().nullable(),
    createdAt: z.number(),
    updatedAt: z.number(),
    taskCount: z.number(),
    hash: z.string().optional(),
    definition: z.string().optional().describe("for a run started by POST /v1/runs: the published DAG"),
    params: z.record(z.string(), z.string()).optional().describe("the run's parameter values"),
    hook: z
      .object({ id: z.string(), delivery: z.string(), link: z.string().optional() })
      .optional()
      .describe("the webhook delivery that started the run: hook id, delivery id, a link from its payload"),
    registered: z
      .literal(true)
      .optional()
      .describe("a published run that registered its DAG without running it (it holds no task)"),
  })
  .meta({ id: "RunSummary" });

export const taskSummarySchema = z
  .object({
    total: z.number(),
    byStatus: z.record(z.string(), z.number()),
    done: z.number(),
    active: z.number(),
    percent: z.number(),
  })
  .meta({ id: "TaskSummary" });

/** Why a task waits (src/domain/wait-reasons.ts), its words in `text`. */
const waitOf = <K extends string, S extends z.ZodRawShape>(kind: K, shape: S) =>
  z.object({ kind: z.literal(kind), text: z.string(), ...shape });
export const taskWaitSchema = z
  .discriminatedUnion("kind", [
    waitOf("confirmation", {}),
    waitOf("needs", {
      tasks: z
        .array(z.string())
        .describe("the needs that have not succeeded (for a task with a run condition: not ended)"),
      when: z
        .enum(["failed", "denied", "done"])
        .optional()
        .describe("the task's run condition, when not the default: it waits for its needs to end"),
    }),
    waitOf("paused", {}),
    waitOf("room-cap", { cap: z.number(), active: z.number() }),
    waitOf("run-cap", { maxParallel: z.number() }),
    waitOf("fan-out-items", {
      producer: z.string().describe("the task whose list output the fan-out waits for"),
      output: z.string(),
    }),
    waitOf("fan-out-cap", { fanOut: z.string().describe("the fan-out's id"), maxParallel: z.number() }),
    waitOf("concurrency-key", {
      key: z.string(),
      holder: z.object({ dagId: z.string(), taskId: z.string() }).nullable(),
    }),
    waitOf("no-node", { action: z.string(), labels: z.array(z.string()), node: z.string().nullable() }),
    waitOf("nodes-busy", { nodes: z.number() }),
    waitOf("backoff", { until: z.number() }),
    waitOf("approval", {
      who: z.string().describe("who may decide, in words"),
      approvedBy: z.array(z.string()).describe("who approved so far"),
      approvers: z.number().describe("distinct approvals the gate asks for"),
    }),
  ])
  .meta({ id: "TaskWait" });

export const taskLineSchema = z
  .object({
    taskId: z.string(),
    action: z.string(),
    status: taskStatus,
    node: z.string().nullable(),
    attempt: z.number(),
    maxAttempts: z.number(),
    startedAt: z.number().nullable(),
    finishedAt: z.number().nullable(),
    exitCode: z.number().nullable(),
    error: z.string().nullable(),
    lastLine: z
      .string()
      .optional()
      .describe("a failed or timed-out task's last printed line (masked, cut to one short line)"),
    wait: taskWaitSchema.optional().describe("why a blocked or queued task waits; absent when it does not"),
    outputs: z
      .record(z.string(), z.union([z.string(), z.array(z.string())]))
      .optional()
      .describe(
        "the values the task published for its dependents (DAGBOT_OUTPUT; a list output's items as an array); absent while it has none",
      ),
    decided: z
      .string()
      .optional()
      .describe(
        "who decided the task's end: an approval gate's decision (who, from which face, when, approved or denied), its timeout, an operator's mark (marked succeeded|skipped by whom, from which face, when, why), or, for a task with a run condition (when) that was skipped, that its condition was not met",
      ),
  })
  .meta({ id: "TaskLine" });

/** A DAG to publish: a JSON document, a TOML or JSON text, or a file of the node's library folder. */
/** GET /v1/runs: a page of the room's runs (the list verb's query and answer). */
const STATUS_LIST = new RegExp(`^(${RUN_STATUSES.join("|")})(,(${RUN_STATUSES.join("|")}))*$`);

export const listQuery = z.strictObject({
  room: roomParam.optional(),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_LIST_LIMIT)
    .optional()
    .describe(`how many runs (1 to ${MAX_LIST_LIMIT}; default 15)`),
  cursor: z
    .string()
    .max(80)
    .optional()
    .describe("where to go on: the `next` of the previous page (or its Link rel=next)"),
  status: z
    .string()
    .regex(STATUS_LIST, { error: `comma-separated run statuses: ${RUN_STATUSES.join(", ")}` })
    .optional()
    .describe("only runs in these statuses (comma-separated)"),
  dag: idParam.optional().describe("only the runs of this published DAG"),
});

export const runListSchema = z.object({
  room: z.string(),
  runs: z.array(z.object({ run: runSummarySchema, summary: taskSummarySchema })),
  /** The cursor of the next page; null on the last. */
  next: z.string().nullable(),
  at: z.number(),
});

/** GET /v1/runs/{id}: one run with every task (the status verb's answer). */
export const matrixGroupSchema = z
  .object({
    task: z.string().describe("the matrix task's id as the document wrote it"),
    summary: taskSummarySchema.describe("its instances' counts"),
  })
  .meta({ id: "MatrixGroup" });

export const runStatusSchema = z.object({
  room: z.string(),
  run: runSummarySchema,
  summary: taskSummarySchema,
  tasks: z.array(taskLineSchema),
  roomCap: z.number().optional(),
  at: z.number(),
  failure: z
    .string()
    .optional()
    .describe("a failed run only: its failed tasks with how each ended, then its skipped ones, in words"),
  groups: z
    .array(matrixGroupSchema)
    .optional()
    .describe("its matrix tasks, each with its instances' counts (the instances are among tasks)"),
});

const registerField = z
  .boolean()
  .optional()
  .describe("true: register the definition (its schedule, after, webhooks) without starting a run now");

export const publishBody = z
  .union([
    z.strictObject({
      document: z
        .record(z.string(), z.unknown())
        .describe("the DAG as a JSON object (docs/architecture.md §6)"),
      register: registerField,
    }),
    z.strictObject({
      text: z.string().min(1).max(MAX_COMMAND_BYTES),
      format: z.enum(["toml", "json"]),
      register: registerField,
    }),
    z.strictObject({ library: z.string().regex(LIBRARY_NAME_PATTERN), register: registerField }),
  ])
  .describe("exactly one of: document, text + format, library; and `register` to publish without running");

export const confirmBody = z
  .strictObject({
    hash: z
      .string()
      .regex(/^[0-9a-fA-F]{8,64}$/, { error: "8 to 64 hex digits of the run's content hash" })
      .optional()
      .describe("a prefix of the content hash you reviewed: the run starts only if it matches"),
  })
  .nullish();

export const emptyBody = z.strictObject({}).nullish();

export const capBody = z.strictObject({ cap: z.number().int().min(0).max(MAX_CAP) });

/** Every write answers with the command's id and its answer as plain text, beside its data. */
export const commandAnswer = {
  commandId: z.string().describe("the inbox event id of the command"),
  text: z.string().nullable().describe("the answer as plain text"),
};

/** POST /v1/runs: a new run of a published DAG; each value one word, as `!dag run` takes it. */
export const triggerBody = z.strictObject({
  dagId: idParam.describe("the published DAG's id"),
  params: z
    .record(
      z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, { error: "a parameter name: letters, digits, _" }),
      z
        .string()
        .max(4096)
        .regex(/^[^\s]*$/, { error: "a parameter value is one word: no spaces or line breaks" }),
    )
    .optional()
    .describe("values for the DAG's declared parameters (name → value); left out ones take their default"),
});

export const triggeredSchema = z.object({
  ...commandAnswer,
  result: z.literal("created"),
  run: runSummarySchema,
  needsConfirmation: z.boolean(),
});

export const publishedSchema = z.object({
  ...commandAnswer,
  result: z.enum(["published", "exists"]),
  run: runSummarySchema,
  needsConfirmation: z.boolean(),
});

export const decisionSchema = z.object({
  ...commandAnswer,
  result: z.enum(["done", "already"]),
  run: runSummarySchema,
});

/** POST /v1/runs/{id}/gates/{task}/approve (the form's values) and …/deny (a reason). */
export function gateBody(verb: "approve" | "deny") {
  return verb === "approve"
    ? z
        .strictObject({
          values: z
            .record(
              z
                .string()
                .regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, { error: "a field name: letters, digits, _" }),
              z
                .string()
                .max(4096)
                .regex(/^[^\s]*$/, { error: "a form value is one word: no spaces or line breaks" }),
            )
            .optional()
            .describe("values for the gate's form (field → value); they become the gate's outputs"),
        })
        .nullish()
    : z
        .strictObject({ reason: z.string().max(500).optional().describe("why, kept in the run's history") })
        .nullish();
}

export const gateDecisionSchema = z.object({
  ...commandAnswer,
  result: z.enum(["recorded", "approved", "denied", "already"]),
  runId: z.string(),
  dagId: z.string(),
  gate: z.string(),
  by: z.string(),
  missing: z.number().optional().describe("approvals the gate still waits for"),
  values: z.record(z.string(), z.string()).optional().describe("the form's values once approved"),
});

export const retriedSchema = z.object({
  ...commandAnswer,
  from: runSummarySchema,
  run: runSummarySchema,
  taskIds: z.array(z.string()),
  needsConfirmation: z.boolean(),
});

export const capSchema = z.object({ ...commandAnswer, cap: z.number(), previous: z.number() });

/** A change of the room's policy, in the words typed after `!dag policy` (`logs`, `anyone`). */
export const policyChangeBody = z.strictObject({
  setting: z
    .string()
    .min(1)
    .max(32)
    .describe("power_level, two_person_rule, logs, graph, allow, auto_confirm or hook_auto_confirm"),
  value: z
    .string()
    .min(1)
    .max(300)
    .describe(
      "as typed: 0-100, on|off, operators|anyone, +@user:server / -@user:server, +<hook id> / -<hook id>",
    ),
});

export const policyConfirmParams = z.strictObject({
  room: roomParam,
  change: z
    .string()
    .regex(/^[0-9a-f]{8}$/)
    .describe("the proposal's id (8 hex digits)"),
});

const roomPolicySchema = z.object({
  powerLevel: z.number(),
  twoPersonRule: z.boolean(),
  logs: z.string(),
  graph: z.string().optional(),
  allow: z.array(z.string()),
  autoConfirm: z.array(z.string()),
  hookAutoConfirm: z.array(z.string()).optional(),
});

/** The room's policy (shown or changed), or a change proposed under the two-person rule. */
export const policySchema = z.object({
  commandId: commandAnswer.commandId.optional(),
  text: commandAnswer.text,
  room: z.string().optional(),
  policy: roomPolicySchema.optional(),
  changed: z.string().nullable().optional().describe("what the change did; null when only shown"),
  by: z.string().optional(),
  proposed: z
    .object({ changeId: z.string(), change: z.string(), by: z.string(), expiresAt: z.number() })
    .optional()
    .describe("a change awaiting a second admin (two-person rule)"),
});

/** One schedule as `GET /v1/schedules` lists it (the outcome's ScheduleLine). */
export const scheduleLineSchema = z.object({
  dagId: z.string(),
  cron: z.string(),
  timezone: z.string(),
  missed: z.enum(["skip", "run_once"]),
  next: z.number().nullable().describe("the next slot (epoch ms); null while paused or when none is left"),
  last: z.number().nullable().describe("the newest slot a run was created for"),
  active: z.boolean().describe("false while its published run awaits confirmation"),
  state: z.enum(["active", "paused"]).optional(),
  pausedBy: z.string().nullable().optional(),
  pausedAt: z.number().nullable().optional(),
  reason: z.string().nullable().optional(),
  owner: z.string().optional(),
});

export const schedulesSchema = z.object({
  room: z.string(),
  text: z.string().nullable(),
  at: z.number(),
  schedules: z.array(scheduleLineSchema),
});

/** One DAG declaring `after` as `GET /v1/triggers` lists it (the outcome's TriggerLine). */
export const triggerLineSchema = z.object({
  dagId: z.string(),
  after: z.string().describe("the upstream DAG"),
  status: z.array(z.string()).describe('the statuses of its runs that fire this DAG ("finished": any end)'),
  params: z.record(z.string(), z.string()).describe("parameter → source in the upstream run"),
  active: z.boolean().describe("false while its published run awaits confirmation"),
  owner: z.string(),
  last: z
    .object({
      upstream: z.string(),
      status: z.string(),
      run: z.string().nullable().describe("the run it started; null when skipped"),
      reason: z.string().nullable().describe("why it was skipped"),
      at: z.number(),
    })
    .nullable(),
});

export const triggersSchema = z.object({
  room: z.string(),
  text: z.string().nullable(),
  at: z.number(),
  triggers: z.array(triggerLineSchema),
  schedules: z.number().describe("how many schedules the room has: GET /v1/schedules lists them"),
});

export const scheduleParams = z.strictObject({ id: idParam });

/** POST /v1/schedules/{id}/pause, DELETE /v1/schedules/{id}: why, kept with the schedule. */
export const scheduleReasonBody = z.strictObject({ reason: z.string().max(200).optional() }).nullish();

export const scheduleChangedSchema = z.object({
  ...commandAnswer,
  action: z.enum(["pause", "resume", "delete"]),
  result: z.enum(["done", "already"]),
  dagId: z.string(),
  state: z.enum(["active", "paused", "deleted"]),
  by: z.string(),
});

// The schemas and the outcome types say the same, both ways.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _runSummarySame: Same<z.output<typeof runSummarySchema>, RunSummary> = true;
const _taskLineSame: Same<z.output<typeof taskLineSchema>, TaskLine> = true;
const _matrixGroupSame: Same<z.output<typeof matrixGroupSchema>, MatrixGroupLine> = true;
const _scheduleLineSame: Same<z.output<typeof scheduleLineSchema>, ScheduleLine> = true;
