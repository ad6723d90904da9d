/**
 * `dagbot run FILE`: run one DAG on this machine with N in-process nodes over the embedded SQLite
 * store (or any store), auto-confirmed, with live progress and a summary; exit 0 only when the run
 * succeeded. The nodes are ordinary engine nodes: they elect a leader, which handles the publish and
 * confirm commands this writes to the inbox, exactly as `dagbot submit` and chat would.
 */
import { performance } from "node:perf_hooks";
import type { Command } from "commander";
import type { CommandPolicy } from "../../app/commands/context.js";
import type { LogLevel, NodeConfig } from "../../config/node-config.js";
import { LOG_LEVELS } from "../../config/node-config.js";
import { isTerminalRun } from "../../domain/run-states.js";
import type { RunRecord, Store } from "../../ports/store.js";
import { isShared, roomActivity, startLocalNodes } from "../../composition/local-run.js";
import { watchStore } from "../../composition/store-watch.js";
import type { DagFile } from "../dag-file.js";
import { loadDagFile, publishCommand } from "../dag-file.js";
import { plainTextOf } from "../../app/commands/outcome-table.js";
import { CLI_IDIOM } from "./verb-commands.js";
import { CliError, EXIT_CONFIG, runCli } from "../cli-error.js";
import { colorFor } from "../progress.js";
import { makeLogger } from "../../composition/engine-settings.js";
import { openConfiguredStore } from "../../composition/store-open.js";
import { pickRoom, resolveConfig, withCommonOptions } from "../config-options.js";
import type { CommonOptions } from "../config-options.js";
import { createProgress, renderSummary } from "../progress.js";
import { answerOf, command } from "../../composition/leader-room.js";
import { SetupError } from "../../composition/setup-error.js";
import { commandPolicy, queueLocalCommands } from "../../composition/command-step.js";
import { dagHash } from "../../domain/canonical-hash.js";
import { WaitNotice } from "../wait-notice.js";
import { readRoomWaits, waitsOf } from "../../app/task-waits.js";
import { groupWaits, waitsLine } from "../../domain/wait-reasons.js";
import { onStopSignals } from "../../composition/stop-signals.js";

interface RunOptions extends CommonOptions {
  nodes: string;
  join?: boolean;
}

const MAX_NODES = 32;
// The progress view waits this many times its last read before reading again (see follow()).
const READ_SHARE_PAUSE = 19;
// The in-process nodes elect a leader within milliseconds; a leader in another process on the same
// store answers as fast. This only bounds a store where some other, stuck process holds the lease.
const COMMAND_WAIT_MS = 60_000;

export function registerRun(program: Command): void {
  withCommonOptions(
    program
      .command("run")
      .description("Run a DAG on this machine with N in-process worker nodes, showing live progress.")
      .argument("<file>", "the DAG document (.json or .toml)")
      .option("-n, --nodes <n>", `how many in-process nodes run tasks (1-${MAX_NODES})`, "2")
      .option(
        "--join",
        "run even when other live nodes serve the room or it has active schedules: the in-process nodes then join it as full nodes",
      ),
    "The run is auto-confirmed. With no --config, the package's config/local.toml is used: an engine-only\n" +
      'node with the example actions (echo, sleep, true, fail) and the store "sqlite:./data/dagbot.db"\n' +
      "(its folder is created). Nodes are named <node_id>-1 ... <node_id>-N. Running a DAG whose id is already\n" +
      "in the store runs it again under the next free id (<id>.2, <id>.3, ...).\n" +
      "Progress: a task list redrawn in place on a terminal, one line per task change otherwise; then a summary\n" +
      "with durations. Logs go to stderr at level warn unless --log-level or DAGBOT_LOG_LEVEL says otherwise.\n" +
      "Ctrl-C cancels the run (a second Ctrl-C stops at once).\n" +
      "On a store whose room other live nodes serve, or that has active schedules (a shared store), it refuses\n" +
      "unless --join is given: its nodes would lead that room, fire its schedules and run its tasks. Hand the\n" +
      "DAG to that fleet with `dagbot submit FILE --confirm` instead.\n" +
      "Exit status: 0 the run succeeded, 1 it failed, was canceled or could not start, 2 bad file or config.",
  ).action((file: string, options: RunOptions) => runCli("run", () => runDag(file, options)));
}

