/**
 * The reply to a command, rendered from its stored outcome alone (no store reads), so the same
 * outcome always renders the same reply. `null` means the outcome deserves no reply (a reaction that
 * was not a decision).
 */
import { shortHash } from "../../domain/commands.js";
import { formatDuration } from "../../domain/duration.js";
import type { Outcome, RunProgress, RunSummary, ScheduleLine } from "../commands/outcome.js";
import type { Rendered } from "./html.js";
import { code, codeBlock, escapeHtml, join, r, text, userPill } from "./html.js";
import { honestProgress, renderRunView, renderTaskLine } from "./status-card.js";
import { dateTime, plural, RUN_EMOJI, RUN_WORD, shortRunId, TASK_WORD } from "./words.js";

export function renderOutcome(outcome: Outcome): Rendered | null {
  switch (outcome.kind) {
    case "help":
      return renderHelp(outcome);
    case "command-error":
      return paragraphs([r`⚠️ ${outcome.message}`, usage(outcome.helpLine)]);
    case "refused":
      return paragraphs([r`⛔ ${outcome.reason}`, usage(outcome.helpLine)]);
    case "published":
      return renderPublished(
        outcome.run,
        outcome.needsConfirmation,
        outcome.twoPersonRule,
        outcome.run.definition === undefined ? "Published" : `New run of ${outcome.run.definition}:`,
      );
    case "exists":
      return paragraphs([
        r`${code(outcome.run.dagId)} already exists with the same content: nothing new was stored.`,
        r`It is ${RUN_WORD[outcome.run.status]} (run ${code(shortRunId(outcome.run.runId))}, published by ${userPill(
          outcome.run.publisher,
        )} at ${dateTime(outcome.run.createdAt)}). See ${code(`!dag status ${outcome.run.dagId}`)}.`,
      ]);
    case "conflict":
      return paragraphs([
        r`⚠️ ${code(outcome.dagId)} already exists with different content (${
          RUN_WORD[outcome.existing.status]
        }, published by ${userPill(outcome.existing.publisher)}): nothing was stored.`,
        r`To publish this DAG, give it a new ${code("id")} (for example ${code(outcome.suggestion)}); to run the failed part of the existing one again, use ${code(
          `!dag retry ${outcome.dagId}`,
        )}.`,
      ]);
    case "invalid-dag":
      return renderInvalidDag(outcome.source, outcome.issues, outcome.moreIssues);
    case "library-error":
      return paragraphs([
        r`⚠️ Cannot publish ${code(outcome.name)} from the DAG library: ${outcome.message}`,
        usage(
          "!dag publish <name>  (a DAG file from the node's library folder), or a ```json / ```toml block",
        ),
      ]);
    case "decision":
      return renderDecision(outcome);
    case "not-found":
      return renderNotFound(outcome);
    case "status":
      return renderRunView(
        {
          run: outcome.run,
          summary: outcome.summary,
          tasks: outcome.tasks,
          at: outcome.at,
          ...(outcome.roomCap === undefined ? {} : { roomCap: outcome.roomCap }),
        },
        false,
      );
    case "overview":
      return outcome.runs.length === 0
        ? r`Nothing is pending or running in this room. ${code("!dag list")} shows recent runs.`
        : listing(r`${plural(outcome.runs.length, "active run")}:`, outcome.runs);
    case "schedules":
      return renderSchedules(outcome.schedules);
    case "list":
      if (outcome.of !== undefined)
        return listing(
          r`${plural(outcome.runs.length, "run")} of ${code(outcome.of)}, newest first (start another with ${code(
            `!dag run ${outcome.of}`,
          )}):`,
          outcome.runs,
        );
      return outcome.runs.length === 0
        ? r`No runs in this room yet. Publish one with ${code("!dag publish")} and a json or toml block.`
        : listing(r`The ${plural(outcome.runs.length, "latest run")} in this room:`, outcome.runs);
    case "logs":
      return renderLogs(outcome);
    case "graph":
      // In chat the picture itself is the reply (app/pictures.ts); this is its text elsewhere.
      return r`A picture of ${code(outcome.run.dagId)} is posted in its thread; ${code(
        `dagbot graph ${outcome.run.dagId}`,
      )} draws it on a node.`;
    case "retried":
      return renderRetried(outcome);
    case "nothing-to-retry":
      return renderNothingToRetry(outcome.run, outcome.why);
    case "nodes":
      return renderNodes(outcome);
    case "cap":
      return r`The room's cap on running tasks is now ${String(outcome.cap)} (it was ${String(
        outcome.previous,
      )}). ${
        outcome.cap >= outcome.previous
          ? "Queued tasks start as soon as slots are free."
          : "Running tasks are not interrupted; new ones start as they finish."
      }`;
    case "policy": {
      const p = outcome.policy;
      const users = (list: readonly string[]): string => (list.length === 0 ? "nobody" : list.join(", "));
      const lines = [
        `power_level ${p.powerLevel} · two_person_rule ${p.twoPersonRule ? "on" : "off"} · logs ${p.logs}`,
        `allow: ${users(p.allow)}`,
        `auto_confirm: ${users(p.autoConfirm)}`,
      ];
      const head =
        outcome.changed === null
          ? "The room's policy (every node enforces it):"
          : `The room's policy is changed (${outcome.changed}); every node enforces it now. Update [permissions] in the nodes' configs to match, or they will not lead after a restart:`;
      return r`${head}${codeBlock(lines.join("\n"))}`;
    }
    case "not-leader":
      return r`This node does not lead room ${code(outcome.roomId)} right now, so it cannot change anything there; try again in a moment or send the command in the room.`;
    case "undecryptable":
      return r`🔒 I could not decrypt your message, so I cannot tell whether it was a command. If it was, please send it again. (Your client may not have shared the room key with this bot's session; I say this at most once every 10 minutes.)`;
    case "edit-not-applied":
      return r`✏️ Edits are not applied: dagbot acts on a command as it was first sent, whatever the edit shows. To change it, send the command again as a new message (for a DAG: publish again).`;
    case "ignored":
      return null;
  }
}

