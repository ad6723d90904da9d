/**
 * The one table of what each outcome kind means outside chat: its HTTP status (a success, or a
 * problem type), the CLI's exit status, and its plain text. Chat renders outcomes with the verbs'
 * own renderers (render/reply.ts); the CLI and HTTP read only this table, so an outcome is mapped to
 * each face once, here. A reference to another command in the text is the face's own (`dagbot
 * confirm x` on the CLI, `POST /v1/runs/x/confirm` over HTTP): the face passes its Idiom, built from
 * the verb declarations (docs/architecture.md, "verbs").
 */
import { describeRelease } from "../../domain/release.js";
import { outcomeLine } from "../../domain/run-counts.js";
import { shortHash } from "../../domain/command-grammar.js";
import { formatDuration, runTimeWords } from "../../domain/duration.js";
import { exitWords } from "../../domain/exit-status.js";
import { againWords } from "../../domain/failure-words.js";
import { TASK_STATUSES } from "../../domain/model.js";
import { retryWords } from "../picture-budget.js";
import { showsPaused } from "../render/status-card.js";
import { deviceWords, undecryptableWords } from "../render/node-crypto-words.js";
import { emptyListWords, plural, RUN_SAID, RUN_WORD, TASK_WORD } from "../render/words.js";
import type { Outcome, OutcomeKind, RunSummary } from "./outcome.js";
import { gateSucceeded, gateText } from "./gate-decisions.js";

/** How a face names a command: `dagbot confirm x h` on the CLI, `POST /v1/runs/x/confirm` over HTTP. */
export interface Idiom {
  command(verb: string, args: readonly string[]): string;
}

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
  text(o: Extract<Outcome, { kind: K }>, say: Idiom): string;
  /** A line beside the answer (the CLI prints it on stderr, so stdout stays the answer): a next page. */
  aside?(o: Extract<Outcome, { kind: K }>, say: Idiom): string | null;
}

const ok200: HttpAnswer = { ok: true, status: 200 };
const success = (): number => EXIT_OK;
const refused = (): number => EXIT_REFUSED;
const problem = (status: number, code: OutcomeProblemCode, extra?: Record<string, unknown>): HttpAnswer => ({
  ok: false,
  status,
  problem: code,
  ...(extra === undefined ? {} : { extra }),
});

/** The command that confirms a run as it was shown: with its hash when it has one. */
function confirmArgs(run: RunSummary): string[] {
  return run.hash === undefined ? [run.dagId] : [run.dagId, shortHash(run.hash)];
}

function created(run: RunSummary, what: string): string {
  const hash = run.hash === undefined ? "" : `, content hash ${shortHash(run.hash)}`;
  const values = Object.entries(run.params ?? {});
  const given = values.length === 0 ? "" : `; ${values.map(([n, v]) => `${n}=${v}`).join(" ")}`;
  return `${what} ${run.dagId} (${plural(run.taskCount, "task")}${hash}${given}).`;
}

function awaiting(run: RunSummary, twoPersonRule: boolean, say: Idiom): string {
  const expiry =
    run.confirmDeadline === null
      ? ""
      : ` within ${formatDuration(Math.max(0, run.confirmDeadline - run.createdAt))}`;
  const who = twoPersonRule ? "someone other than the publisher" : "an operator";
  return `It awaits confirmation${expiry} by ${who}: ${say.command("confirm", confirmArgs(run))} (or ${say.command(
    "reject",
    [run.dagId],
  )} to drop it).`;
}