function parseNodeCount(text: string): number {
  const n = /^\d{1,3}$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_NODES) {
    throw new CliError(`--nodes must be a whole number from 1 to ${MAX_NODES}, got "${text.slice(0, 20)}"`);
  }
  return n;
}

function runLogLevel(options: RunOptions): LogLevel {
  const chosen = options.logLevel ?? process.env["DAGBOT_LOG_LEVEL"];
  return chosen !== undefined && chosen !== "" && (LOG_LEVELS as readonly string[]).includes(chosen)
    ? (chosen as LogLevel)
    : "warn";
}

/** Node ids of the in-process nodes. */
export function localNodeIds(base: string, count: number): string[] {
  if (count === 1) return [base];
  return Array.from({ length: count }, (_, i) => `${base.slice(0, 60)}-${i + 1}`);
}

/** Tasks that none of the local nodes could ever run, as messages naming the task and what it needs. */
export function unplaceable(dag: DagFile, config: NodeConfig, nodeIds: readonly string[]): string[] {
  const problems: string[] = [];
  for (const [i, t] of dag.dag.tasks.entries()) {
    const where = `tasks[${i}] (${t.id})`;
    if (t.gate !== undefined) continue;
    if (config.actions[t.action] === undefined) {
      problems.push(
        `${where}: action "${t.action}" is not defined in the node config (it has: ${Object.keys(config.actions).sort().join(", ") || "none"})`,
      );
    }
    const missing = t.on.labels.filter((l) => !config.labels.includes(l));
    if (missing.length > 0) {
      problems.push(
        `${where}: needs label${missing.length > 1 ? "s" : ""} ${missing.join(", ")}; the local nodes have [${config.labels.join(", ")}]`,
      );
    }
    if (t.on.node !== null && !nodeIds.includes(t.on.node)) {
      problems.push(`${where}: pinned to node "${t.on.node}"; the local nodes are ${nodeIds.join(", ")}`);
    }
  }
  return problems;
}

const MAX_SUFFIX = 10_000;

/** The DAG's own id when it is new in the room, else the first free `<id>.<n>` (n ≥ 2). */
export async function freeDagId(
  store: Pick<Store, "getRun">,
  roomId: string,
  base: string,
  from = 2,
): Promise<string> {
  if (from === 2 && (await store.getRun(roomId, base)) === null) return base;
  for (let n = from; n < MAX_SUFFIX; n++) {
    const suffix = `.${n}`;
    const id = `${base.slice(0, 64 - suffix.length)}${suffix}`;
    if ((await store.getRun(roomId, id)) === null) return id;
  }
  throw new CliError(`no free id left for "${base}" (tried up to .${MAX_SUFFIX - 1})`, 1);
}