function renderNothingToRetry(
  run: RunSummary,
  why: Extract<Outcome, { kind: "nothing-to-retry" }>["why"],
): Rendered {
  switch (why) {
    case "succeeded":
      return r`${code(run.dagId)} succeeded: nothing to retry.`;
    case "not-ended":
      return r`${code(run.dagId)} is still ${RUN_WORD[run.status]}; retry is for a run that ended. Stop it first with ${code(
        `!dag cancel ${run.dagId}`,
      )}.`;
    case "never-confirmed":
      return r`⛔ ${code(run.dagId)} cannot be retried: nobody confirmed it (it is ${RUN_WORD[run.status]}), and retry is for a run that was confirmed and ran. To run it, publish it again under a new id; it then awaits confirmation like any new DAG.`;
  }
}

function paragraphs(parts: readonly Rendered[]): Rendered {
  return { body: parts.map((p) => p.body).join("\n"), html: parts.map((p) => `<p>${p.html}</p>`).join("") };
}

/** "Usage: `!dag confirm <id>`": help lines carry their own "usage: " prefix, said here once. */
function usage(helpLine: string): Rendered {
  const line = helpLine.replace(/^usage:\s*/i, "");
  return line === helpLine && !line.startsWith("!dag") ? code(line) : r`Usage: ${code(line)}`;
}

function renderHelp(outcome: Extract<Outcome, { kind: "help" }>): Rendered {
  const items = outcome.entries.map((e) => r`${code(e.usage)} — ${e.summary}`);
  const head = outcome.details.length > 0 ? [] : [text("Commands you may use in this room:")];
  const details = outcome.details.length > 0 ? [codeBlock(outcome.details.join("\n"))] : [];
  const hidden =
    outcome.hiddenVerbs.length === 0
      ? []
      : [
          text(
            `${outcome.hiddenVerbs.join(", ")} ${outcome.hiddenVerbs.length === 1 ? "needs" : "need"} power level ${outcome.requiredPowerLevel} in this room or a place on the allowlist.`,
          ),
        ];
  return {
    body: [...head, ...items, ...details, ...hidden].map((p) => p.body).join("\n"),
    html:
      head.map((p) => `<p>${p.html}</p>`).join("") +
      `<ul>${items.map((i) => `<li>${i.html}</li>`).join("")}</ul>` +
      details.map((d) => d.html).join("") +
      hidden.map((p) => `<p>${p.html}</p>`).join(""),
  };
}

/** A slot's time to the second (schedules may fire every second). */
const toSecond = (ms: number): string => `${new Date(ms).toISOString().slice(0, 19).replace("T", " ")} UTC`;

function renderSchedules(lines: readonly ScheduleLine[]): Rendered {
  if (lines.length === 0)
    return r`No scheduled DAGs in this room. A DAG declares one with ${code('schedule = "0 2 * * *"')}.`;
  return paragraphs([
    r`${plural(lines.length, "scheduled DAG")}:`,
    ...lines.map((l) => {
      const next = l.next === null ? "no next slot" : `next ${toSecond(l.next)}`;
      const last = l.last === null ? "" : `, last fired for ${toSecond(l.last)}`;
      const waiting = l.active ? "" : " (fires once confirmed)";
      return r`⏰ ${code(l.dagId)} — ${code(l.cron)} ${l.timezone}, missed: ${l.missed} · ${next}${last}${waiting}`;
    }),
  ]);
}