const TABLE: { readonly [K in OutcomeKind]: Entry<K> } = {
  help: {
    http: () => ok200,
    exit: success,
    text: (o) => o.entries.map((e) => `${e.verb} — ${e.summary}`).join("\n"),
  },
  "command-error": {
    http: () => problem(400, "command-error"),
    exit: refused,
    text: (o) =>
      o.corrected === undefined ? o.message : `${o.message} — did you mean "${o.corrected.command}"?`,
  },
  refused: { http: () => problem(403, "refused"), exit: refused, text: (o) => o.reason },
  "hash-mismatch": {
    http: (o) => problem(409, "hash-mismatch", { hash: o.run.hash ?? null, given: o.given, run: o.run }),
    exit: refused,
    text: (o, say) =>
      `${o.run.dagId} has content hash ${shortHash(o.run.hash ?? "")}, not ${o.given.slice(0, 12)}: it was not started. ` +
      `If that is the DAG you reviewed, ${say.command("confirm", confirmArgs(o.run))}.`,
  },
  published: {
    http: () => ({ ok: true, status: 201 }),
    exit: success,
    text: (o, say) => {
      if (o.run.registered === true) {
        const head = `Registered ${o.run.dagId} without running it: no task runs now; its schedule, after and webhooks start its runs once it is confirmed.`;
        return o.needsConfirmation ? `${head} ${awaiting(o.run, o.twoPersonRule, say)}` : head;
      }
      const head = created(
        o.run,
        o.run.definition === undefined ? "Published" : `New run of ${o.run.definition}:`,
      );
      return o.needsConfirmation
        ? `${head} ${awaiting(o.run, o.twoPersonRule, say)}`
        : `${head} It starts now.`;
    },
  },
  exists: {
    http: () => ok200,
    exit: success,
    text: (o, say) =>
      `${o.run.dagId} already exists with the same content: nothing new was stored. It ${RUN_SAID[o.run.status]}; ` +
      `${say.command("status", [o.run.dagId])} shows it.`,
  },
  conflict: {
    http: (o) => problem(409, "conflict", { dagId: o.dagId, existing: o.existing, suggestion: o.suggestion }),
    exit: refused,
    text: (o) =>
      `${o.dagId} already exists with different content (${RUN_WORD[o.existing.status]}): nothing was stored. ` +
      `Give this DAG another id, for example ${o.suggestion}.`,
  },
  "invalid-dag": {
    http: (o) => problem(422, "invalid-dag", { issues: o.issues, moreIssues: o.moreIssues }),
    exit: refused,
    text: (o) =>
      [
        `The DAG ${o.source} is not valid (${plural(o.issues.length + o.moreIssues, "problem")}); nothing was stored.`,
        ...o.issues.map((i) => `- ${i}`),
        ...(o.moreIssues > 0 ? [`… and ${plural(o.moreIssues, "more problem")}.`] : []),
      ].join("\n"),
  },
  "library-error": {
    http: () => problem(422, "library-error"),
    exit: refused,
    text: (o) => `Cannot publish ${o.name} from the DAG library: ${o.message}`,
  },
  decision: {
    http: (o) => (o.result === "wrong-status" ? problem(409, "wrong-status", { run: o.run }) : ok200),
    exit: (o) => (o.result === "wrong-status" ? EXIT_REFUSED : EXIT_OK),
    text: (o, say) => {
      const id = o.run.dagId;
      const now = RUN_WORD[o.run.status];
      if (o.result === "done") {
        if (o.verb === "confirm")
          return o.run.registered === true
            ? `${id} is confirmed: registered, nothing runs now.`
            : `${id} is confirmed; it is running now.`;
        if (o.verb === "reject") return `${id} is rejected; it will not run.`;
        return o.run.status === "canceled"
          ? `${id} is canceled; none of its tasks was running.`
          : `Canceling ${id}: tasks that had not started are canceled, running ones are being stopped.`;
      }
      if (o.result === "already") {
        if (o.verb === "confirm") return `${id} is already confirmed; it ${RUN_SAID[o.run.status]}.`;
        return o.verb === "reject" ? `${id} is already rejected.` : `${id} is already ${now}.`;
      }
      const hint =
        o.verb === "reject" && (o.run.status === "running" || o.run.status === "canceling")
          ? ` To stop it: ${say.command("cancel", [id])}.`
          : "";
      return `${id} cannot be ${o.verb === "cancel" ? "canceled" : `${o.verb}ed`}: it ${RUN_SAID[o.run.status]}.${hint}`;
    },
  },
  gate: {
    http: (o) =>
      gateSucceeded(o)
        ? ok200
        : o.result === "form"
          ? problem(422, "command-error", { message: o.message ?? null })
          : problem(409, "wrong-status", { gate: o.gate, result: o.result }),
    exit: (o) => (gateSucceeded(o) ? EXIT_OK : EXIT_REFUSED),
    text: (o) => gateText(o),
  },
  "not-found": {
    http: (o) =>
      problem(404, o.taskId === null ? "run-not-found" : "task-not-found", {
        didYouMean: o.didYouMean,
        ...(o.taskId === null ? {} : { knownTasks: o.known }),
      }),
    exit: refused,
    text: (o) => {
      const guess = o.didYouMean === null ? "" : ` Did you mean ${o.didYouMean}?`;
      if (o.dag === true) return `There is no DAG or run "${o.dagId}" in this room.${guess}`;
      return o.taskId === null
        ? `No run named ${o.dagId} in this room.${guess}`
        : `Run ${o.dagId} has no task named ${o.taskId}.${guess} Its tasks: ${o.known.join(", ")}.`;
    },
  },
  status: { http: () => ok200, exit: success, text: statusText },
  overview: {
    http: () => ok200,
    exit: success,
    text: (o) => runLines(o.runs, "nothing is pending or running"),
  },
  list: {
    http: () => ok200,
    exit: success,
    text: (o) =>
      runLines(
        o.runs,
        emptyListWords(
          o.statuses,
          o.others,
          o.of !== undefined ? `of ${o.of}` : o.room !== undefined ? `in room ${o.room}` : "here",
        ),
      ),
    aside: (o, say) =>
      o.next === undefined ? null : `more: the next page with ${say.command("list", ["--cursor", o.next])}`,
  },
  schedules: {
    http: () => ok200,
    exit: success,
    text: (o) =>
      o.schedules.length === 0
        ? "no scheduled DAGs"
        : o.schedules
            .map((l) => `${l.dagId}  ${l.cron} ${l.timezone}  missed: ${l.missed}  ${scheduleState(l)}`)
            .join("\n"),
  },
  triggers: {
    http: () => ok200,
    exit: success,
    text: (o, say) => {
      const lines = o.triggers.map((t) => {
        const last =
          t.last === null
            ? "not fired yet"
            : t.last.run !== null
              ? `last: ${t.last.run} after ${t.last.upstream} ${t.last.status}`
              : `last: skipped after ${t.last.upstream} ${t.last.status}: ${t.last.reason ?? ""}`;
        const waiting = t.active ? "" : "  (fires once confirmed)";
        return `${t.dagId}  after ${t.after} ${t.status.join("|")}  ${last}${waiting}  owner ${t.owner}`;
      });
      const schedules =
        o.schedules === 0 ? [] : [`${o.schedules} schedule(s): ${say.command("schedules", [])} lists them`];
      return [
        ...(lines.length === 0 ? ["no DAG runs after another in this room"] : lines),
        ...schedules,
      ].join("\n");
    },
  },
  "schedule-changed": {
    http: (o) => (o.result === "wrong-state" ? problem(409, "schedule-deleted", { state: o.state }) : ok200),
    exit: (o) => (o.result === "wrong-state" ? EXIT_REFUSED : EXIT_OK),
    text: (o) => {
      const id = o.dagId;
      if (o.result === "wrong-state")
        return `The schedule of ${id} is deleted: it cannot be paused or resumed.`;
      if (o.result === "already") return `The schedule of ${id} was already ${o.state}.`;
      if (o.action === "pause") return `The schedule of ${id} is paused: no slot fires until it is resumed.`;
      if (o.action === "resume")
        return `The schedule of ${id} is active again: its next slot after now fires.`;
      return `The schedule of ${id} is deleted: it never fires again.`;
    },
  },
  "no-schedule": {
    http: () => problem(404, "schedule-not-found"),
    exit: refused,
    text: (o, say) => `${o.dagId} has no schedule in this room; ${say.command("schedules", [])} lists them.`,
  },
  logs: {
    http: () => ok200,
    exit: success,
    text: (o) => o.output ?? `(no output; ${o.task.taskId} is ${TASK_WORD[o.task.status]})`,
  },
  graph: {
    http: () => ok200,
    exit: success,
    text: (o, say) => `${say.command("graph", [o.run.dagId])} draws ${o.run.dagId}.`,
  },
  retried: {
    http: () => ({ ok: true, status: 201 }),
    exit: success,
    text: (o, say) => {
      const head = `Retrying the part of ${o.from.dagId} that did not succeed as ${o.run.dagId}: ${plural(
        o.taskIds.length,
        "task",
      )} (${o.taskIds.slice(0, 20).join(", ")}${o.taskIds.length > 20 ? ", …" : ""}).`;
      return o.needsConfirmation ? `${head} ${awaiting(o.run, false, say)}` : `${head} It starts now.`;
    },
  },
  "nothing-to-retry": {
    http: (o) => problem(409, "nothing-to-retry", { why: o.why, run: o.run }),
    exit: refused,
    text: (o, say) => {
      const id = o.run.dagId;
      if (o.why === "succeeded") return `${id} succeeded: nothing to retry.`;
      if (o.why === "not-ended")
        return `${id} is still ${RUN_WORD[o.run.status]}; retry is for a run that ended (${say.command("cancel", [id])} stops it).`;
      return `${id} cannot be retried: nobody confirmed it (it ${RUN_SAID[o.run.status]}).`;
    },
  },
  nodes: {
    http: () => ok200,
    exit: success,
    text: (o) =>
      o.nodes
        .map(
          (n) =>
            `${n.nodeId}${o.leader?.nodeId === n.nodeId ? " (leader)" : ""}: ${n.runningTasks}/${n.capacity} busy, ${describeRelease(n.release ?? null, n.protocol ?? null)}${[
              deviceWords(n),
              undecryptableWords(n),
            ]
              .map((w) => (w === null ? "" : `, ${w}`))
              .join("")}`,
        )
        .join("\n") || "no nodes",
  },
  cap: {
    http: () => ok200,
    exit: success,
    text: (o) => `The room's cap on active tasks is now ${o.cap} (was ${o.previous}).`,
  },
  policy: {
    http: () => ok200,
    exit: success,
    text: (o) => {
      const p = o.policy;
      const users = (list: readonly string[]): string => (list.length === 0 ? "nobody" : list.join(", "));
      return [
        o.changed === null
          ? "The room's policy:"
          : `The room's policy is changed${o.by === undefined ? "" : ` by ${o.by}`}${
              o.proposal === undefined
                ? ""
                : ` (proposed by ${o.proposal.proposedBy} as ${o.proposal.changeId})`
            }: ${o.changed}.`,
        `power_level ${p.powerLevel} · two_person_rule ${p.twoPersonRule ? "on" : "off"} · logs ${p.logs} · graph ${p.graph ?? "anyone"}`,
        `allow: ${users(p.allow)}`,
        `auto_confirm: ${users(p.autoConfirm)}`,
        `hook_auto_confirm: ${users(p.hookAutoConfirm ?? [])}`,
      ].join("\n");
    },
  },
  "policy-proposed": {
    http: () => ok200,
    exit: success,
    text: (o, say) =>
      `Policy change proposed by ${o.by}: ${o.change}. It is not applied yet: the two-person rule needs a second room admin to confirm it with ${say.command(
        "policy",
        ["confirm", o.changeId],
      )}. It expires in ${formatDuration(Math.max(0, o.expiresAt - o.proposedAt))}.`,
  },
  "not-leader": {
    http: () => problem(503, "not-leader"),
    exit: refused,
    text: (o) => `This node does not lead room ${o.roomId} right now; try again in a moment.`,
  },
  "edit-not-applied": {
    http: () => problem(500, "internal"),
    exit: refused,
    text: () => "Edits are not applied.",
  },
  undecryptable: {
    http: () => problem(500, "internal"),
    exit: refused,
    text: () => "The command could not be decrypted.",
  },
  ignored: { http: () => problem(500, "internal"), exit: refused, text: (o) => `Ignored: ${o.why}.` },
  "rate-limited": {
    http: () => problem(429, "rate-limited"),
    exit: refused,
    text: (o) => `Over the ${o.verb} rate limit: try again in ${retryWords(o.retryAfterMs)}.`,
  },
  quarantined: {
    http: (o) => problem(422, "quarantined", { losses: o.losses }),
    exit: refused,
    text: (o) =>
      `Dropped: handling this command took the room's leader down ${o.losses} times, so it is never handled again.`,
  },
};

