/** The executor port: run one configured action for one task attempt, bounded in time and output. */
import type { ActionTemplate } from "../domain/action-argv.js";
import type { RunArgValue } from "../domain/action-argv.js";
import type { OversizeOutputFile } from "../domain/outputs.js";

/** An action as a node's config defines it. Durations are milliseconds. */
export interface ActionDefinition extends ActionTemplate {
  /** Working directory of the process; null means the node's own. */
  cwd: string | null;
  /** Added to the executor's minimal base environment (PATH, HOME, …). */
  env: Record<string, string>;
  /** Default run time limit; a task's own timeout overrides it. */
  timeoutMs: number;
  /** How many bytes of combined stdout+stderr are kept: the tail, never the head. */
  outputLimitBytes: number;
  /** Time between SIGTERM and SIGKILL to the action's process group. */
  killGraceMs: number;
  /**
   * Another user to run the action as (the node needs the right: root or CAP_SETUID/CAP_SETGID), so
   * it cannot read the node's files, memory or /proc entries; null runs it as the node's own user.
   */
  runAs?: { uid: number; gid: number } | null;
}

/** The identity of one attempt, given to the action so it can be idempotent across repeats. */
export interface ExecIdentityEnv {
  DAGBOT_RUN_ID: string;
  DAGBOT_TASK_ID: string;
  DAGBOT_ATTEMPT: string | number;
}

/**
 * What an action published in its DAGBOT_OUTPUT file (src/domain/outputs.ts says what it may hold):
 * the file's text, or why it could not be read (not a regular file, not UTF-8), or, for a file too
 * large to parse, its size and its lines counted by name (so that a list written with too many items
 * is refused for its count, not its size: oversizeProblem).
 */
export type PublishedFile = { text: string } | { problem: string } | { oversize: OversizeOutputFile };

export interface ExecRequest {
  action: ActionDefinition;
  args: Readonly<Record<string, RunArgValue>>;
  env: ExecIdentityEnv;
  /** Overrides action.timeoutMs (a task's `timeout`). */
  timeoutMs?: number;
  /** Abort to kill the action: lease lost, run canceled, node stopping. */
  signal?: AbortSignal;
  /**
   * The claim the action runs under. The executor never starts the action once the claim's stop
   * deadline minus the action's kill_grace has passed, and ends every process of the action by that
   * deadline even while this process is stopped or after it died.
   */
  claim?: ExecClaim;
  /**
   * While the action runs: called at most once per `outputEveryMs` (default 1 s), and only when it
   * wrote something since the last call, with the tail so far. Never called for an action that ends
   * within the first interval, nor after run() resolved.
   */
  onOutput?: (soFar: OutputSoFar) => void;
  outputEveryMs?: number;
  /**
   * Whether the task declares outputs: only then does the action get a DAGBOT_OUTPUT file (made,
   * read and removed around every attempt, a cost a task that publishes nothing need not pay).
   * Absent: true.
   */
  publishes?: boolean;
}

/** An action's output while it runs: the kept tail (whole UTF-8 characters) and the bytes it ends at. */
export interface OutputSoFar {
  output: string;
  /** Bytes written in all up to the end of `output`. */
  totalBytes: number;
}

/** What the executor needs of a claim: a deadline that each lease renewal moves later. */
export interface ExecClaim {
  /**
   * Milliseconds from now until every process of the action must be gone (the claim's stop
   * deadline); zero or less once it has passed.
   */
  msLeft(): number;
  /** Calls `listener` when the deadline moved (a renewal); returns the unsubscribe. */
  onMove(listener: () => void): () => void;
}

/**
 * - succeeded: exited with status 0.
 * - failed: nonzero status, killed by a signal we did not send, bad arguments, or could not start.
 * - timed_out: its deadline fired (the process was killed).
 * - killed: the request's AbortSignal fired (the process was killed).
 * - expired: the claim's stop deadline came before it ended (it was stopped) or before it could
 *   start (it never ran); the attempt is no longer the caller's to record.
 */
export type ExecOutcome = "succeeded" | "failed" | "timed_out" | "killed" | "expired";

export interface ExecResult {
  outcome: ExecOutcome;
  /** Null when the process was ended by a signal or never started. */
  exitCode: number | null;
  /** The signal that ended the process ("SIGKILL"), or null. */
  signal: string | null;
  /** The tail of combined stdout+stderr, at most action.outputLimitBytes bytes before UTF-8 decoding. */
  output: string;
  /** True when earlier output was dropped to keep only the tail. */
  outputTruncated: boolean;
  /** Every byte the action wrote to stdout and stderr, kept or not. */
  totalOutputBytes: number;
  durationMs: number;
  /** Why it did not succeed, in words for a person (bad argument, executable not found, timeout…). */
  error?: string;
  /**
   * After a success only: what the action wrote to the file named by DAGBOT_OUTPUT, a fresh file of
   * this attempt's (removed once read). Absent when the executor gives actions no such file.
   */
  published?: PublishedFile;
}

export interface Executor {
  /** Never rejects: every failure, including a refused argument, is an ExecResult. */
  run(request: ExecRequest): Promise<ExecResult>;
  /**
   * Gets ready for an action expected soon (the process executor starts its supervisor), so that
   * the first action does not wait for that; an executor with nothing to prepare has none.
   */
  prepare?(): void;
}