function renderPublished(
  run: RunSummary,
  needsConfirmation: boolean,
  twoPersonRule: boolean,
  verb: string,
): Rendered {
  const hash = run.hash === undefined ? "" : r`, content hash ${code(shortHash(run.hash))}`;
  const values = Object.entries(run.params ?? {});
  const given = values.length === 0 ? "" : r`; ${code(values.map(([n, v]) => `${n}=${v}`).join(" "))}`;
  const head = r`📥 ${verb} ${code(run.dagId)} (${plural(run.taskCount, "task")}, run ${code(shortRunId(run.runId))}${hash}${given}).`;
  if (!needsConfirmation) {
    return paragraphs([head, text("It starts now; the status card in this thread follows its progress.")]);
  }
  const expiry =
    run.confirmDeadline === null
      ? ""
      : ` within ${formatDuration(Math.max(0, run.confirmDeadline - run.createdAt))}`;
  const who = twoPersonRule ? "someone other than the publisher" : "an authorised member";
  return paragraphs([
    head,
    r`It awaits confirmation${expiry}: ${who} reads its status card (it shows what will run) and sends ${code(
      `!dag confirm ${run.hash === undefined ? run.dagId : `${run.dagId} ${shortHash(run.hash)}`}`,
    )} or reacts ✅ on it (${code(`!dag reject ${run.dagId}`)} or ❌ drops it).`,
  ]);
}

const MAX_SHOWN_ISSUES = 20;

function renderInvalidDag(source: string, issues: readonly string[], more: number): Rendered {
  const shown = issues.slice(0, MAX_SHOWN_ISSUES);
  const extra = more + issues.length - shown.length;
  const head = r`⚠️ The DAG ${source} is not valid (${plural(issues.length + more, "problem")}); nothing was stored.`;
  const tail = extra > 0 ? [text(`… and ${plural(extra, "more problem")}.`)] : [];
  return {
    body: [head.body, ...shown.map((i) => `- ${i}`), ...tail.map((t) => t.body)].join("\n"),
    html:
      `<p>${head.html}</p><ul>${shown.map((i) => `<li><code>${escapeHtml(i)}</code></li>`).join("")}</ul>` +
      tail.map((t) => `<p>${t.html}</p>`).join(""),
  };
}

function renderDecision(outcome: Extract<Outcome, { kind: "decision" }>): Rendered {
  const { run, verb, result } = outcome;
  const id = code(run.dagId);
  const now = RUN_WORD[run.status];
  if (result === "done") {
    if (verb === "confirm") return r`▶️ ${userPill(outcome.by)} confirmed ${id}; it is running now.`;
    if (verb === "reject") return r`✋ ${userPill(outcome.by)} rejected ${id}; it will not run.`;
    return run.status === "canceled"
      ? r`🚫 ${id} is canceled; none of its tasks was running.`
      : r`🛑 Canceling ${id}: tasks that had not started are canceled, running ones are being stopped.`;
  }
  if (result === "already") {
    if (verb === "confirm") {
      const by = run.confirmedBy === null ? text("") : r` by ${userPill(run.confirmedBy)}`;
      return r`${id} is already confirmed${by}; it is ${now}.`;
    }
    return verb === "reject" ? r`${id} is already rejected.` : r`${id} is already ${now}.`;
  }
  const hint =
    verb === "reject" && (run.status === "running" || run.status === "canceling")
      ? r` To stop it, use ${code(`!dag cancel ${run.dagId}`)}.`
      : text("");
  return r`${id} cannot be ${verb === "cancel" ? "canceled" : `${verb}ed`}: it is ${now}.${hint}`;
}

function listing(head: Rendered, runs: readonly RunProgress[]): Rendered {
  const items = runs.map(
    ({ run, summary }) =>
      r`${RUN_EMOJI[run.status]} ${code(run.dagId)} — ${RUN_WORD[run.status]} · ${honestProgress(
        summary,
      )} · by ${userPill(run.publisher)} · ${dateTime(run.createdAt)}`,
  );
  return {
    body: [head.body, ...items.map((i) => i.body)].join("\n"),
    html: `<p>${head.html}</p><ul>${items.map((i) => `<li>${i.html}</li>`).join("")}</ul>`,
  };
}

