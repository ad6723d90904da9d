/**
 * The one rule for stopping on a signal, shared by every long-running command (`dagbot node`,
 * `start`, `run`): the first SIGINT or SIGTERM asks for a graceful stop, any further one for a hard
 * stop (running actions killed). Only composition roots listen to signals.
 */

export type StopStage = "graceful" | "hard";

/** Calls `handler` on each SIGINT/SIGTERM with its stage; the returned function stops listening. */
export function onStopSignals(handler: (stage: StopStage, signal: NodeJS.Signals) => void): () => void {
  let count = 0;
  const listener = (signal: NodeJS.Signals): void => {
    count += 1;
    handler(count === 1 ? "graceful" : "hard", signal);
  };
  process.on("SIGINT", listener);
  process.on("SIGTERM", listener);
  return () => {
    process.off("SIGINT", listener);
    process.off("SIGTERM", listener);
  };
}

/** The log line each stage is announced with. */
export const STOP_MESSAGES: Readonly<Record<StopStage, string>> = {
  graceful:
    "stopping gracefully (running actions get stop_grace to finish; a second SIGINT or SIGTERM kills them now)",
  hard: "stopping now: killing running actions",
};