/** A schedule's state in a line: paused (by whom, when, why) or its next slot; its owner. */
function scheduleState(l: Extract<Outcome, { kind: "schedules" }>["schedules"][number]): string {
  const owner = l.owner === undefined ? "" : `  owner ${l.owner}`;
  if (l.state === "paused") {
    const by = l.pausedBy === null || l.pausedBy === undefined ? "" : ` by ${l.pausedBy}`;
    const at =
      l.pausedAt === null || l.pausedAt === undefined ? "" : ` at ${new Date(l.pausedAt).toISOString()}`;
    const why = l.reason === null || l.reason === undefined ? "" : `: ${l.reason}`;
    return `paused${by}${at}${why}${owner}`;
  }
  const next = l.next === null ? "no next slot" : `next ${new Date(l.next).toISOString()}`;
  return `${next}${l.active ? "" : "  (fires once confirmed)"}${owner}`;
}

/** One line per run: its id (its name; the uuid is in the data as runId), status and task counts. */
function runLines(runs: Extract<Outcome, { kind: "list" }>["runs"], none: string): string {
  if (runs.length === 0) return none;
  return runs
    .map(
      ({ run, summary }) =>
        `${run.dagId.padEnd(24)} ${run.status.padEnd(10)} ${outcomeLine(summary.byStatus, summary.total)}`,
    )
    .join("\n");
}