async function runDag(file: string, options: RunOptions): Promise<number> {
  const count = parseNodeCount(options.nodes);
  const config = resolveConfig(options);
  const roomId = pickRoom(config, undefined);
  const dag = await loadDagFile(file);
  const nodeIds = localNodeIds(config.nodeId, count);
  const problems = unplaceable(dag, config, nodeIds);
  if (problems.length > 0) {
    throw new CliError(
      `${file} cannot run on the local nodes:\n${problems.map((p) => `  ${p}`).join("\n")}`,
      EXIT_CONFIG,
    );
  }
  const logger = makeLogger(config, runLogLevel(options));
  const store = await openConfiguredStore(config, { node: logger });
  if (options.join !== true) {
    const activity = await roomActivity(store, config, roomId, nodeIds).catch(async (err: unknown) => {
      await store.close();
      throw err;
    });
    if (isShared(activity)) {
      await store.close();
      const what = [
        activity.liveNodes.length === 0 ? null : `live nodes serve it (${activity.liveNodes.join(", ")})`,
        activity.schedules.length === 0 ? null : `it has active schedules (${activity.schedules.join(", ")})`,
        activity.triggers.length === 0
          ? null
          : `it has DAGs that run after another DAG's runs (${activity.triggers.join(", ")})`,
      ].filter((w) => w !== null);
      throw new CliError(
        `room ${roomId} of this store is shared: ${what.join(" and ")}. dagbot run would join it as full nodes ` +
          "(lead it, fire its schedules and triggers, run its tasks). Hand the DAG to that fleet with " +
          `\`dagbot submit ${file} --confirm\`, or pass --join to run here anyway.`,
        EXIT_CONFIG,
      );
    }
  }
  const nodes = startLocalNodes(config, store, logger, nodeIds);
  const stopAll = new AbortController();
  let runId: string | null = null;
  let dagId: string | null = null;
  const stopListening = onStopSignals((stage) => {
    if (stage === "graceful" && dagId !== null) {
      process.stderr.write("\ncanceling the run (Ctrl-C again to stop at once)\n");
      void command(
        store,
        roomId,
        { verb: "cancel", id: dagId },
        COMMAND_WAIT_MS,
        commandPolicy(config),
      ).catch(() => {});
    } else {
      process.stderr.write("\nstopping now\n");
      stopAll.abort();
    }
  });
  try {
    const started = await publishAndConfirm(store, roomId, dag, commandPolicy(config));
    runId = started.runId;
    dagId = started.dagId;
    if (dagId !== dag.dag.id)
      process.stderr.write(`dag ${dag.dag.id} is already in the store; running it again as ${dagId}\n`);
    const run = await follow(store, roomId, runId, stopAll.signal, config.retention.nodeGoneAfterMs);
    if (run === null || !isTerminalRun(run.status)) return 1;
    return run.status === "succeeded" ? 0 : 1;
  } finally {
    // Signals stay handled until the nodes are down: one during the stop kills running actions.
    const onAbort = (): void => void nodes.stop({ abortRunning: true });
    stopAll.signal.addEventListener("abort", onAbort, { once: true });
    await nodes.stop({ abortRunning: stopAll.signal.aborted });
    await store.close();
    stopListening();
  }
}

/**
 * Publishes under a free id (racing another publisher moves on to the next id), then confirms. The
 * confirm is queued right behind the publish, for the content hash of exactly what is published
 * under that id: the leader takes the two in order, in one pass of its inbox, so the run starts
 * without a second round trip through the leader (bench/README.md, "`dagbot run` of a one-task
 * DAG"). The confirm asks the same rule as any other (the two-person rule, auto_confirm); one that
 * finds the run started already (auto_confirm) changes nothing, and a confirm a leader refused for
 * the hash (one that hashes content otherwise) is sent again with the hash the run has.
 */