function renderLogs(outcome: Extract<Outcome, { kind: "logs" }>): Rendered {
  const { run, task } = outcome;
  const head = r`Output of ${code(task.taskId)} in ${code(run.dagId)}: ${renderTaskLine(task, outcome.at)}`;
  if (outcome.output === null || outcome.output === "") {
    const why = task.finishedAt === null ? `no output yet (it is ${TASK_WORD[task.status]}).` : "no output.";
    return paragraphs([head, text(why)]);
  }
  const cut =
    outcome.omittedChars > 0
      ? [text(`(the last part only: ${plural(outcome.omittedChars, "earlier character")} omitted)`)]
      : [];
  // A task still running shows what it wrote so far; a task waiting for a retry, its last attempt's.
  const partial =
    task.status === "running" || task.status === "canceling"
      ? [text("(partial: its output so far; it is still running)")]
      : task.finishedAt === null && task.attempt > 1
        ? [text(`(from attempt ${task.attempt - 1}; attempt ${task.attempt} has not started)`)]
        : [];
  const block = codeBlock(outcome.output);
  return {
    body: [head.body, ...partial.map((c) => c.body), ...cut.map((c) => c.body), block.body].join("\n"),
    html: paragraphs([head, ...partial, ...cut]).html + block.html,
  };
}

function renderRetried(outcome: Extract<Outcome, { kind: "retried" }>): Rendered {
  const shown = outcome.taskIds.slice(0, 20).map((t) => code(t));
  const more =
    outcome.taskIds.length > shown.length
      ? text(` and ${outcome.taskIds.length - shown.length} more`)
      : text("");
  const next = outcome.needsConfirmation
    ? r`It awaits confirmation: ${code(`!dag confirm ${outcome.run.dagId}`)} or ✅ on its status card.`
    : text("It starts now; the status card in this thread follows its progress.");
  return paragraphs([
    r`🔁 Retrying the part of ${code(outcome.from.dagId)} that did not succeed as ${code(outcome.run.dagId)}: ${plural(
      outcome.taskIds.length,
      "task",
    )} (${join(shown, ", ")}${more}).`,
    next,
  ]);
}

function renderNodes(outcome: Extract<Outcome, { kind: "nodes" }>): Rendered {
  if (outcome.nodes.length === 0) return text("No node has reported a heartbeat yet.");
  const leader = outcome.leader;
  const head =
    leader === null
      ? text("No node leads this room right now.")
      : outcome.verbose === true
        ? r`${code(leader.nodeId)} leads this room (term ${String(leader.term)}, lease ${
            leader.expiresInMs > 0 ? `valid for ${formatDuration(leader.expiresInMs)}` : "expired"
          }).`
        : r`${code(leader.nodeId)} leads this room.`;
  const items = outcome.nodes.map((n) => {
    const alive = n.heartbeatAgeMs <= outcome.staleAfterMs;
    // A node silent past the limit is gone (killed, crashed, cut off): say so and since when,
    // not its last-known slots; it is dropped from the list after the retention.
    if (!alive) return r`⚫ ${code(n.nodeId)} · gone: last heartbeat ${formatDuration(n.heartbeatAgeMs)} ago`;
    const labels =
      n.labels.length === 0
        ? text("no labels")
        : r`labels ${join(
            n.labels.map((l) => code(l)),
            ", ",
          )}`;
    const isLeader = leader !== null && leader.nodeId === n.nodeId ? " (leader)" : "";
    return r`🟢 ${code(n.nodeId)}${isLeader} · ${labels} · ${String(n.runningTasks)}/${String(
      n.capacity,
    )} slots busy · ${plural(n.actions.length, "action")} · heartbeat ${formatDuration(n.heartbeatAgeMs)} ago${
      n.undecryptable > 0 ? ` · ${plural(n.undecryptable, "undecryptable event")}` : ""
    }${n.serves ? "" : " · not serving this room"}`;
  });
  return {
    body: [head.body, ...items.map((i) => i.body)].join("\n"),
    html: `<p>${head.html}</p><ul>${items.map((i) => `<li>${i.html}</li>`).join("")}</ul>`,
  };
}

function renderNotFound(outcome: Extract<Outcome, { kind: "not-found" }>): Rendered {
  const guess = outcome.didYouMean === null ? text("") : r` Did you mean ${code(outcome.didYouMean)}?`;
  if (outcome.taskId === null) {
    return r`No run named ${code(outcome.dagId)} in this room.${guess} ${code("!dag list")} shows the runs.`;
  }
  const known = join(
    outcome.known.map((t) => code(t)),
    ", ",
  );
  return r`Run ${code(outcome.dagId)} has no task named ${code(outcome.taskId)}.${guess} Its tasks: ${known}.`;
}