/**
 * One run with its tasks: a line per task (state, how long, its node, attempts, how a failed one
 * ended, why a waiting one waits), the run's line, and whether the room is paused.
 */
function statusText(o: Extract<Outcome, { kind: "status" }>, say: Idiom): string {
  const idWidth = Math.min(40, Math.max(4, ...o.tasks.map((t) => t.taskId.length)));
  const lines = o.tasks.map((t) => {
    const took = t.startedAt === null ? null : (t.finishedAt ?? o.at) - t.startedAt;
    const cols = [
      t.taskId.padEnd(idWidth),
      t.status.padEnd(9),
      (took === null ? "-" : formatDuration(took)).padStart(8),
      t.node ?? "",
      t.attempt > 1 ? `attempts ${t.attempt}` : "",
      t.decided !== undefined
        ? t.decided
        : t.status === "failed" || t.status === "timed_out"
          ? exitWords(t.exitCode, t.error).join(", ")
          : (againWords(t) ?? ""),
      t.wait === undefined ? "" : `waits: ${t.wait.text}`,
    ];
    const line = `  ${cols.filter((c, i) => i < 3 || c !== "").join("  ")}`.trimEnd();
    // What it published for its dependents, one NAME=value a line under it.
    const published = Object.entries(t.outputs ?? {}).map(([name, value]) => `      output ${name}=${value}`);
    return [line, ...published].join("\n");
  });
  const run = o.run;
  const counts = TASK_STATUSES.filter((st) => (o.summary.byStatus[st] ?? 0) > 0)
    .map((st) => `${o.summary.byStatus[st]} ${st.replace("_", " ")}`)
    .join(", ");
  lines.push(
    `run ${run.dagId} (${run.runId}) ${runTimeWords(run.status, run.createdAt, run.updatedAt, o.at)}: ${counts}`,
  );
  if (o.failure !== undefined && o.failure !== "") lines.push(`  ${o.failure}`);
  if (showsPaused(run.status, o.roomCap))
    lines.push(
      `room ${o.room ?? "this room"} is paused (cap 0): no task starts until \`${say.command("cap", ["N"])}\` raises the cap`,
    );
  return lines.join("\n");
}

type AnyEntry = {
  http(o: Outcome): HttpAnswer;
  exit(o: Outcome): number;
  text(o: Outcome, say: Idiom): string;
  aside?(o: Outcome, say: Idiom): string | null;
};
const entryOf = (o: Outcome): AnyEntry => TABLE[o.kind] as unknown as AnyEntry;

/** What the outcome is over HTTP: a success status, or a problem's status, code and extension members. */
export function httpAnswerOf(o: Outcome): HttpAnswer {
  return entryOf(o).http(o);
}

/** The CLI's exit status for the outcome. */
export function exitStatusOf(o: Outcome): number {
  return entryOf(o).exit(o);
}

/** The outcome as plain text, naming other commands in the face's idiom. */
export function plainTextOf(o: Outcome, say: Idiom): string {
  return entryOf(o).text(o, say);
}

/** A line beside the outcome's text (a next page), or null. */
export function asideOf(o: Outcome, say: Idiom): string | null {
  return entryOf(o).aside?.(o, say) ?? null;
}

/** Where a created run can be read over HTTP (the Location of a 201). */
export function createdRunOf(o: Outcome): RunSummary | null {
  return o.kind === "published" || o.kind === "retried" ? o.run : null;
}