async function publishAndConfirm(
  store: Store,
  roomId: string,
  dag: DagFile,
  policy: CommandPolicy,
): Promise<{ runId: string; dagId: string }> {
  let id = await freeDagId(store, roomId, dag.dag.id);
  for (let attempt = 0; ; attempt++) {
    const [publishing, confirming] = await queueLocalCommands(store, roomId, [
      publishCommand(dag.document, id),
      { verb: "confirm", id, hash: dagHash({ ...dag.dag, id }) },
    ]);
    const answer = await answerOf(store, roomId, publishing, COMMAND_WAIT_MS, policy).catch(
      (err: unknown) => {
        if (!(err instanceof SetupError)) throw err;
        // Both stay queued, in order: the next leader of the room publishes and confirms the run.
        throw new CliError(
          `no leader of room ${roomId} answered within ${COMMAND_WAIT_MS / 1000}s; the publish and its ` +
            "confirm stay in the inbox, and the run starts when a node of the room leads it",
          1,
        );
      },
    );
    // A leader that took the publish takes the confirm next: its answer is awaited in every case,
    // so that no confirm of this command is left for a later leader to apply.
    let confirmed = await answerOf(store, roomId, confirming, COMMAND_WAIT_MS, policy);
    const kind = answer.outcome?.kind ?? (answer.runId !== null ? "published" : null);
    if ((kind === "exists" || kind === "conflict") && attempt < 5) {
      id = await freeDagId(store, roomId, dag.dag.id, 2);
      continue;
    }
    if (kind !== "published" || answer.runId === null) {
      throw new CliError(
        `the leader did not start the run:\n${
          answer.outcome === null ? JSON.stringify(answer.row.result) : plainTextOf(answer.outcome, CLI_IDIOM)
        }`,
        1,
      );
    }
    let run = await store.getRunById(answer.runId);
    if (run?.status === "pending" && confirmed.outcome?.kind === "hash-mismatch") {
      confirmed = await command(
        store,
        roomId,
        { verb: "confirm", id, hash: run.hash },
        COMMAND_WAIT_MS,
        policy,
      );
      run = await store.getRunById(answer.runId);
    }
    if (run?.status === "pending") {
      throw new CliError(
        `the run could not be confirmed:\n${
          confirmed.outcome === null ? "no answer" : plainTextOf(confirmed.outcome, CLI_IDIOM)
        }`,
        1,
      );
    }
    return { runId: answer.runId, dagId: id };
  }
}

/**
 * Shows progress until the run ends (or `stop` aborts), then the summary, and a line whenever the
 * run's tasks have waited a moment for something other than their needs. Returns the last state.
 */
async function follow(
  store: Store,
  roomId: string,
  runId: string,
  stop: AbortSignal,
  liveWithinMs: number,
): Promise<RunRecord | null> {
  const out = process.stdout;
  const view = createProgress(out, { color: colorFor(out) });
  // The run's own changes (running, then its end) come a few times a run: the view shows its end
  // at once, not after the debounce of task changes, and the command exits that much sooner.
  const watch = watchStore(store, roomId, ["tasks", "runs"], { urgent: ["runs"] });
  // Task times are on the store's clock; durations of running tasks are shown against it.
  const offset = (await store.now()) - Date.now();
  let run: RunRecord | null = null;
  const notice = new WaitNotice();
  try {
    while (!stop.aborted) {
      const readStarted = performance.now();
      run = await store.getRunById(runId);
      if (run === null) return null;
      const tasks = await store.listTasks(runId);
      const now = Date.now() + offset;
      if (isTerminalRun(run.status)) {
        view.finish(run, tasks, now);
        out.write(out.isTTY ? lastLine(renderSummary(run, tasks, now)) : renderSummary(run, tasks, now));
        return run;
      }
      const waits = waitsOf(run, tasks, await readRoomWaits(store, roomId, liveWithinMs));
      const waiting = notice.settle(waitsLine(groupWaits(waits)), now);
      view.update(run, tasks, now, waiting === "" ? "" : `${run.dagId}: ${waiting}`);
      const idle = out.isTTY ? 500 : 2_000;
      // The nodes running the DAG share this process and its one thread: reading and drawing a run
      // of 1,000 tasks takes about 10 ms, and a read after every change took a fifth of the thread
      // (bench/README.md, "A DAG of processes beside the floor"); at 9 times the last read it still
      // took 8 % (231 ms of a 2.9 s run, a CPU profile). Waiting 19 times the last read keeps the
      // view to a twentieth of it (a read of 10 ms: about 5 views a second); a small run's view
      // stays as prompt as before, and the run's end is shown at once.
      const pause = Math.min(idle, READ_SHARE_PAUSE * (performance.now() - readStarted));
      await watch.wait(Math.min(idle, notice.dueInMs(now) ?? idle), stop, pause);
    }
    return run;
  } finally {
    watch.close();
  }
}

function lastLine(text: string): string {
  const lines = text.trimEnd().split("\n");
  return `${lines[lines.length - 1] ?? ""}\n`;
}
